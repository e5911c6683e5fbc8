"""Reading a run (the format of :mod:`daskgp.runs.layout`): the committed content, every block of every array
checked against the checkpoint's digest before any number is shown, and the run as an ``xarray.DataTree``
in ArviZ's layout. Opens everything read-only and writes nothing; damage is reported in one line naming the
file and what ``daskgp repair`` can do (:func:`damage_message`), never summarised as numbers.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np
import zarr

from .commit import RunDamaged, digest
from .layout import (
    DATA_DIMS,
    DATA_GROUPS,
    GROUPS,
    MARKER,
    check_is_run,
    group_blocks,
    is_warmup_group,
    norm_path,
    read_checkpoint,
    root_attributes,
)
from .lock import LockInfo, lock_info

__all__ = ["Committed", "Damage", "read_committed", "read_run", "stored_dataset", "scan_blocks",
           "damage_message"]


# ------------------------------------------------------------------------------------------ committed data
@dataclass
class Committed:
    """A run's committed content, verified: ``attrs`` (decoded root attributes), ``checkpoint``, ``data``
    {group: {name: array (chains, n_draws) or coordinate}}, and ``lock`` (its writer, if any)."""

    path: str
    attrs: dict
    checkpoint: dict
    data: dict
    lock: LockInfo | None


_NO_REBUILD = "daskgp repair cannot rebuild it: sample the run again"


@dataclass
class Damage:
    key: str
    first_bad: int  # first draw that cannot be trusted
    text: str
    fix: str | None = None  # what to do, when not a salvage of the draws before first_bad


def _missing_chunks(path: str, key: str, arr, start: int, end: int) -> list[str]:
    chunk = arr.chunks[-1]
    lead = [math.ceil(s / c) for s, c in zip(arr.shape[:-1], arr.chunks[:-1], strict=True)]
    keys = [arr.metadata.encode_chunk_key((*idx, j))
            for j in range(start // chunk, (end - 1) // chunk + 1) for idx in np.ndindex(*lead)]
    return [k for k in keys if not os.path.isfile(os.path.join(path, key, k))]


def scan_blocks(path: str, ckpt: dict) -> tuple[dict, list[Damage]]:
    """Read every committed array (read-only) and check each block against its digest."""
    ends, W = ckpt["block_ends"], ckpt["warmup_draws"]
    data: dict = {g: {} for g in GROUPS + DATA_GROUPS}
    damage = []
    try:
        root = zarr.open_group(path, mode="r", use_consolidated=False)  # each array's own metadata
    except Exception as e:  # any failure of the metadata is damage, named below
        return data, [Damage("zarr.json", 0, f"{path}/zarr.json is unreadable ({type(e).__name__})",
                             _NO_REBUILD)]
    held = {k.split("/")[0] for k in [*ckpt["digests"], *ckpt["static_digests"]]}
    for g in [g for g in GROUPS + DATA_GROUPS if g in held]:  # a group exists once it holds a block
        try:
            ok = isinstance(root[g], zarr.Group)
        except Exception:
            ok = False
        if not ok:
            damage.append(Damage(g, 0, f"{path}/{g}/zarr.json is missing or unreadable", _NO_REBUILD))
    for key, digests in ckpt["digests"].items():
        where = f"{path}/{key}"
        group, name = key.split("/")
        # the group's blocks in its own draw numbering (the kept draws count from the warmup's end)
        off = 0 if is_warmup_group(group) else W
        blocks = [(s - off, e - off) for s, e in group_blocks(ends, W, is_warmup_group(group))]
        n = blocks[-1][1] if blocks else 0
        try:
            arr = root[key]
            if not isinstance(arr, zarr.Array):
                raise TypeError("not an array")
        except Exception as e:
            damage.append(Damage(key, off, f"{where} is missing or its metadata is unreadable "
                                            f"({type(e).__name__})", _NO_REBUILD))
            continue
        have = arr.shape[-1] if arr.ndim else 0
        if have < n:
            good = max([e for _, e in blocks if e <= have], default=0)
            damage.append(Damage(key, off + good,
                                 f"{where} holds {have} draws, fewer than the {n} committed"))
            continue
        try:
            values = arr[..., :n]
        except Exception:  # find the first block that cannot be read
            values = None
        for i, (s, e) in enumerate(blocks):
            try:
                block = values[..., s:e] if values is not None else arr[..., s:e]
            except Exception as err:
                damage.append(Damage(key, off + s, f"{where}: draws {s}–{e - 1} cannot be read "
                                                    f"({type(err).__name__})"))
                break
            if digest(block) != digests[i]:
                missing = _missing_chunks(path, key, arr, s, e)
                what = f"missing (chunk file {missing[0]})" if missing else "altered"
                damage.append(Damage(key, off + s, f"{where}: draws {s}–{e - 1} are {what}"))
                break
        else:
            data[group][name] = values
    for key, expected in ckpt["static_digests"].items():
        group, name = key.split("/")
        try:
            values = root[key][...]
            ok = digest(np.asarray(values)) == expected
        except Exception:
            ok = False
        if not ok:
            damage.append(Damage(key, 0, f"{path}/{key} is missing or altered"))
        else:
            data[group][name] = np.asarray(values)
    return data, damage


def damage_message(path: str, damage: list[Damage], ends: list[int]) -> str:
    first = min(damage, key=lambda d: (d.fix is None, d.first_bad))  # unrepairable metadata first
    keep = max([e for e in ends if e <= first.first_bad], default=0)
    more = f" (and {len(damage) - 1} more damaged arrays)" if len(damage) > 1 else ""
    salvage = (f"'daskgp repair {path} --salvage' keeps the {keep} intact draws per chain (the run can then "
               "no longer be resumed)" if keep else "no intact draws remain: sample the run again")
    fix = first.fix or salvage
    return f"{first.text}{more}; {fix}"


def _decoded_attrs(path: str) -> dict:
    attrs = {}
    for k, v in (root_attributes(path) or {}).items():
        if k == MARKER:
            continue
        try:
            attrs[k] = json.loads(v) if isinstance(v, str) else v
        except ValueError:
            raise RunDamaged(f"{path}/zarr.json: attribute {k!r} is not valid JSON; daskgp repair cannot "
                             "rebuild it") from None
    return attrs


def read_committed(path) -> Committed:
    """The committed, verified content of the run at ``path``; opens everything read-only and writes
    nothing. Raises FileNotFoundError, or :class:`RunError` / :class:`RunDamaged` with one line."""
    path = norm_path(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no run at {path}")
    check_is_run(path)
    attrs = _decoded_attrs(path)
    ckpt = read_checkpoint(path)
    data, damage = scan_blocks(path, ckpt)
    if damage:
        raise RunDamaged(damage_message(path, damage, ckpt["block_ends"]))
    return Committed(path, attrs, ckpt, data, lock_info(path))


def read_run(path):
    """The run at ``path`` as an in-memory ``xarray.DataTree`` in ArviZ's layout: posterior and sample_stats
    (the kept draws), warmup_posterior and warmup_sample_stats (the warmup's), each (chain, draw) and present
    once it holds a block; attrs: the decoded configuration plus 'elapsed' (wall seconds so far), 'n_draws'
    (committed draws per chain, warmup included), 'warmup_draws' (the warmup's length), 'messages' ({chain:
    why it stopped}), 'writer' (None, or what holds the run's lock) and 'salvaged' (when ``daskgp repair
    --salvage`` cut it back). With them, constant_data (X (obs, feature), x_center, x_scale) and
    observed_data (y (obs)): the standardised training data the chains ran on, and its scalers."""
    import xarray as xr

    c = read_committed(path)
    groups = {}
    for g in GROUPS:
        arrays = c.data[g]
        if not arrays:
            continue
        coords = {dim: arrays[dim] for dim in ("chain", "draw") if dim in arrays}
        groups[g] = xr.Dataset({k: (("chain", "draw"), v) for k, v in arrays.items() if k not in coords},
                               coords=coords)
    meta = c.attrs.get("data_meta") or {}
    for g in DATA_GROUPS:
        if c.data[g]:
            groups[g] = xr.Dataset({k: (DATA_DIMS[k], v) for k, v in c.data[g].items() if k in DATA_DIMS})
            if meta.get("feature_names") and "feature" in groups[g].dims:
                groups[g] = groups[g].assign_coords(feature=list(meta["feature_names"]))
    dt = xr.DataTree.from_dict(groups)
    if "observed_data" in groups:
        dt["observed_data"].attrs.update(
            units="standardised: original = y · y_scale + y_center",
            **{k: meta[k] for k in ("target_name", "y_center", "y_scale") if k in meta})
    ck = c.checkpoint
    # the configuration as of the last block: an extended run (a new length or ESS target) carries it there
    dt.attrs = dict(c.attrs, config=ck.get("config", c.attrs.get("config")), elapsed=float(ck["elapsed"]),
                    n_draws=int(ck["n_draws"]), warmup_draws=int(ck["warmup_draws"]),
                    messages={str(k): v for k, v in ck["messages"].items()},
                    writer=None if c.lock is None else c.lock.describe(), salvaged=ck.get("salvaged"))
    return dt


def stored_dataset(dt):
    """The training data a run stored (a :class:`daskgp.datasets.Dataset`: standardised X, y, the
    scalers and names), or None for a run that stored none."""
    from ..datasets import Dataset

    if "constant_data" not in dt.children or "observed_data" not in dt.children:
        return None
    cd, od = dt["constant_data"].to_dataset(), dt["observed_data"].to_dataset()
    meta = dict(dt.attrs.get("data_meta") or {})
    if "x_center" in cd:
        meta.update(x_center=cd["x_center"].values.tolist(), x_scale=cd["x_scale"].values.tolist())
    return Dataset.from_meta(cd["X"].values, od["y"].values, meta)
