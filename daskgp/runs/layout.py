"""A run on disk: draws appended to a zarr store block by block, committed by a checkpoint that is plain data.
This module is the format and its readers; the writer and repair are :mod:`daskgp.runs.draws`.

Layout of ``run.zarr/`` (zarr format 3; ``xarray.open_datatree(path, engine="zarr")`` and ``az.from_zarr``
read it):

* ``zarr.json``: root attributes, the run's configuration (JSON strings) and the marker ``daskgp_run``
  (format and kind) that says the folder is a daskgp run;
* ``posterior/``: one (chain, draw) array per parameter, natural units, the kept draws only;
  ``sample_stats/``: their per-iteration records; ``warmup_posterior/`` and ``warmup_sample_stats/``: the
  same for the warmup's draws (the first ``warmup_draws`` iterations: adaptation, or SGLD's first fifth),
  as ArviZ lays a run out, so ``az.from_zarr`` summarises exactly what ``daskgp summary`` does. Every group
  has ``chain`` and ``draw`` coordinates (``draw`` counts from 0 in each) and one zarr chunk per block of
  draws; blocks never straddle the warmup's end. The root also holds consolidated metadata, refreshed with
  every commit, so plain zarr readers never list the folder;
* ``daskgp-checkpoint.json``: the commit. It holds the committed number of draws, where each block ends,
  a digest (BLAKE2b) of every block of every array, the run's elapsed time and messages, and every chain's
  sampler state (arrays base64-encoded, dtypes from a fixed list). Nothing here is ever unpickled.
* ``daskgp-checkpoint.prev.json``: the commit before it, so ``daskgp repair`` can fall back one block;
* ``daskgp-writer.lock``: present while a writer appends (:mod:`daskgp.runs.lock`).

**Writing.** Appending a block grows the arrays one by one, which is not atomic; the checkpoint is replaced
atomically after every array has grown, so what a checkpoint names is always complete on disk and an
interruption loses at most the block in flight. A new run is written under ``OUT.partial-…`` and renamed to
``OUT`` when its first block is committed: a start that fails never destroys the run it was to replace.
Only a folder that is provably a daskgp run (marker present, nothing else in it) or an empty folder is ever
overwritten.

**Reading** never writes. Readers open the store read-only and present the committed prefix: arrays longer
than the checkpoint says (an append in flight, or torn by a crash) are cut in memory, and every committed
block is checked against its digest, so a missing chunk file, an altered one or torn metadata is reported
(one line naming the file and what ``daskgp repair`` can do), never summarised as numbers.

**Repair** (:func:`repair`, ``daskgp repair RUN``) is the only other process that changes a run, and never
while a live writer holds it: it clears a stale lock, trims torn appends on disk, restores the previous
checkpoint when the last one is damaged, and on request (``salvage``) cuts a run whose committed draws are
damaged back to its intact prefix (which can then no longer be resumed).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass

import numpy as np
import zarr

from ..core.files import store_above
from .commit import CHECKPOINT, PREVIOUS, RunDamaged, RunError, digest, read_document
from .lock import LOCK_NAME, LockInfo, RunLocked, lock_info, process_alive

__all__ = ["Committed", "RunError", "RunDamaged", "is_run", "read_committed", "read_run", "stored_dataset",
           "read_checkpoint", "check_new_run_path", "check_appendable", "staging_folders", "staged_run",
           "CHECKPOINT", "PREVIOUS", "FORMAT", "KIND",
           # the layout's reading, which the writer (daskgp.runs.draws) shares
           "DATA_DIMS", "Damage", "scan_blocks", "damage_message", "group_blocks", "is_warmup_group",
           "path_kind", "norm_path", "read_checkpoint_file", "check_is_run"]

FORMAT = 3  # 3: the warmup's draws in their own groups (2 kept them in posterior, flagged in sample_stats)
KIND = "gp-hyperparameter-chains"
MARKER = "daskgp_run"
GROUPS = ("posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats")
# the training data the chains ran on, written once with the run (ArviZ's names): standardised X and y, their
# scalers' centres and scales, so that a run predicts and resumes with nothing but itself
DATA_GROUPS = ("constant_data", "observed_data")
DATA_DIMS = {"X": ("obs", "feature"), "x_center": ("feature",), "x_scale": ("feature",), "y": ("obs",)}
LEGACY_SUFFIX = ".checkpoint"  # format 1 kept a pickle beside the store: never loaded
_KEY = re.compile(r"^((warmup_)?(posterior|sample_stats)|constant_data|observed_data)"
                  r"/[A-Za-z_][A-Za-z0-9_]*$")
_ZARR_TMP = re.compile(r"^zarr\.[0-9a-f]+\.partial$")  # zarr's own write-then-rename temporaries
_FILE_SUFFIXES = {".nc", ".netcdf", ".nc4", ".h5", ".hdf5", ".csv", ".json", ".parquet", ".pkl", ".pickle",
                  ".npy", ".npz", ".txt", ".zip"}


def is_warmup_group(group: str) -> bool:
    return group.startswith("warmup_")


def group_blocks(ends: list[int], W: int, warm: bool) -> list[tuple[int, int]]:
    """(start, end) in run draws of the blocks a group holds: the warmup groups those before draw W, the
    others the rest (a block never straddles W)."""
    return [(s, e) for s, e in zip(_block_starts(ends), ends, strict=True) if (e <= W) == warm]


# ------------------------------------------------------------------------------------------ what is at a path
def norm_path(path) -> str:
    p = os.fspath(path)
    return p.rstrip("/") or p


def _root_attributes(path: str) -> dict | None:
    """The root group's attributes straight from its JSON metadata (no zarr machinery), or None."""
    try:
        with open(os.path.join(path, "zarr.json"), "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
        attrs = doc.get("attributes", {}) if isinstance(doc, dict) else None
        return attrs if isinstance(attrs, dict) else None
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):  # deep nesting: not metadata
        return None


def path_kind(path: str) -> str:
    """'absent' | 'empty' | 'run' | 'legacy' (format 1) | 'other' (anything else, files included)."""
    if not os.path.lexists(path):
        return "absent"
    if os.path.islink(path) or not os.path.isdir(path):
        return "other"
    if not os.listdir(path):
        return "empty"
    attrs = _root_attributes(path)
    if attrs is None:
        return "other"
    if MARKER in attrs:
        try:
            marker = json.loads(attrs[MARKER])
        except (TypeError, ValueError):
            return "other"
        return "run" if isinstance(marker, dict) and marker.get("kind") == KIND else "other"
    return "legacy" if {"config", "param_names", "daskgp_version"} <= set(attrs) else "other"


def is_run(path) -> bool:
    """Whether ``path`` is a folder marked as a daskgp chains run (of any format); reads its root metadata
    only."""
    return path_kind(norm_path(path)) == "run"


def _foreign_entries(path: str) -> list[str]:
    """Entries of a run folder that a daskgp run never holds (a user's files): what must not be deleted."""
    foreign = []
    top_ok = {"zarr.json", CHECKPOINT, PREVIOUS, LOCK_NAME}
    for entry in sorted(os.listdir(path)):
        full = os.path.join(path, entry)
        if entry in GROUPS + DATA_GROUPS and os.path.isdir(full) and not os.path.islink(full):
            foreign += [f"{entry}/{e}" for e in _foreign_in_group(full)]
        elif not (entry in top_ok or _ZARR_TMP.match(entry) or entry.startswith(
                (f"{CHECKPOINT}.tmp-", f"{PREVIOUS}.tmp-", f"{LOCK_NAME}.stale-"))) or os.path.isdir(full):
            foreign.append(entry)
    return foreign


def _foreign_in_group(group: str) -> list[str]:
    out = []
    for entry in sorted(os.listdir(group)):
        full = os.path.join(group, entry)
        if entry == "zarr.json" or _ZARR_TMP.match(entry):
            continue
        is_node = os.path.isdir(full) and not os.path.islink(full)
        if not is_node or not os.path.isfile(os.path.join(full, "zarr.json")):
            out.append(entry)
            continue
        for inner in os.listdir(full):  # an array: its metadata and its chunk tree 'c/'
            if not (inner == "zarr.json" or _ZARR_TMP.match(inner)
                    or (inner == "c" and os.path.isdir(os.path.join(full, inner)))):
                out.append(f"{entry}/{inner}")
    return out


_STAGING = re.compile(r"(.+)\.partial-(\d+)-[0-9a-f]{6}")


def staged_run(path) -> str | None:
    """The run a staging folder ``PATH.partial-PID-HEX`` becomes when its first block commits (``PATH``), or
    None when ``path`` is not named as one. Reads nothing."""
    parent, base = os.path.split(os.path.abspath(norm_path(path)))
    m = _STAGING.fullmatch(base)
    return os.path.join(parent, m.group(1)) if m else None


def staging_folders(path) -> list[tuple[str, str]]:
    """The staging folders a new run at ``path`` is written in before its first block commits
    (``PATH.partial-PID-HEX``, beside it), each with its state: 'live' (its writer runs, or runs on another
    host), 'dead' (its writer is gone and it holds only a run's own entries: safe to remove) or 'foreign'
    (its writer is gone but something else was put in it: left alone). Reads only."""
    final = norm_path(path)
    parent, base = os.path.split(os.path.abspath(final))
    pattern = re.compile(re.escape(base) + r"\.partial-(\d+)-[0-9a-f]{6}")
    out = []
    for entry in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        m = pattern.fullmatch(entry)
        full = os.path.join(parent, entry)
        if not m or os.path.islink(full) or not os.path.isdir(full):
            continue
        info = lock_info(full)
        if info is not None:  # the writer locks its staging folder once the run's data are in it
            dead = info.state == "stale"
        else:  # before its lock: no such process here, and older than a writer takes to lock it (its
            # writer may run on another host that shares the storage, where the pid means nothing)
            dead = (not process_alive(int(m.group(1)))
                    and time.time() - os.path.getmtime(full) > UNLOCKED_STAGING_S)
        out.append((full, "live" if not dead else "foreign" if _foreign_entries(full) else "dead"))
    return out


UNLOCKED_STAGING_S = 600.0  # an unlocked staging folder this old has lost its writer (it locks in seconds)


def check_new_run_path(path, overwrite: bool = False) -> None:
    """Refuse, before any work, an output a new run must not take: ``/``, the home folder, the working
    directory or a parent of it; a path inside a zarr store, a run or a fit checkpoint
    (:func:`daskgp.core.files.store_above`); an existing path unless ``overwrite``; and, even then,
    anything that is not provably a daskgp run (or an empty folder), a run with foreign files in it, or a
    run a writer holds.
    """
    path = norm_path(path)
    if not path:
        raise ValueError("the output path is empty")
    real = os.path.realpath(path)
    cwd = os.path.realpath(os.getcwd())
    protected = {"/": "the root folder", os.path.realpath(os.path.expanduser("~")): "your home folder",
                 cwd: "the working directory"}
    if real in protected:
        raise ValueError(f"refusing to write a run at {path}: it is {protected[real]}")
    if cwd.startswith(real.rstrip("/") + "/"):
        raise ValueError(f"refusing to write a run at {path}: it contains the working directory")
    store = store_above(os.path.dirname(os.path.abspath(path)))
    if store is not None:  # a run inside a run (or any store) would be deleted or corrupted with it
        raise ValueError(f"refusing to write a run at {path}: it is inside the store {store}; write beside "
                         "it, not into it")
    kind = path_kind(path)
    if kind == "absent":
        _refuse_file_suffix(path)
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"the output folder {parent} does not exist")
        return
    if not overwrite:
        raise FileExistsError(f"{path} already exists: resume it, or choose another output "
                              "(or overwrite it explicitly)")
    if kind == "other":
        what = ("a symbolic link" if os.path.islink(path) else "a file" if not os.path.isdir(path)
                else "a folder that is not a daskgp run")
        raise ValueError(f"refusing to overwrite {path}: it is {what}; choose another output")
    if kind in ("run", "legacy"):
        foreign = _foreign_entries(path)
        if foreign:
            more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
            raise ValueError(f"refusing to overwrite {path}: it holds {foreign[0]}{more}, which is not part "
                             "of a daskgp run; move it away or choose another output")
        info = lock_info(path)
        if info is not None and info.state != "stale":
            raise RunLocked(f"refusing to overwrite {path}: {info.describe()}")


def _refuse_file_suffix(path: str) -> None:
    ext = os.path.splitext(path)[1].lower()
    if ext in _FILE_SUFFIXES:  # `--out r.nc` would make a zarr folder named like a netCDF file
        raise ValueError(f"refusing to write a run at {path}: a run is a zarr folder, not a {ext} file; "
                         "name it e.g. run.zarr")


def check_is_run(path: str) -> None:
    kind = path_kind(path)
    if kind == "absent":
        _refuse_file_suffix(path)
        raise FileNotFoundError(f"no run at {path}")
    if kind == "legacy":
        raise RunError(f"{path} was written by an earlier daskgp whose checkpoint "
                       f"{path}{LEGACY_SUFFIX} is a pickle, which can execute code when loaded: it will not "
                       "be loaded; sample the run again")
    if kind == "run":
        fmt = json.loads(_root_attributes(path)[MARKER]).get("format")
        if fmt != FORMAT:
            why = ("format 2 kept the warmup's draws inside posterior: sample it again, or read it with "
                   "daskgp 0.2" if fmt == 2 else "a newer daskgp may read it")
            raise RunError(f"{path} is a daskgp run of format {fmt!r}; this daskgp reads format {FORMAT} "
                           f"({why})")
        return
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "zarr.json")):
        raise RunError(f"{path} is not a daskgp run (no zarr.json)")
    if os.path.isdir(path) and _root_attributes(path) is None:
        raise RunDamaged(f"{path}/zarr.json (the run's metadata) is unreadable; daskgp repair cannot "
                         "rebuild it: sample the run again")
    raise RunError(f"{path} is not a daskgp run")


# ------------------------------------------------------------------------------------------ the checkpoint
def _problem(doc) -> str | None:
    """What is wrong with a parsed checkpoint document, or None."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    if doc.get("daskgp_checkpoint") != FORMAT:
        return (f"checkpoint format {doc.get('daskgp_checkpoint')!r}; this daskgp reads format {FORMAT} "
                "(a newer daskgp may read it)")

    def count(v, low):
        return type(v) is int and v >= low

    n, chunk, ends, W = doc.get("n_draws"), doc.get("chunk"), doc.get("block_ends"), doc.get("warmup_draws")
    if not count(n, 1) or not count(chunk, 1) or not count(W, 0):
        return f"n_draws {n!r} / chunk {chunk!r} / warmup_draws {W!r} are not valid counts"
    if not (isinstance(ends, list) and ends and all(count(e, 1) for e in ends)
            and all(a < b for a, b in zip(ends, ends[1:], strict=False)) and ends[-1] == n):
        return "block_ends is not an increasing list ending at n_draws"
    if any(s < W < e for s, e in zip(_block_starts(ends), ends, strict=True)):
        return f"a block straddles the warmup's end (draw {W})"
    digests, static = doc.get("digests"), doc.get("static_digests")
    if not (isinstance(digests, dict) and digests and isinstance(static, dict)):
        return "digests are missing"
    for key, d in list(digests.items()) + [(k, [v]) for k, v in static.items()]:
        if not _KEY.match(str(key)) or not (isinstance(d, list) and all(isinstance(s, str) for s in d)):
            return f"malformed digest entry {str(key)[:40]!r}"
        if key in digests and len(d) != (nb := len(group_blocks(ends, W, is_warmup_group(key)))):
            return f"{key} has {len(d)} block digests for {nb} blocks"
    el = doc.get("elapsed")
    if not (isinstance(el, (int, float)) and not isinstance(el, bool) and math.isfinite(el) and el >= 0):
        return f"elapsed {el!r} is not a number of seconds"
    msgs = doc.get("messages")
    if not (isinstance(msgs, dict) and all(isinstance(v, str) for v in msgs.values())):
        return "messages is not a mapping of chain to text"
    if not (isinstance(doc.get("states"), list) or (doc.get("states") is None and "salvaged" in doc)):
        return "states is not a list"
    return None


def read_checkpoint_file(path: str, name: str = CHECKPOINT) -> tuple[dict, bytes]:
    """(decoded checkpoint, its raw bytes); RunDamaged naming the file when it is missing or malformed."""
    return read_document(path, name, _problem, decoded=("states", "a chain state"))


def _checkpoint_hint(path: str) -> str:
    try:
        prev, _ = read_checkpoint_file(path, PREVIOUS)
    except RunDamaged:
        return "daskgp repair cannot rebuild it: sample the run again"
    return (f"'daskgp repair {path}' restores the previous checkpoint ({prev['n_draws']} draws per chain; "
            "the last block is lost)")


def read_checkpoint(path) -> dict:
    """The last committed checkpoint of the run at ``path`` (read only): n_draws, chunk, block_ends,
    digests, elapsed, messages, states. Raises FileNotFoundError or :class:`RunError` (one line)."""
    path = norm_path(path)
    check_is_run(path)
    try:
        return read_checkpoint_file(path)[0]
    except RunDamaged as e:
        raise RunDamaged(f"{e}; {_checkpoint_hint(path)}") from None


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


def _block_starts(ends: list[int]) -> list[int]:
    return [0] + ends[:-1]


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
    for k, v in (_root_attributes(path) or {}).items():
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


def check_appendable(path, ckpt: dict) -> None:
    """Refuse to continue a run that ``daskgp repair --salvage`` cut back (its chain states are gone)."""
    if ckpt.get("salvaged"):
        raise RunError(f"{path} was cut back by 'daskgp repair --salvage' and cannot be resumed")
