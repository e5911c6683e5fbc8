"""The writer of a run (:class:`DrawStore`: blocks of draws appended to the zarr store, each committed with
the chains' states) and :func:`repair`; the format, what is at a path and the readers are
:mod:`daskgp.runs.layout`, whose public names are re-exported here.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import warnings

import numpy as np
import zarr

from ..core.files import write_atomically
from ..core.plaindata import decode, encode
from .commit import CHECKPOINT, PREVIOUS, RunDamaged, RunError, commit, digest
from .layout import (
    DATA_DIMS,
    FORMAT,
    GROUPS,
    KIND,
    LEGACY_SUFFIX,
    MARKER,
    check_appendable,
    check_is_run,
    check_new_run_path,
    group_blocks,
    is_warmup_group,
    norm_path,
    path_kind,
    read_checkpoint,
    read_checkpoint_file,
    staging_folders,
)
from .lock import LOCK_NAME, LockInfo, RunLocked, acquire, clear_for_repair, release
from .reader import Committed, Damage, damage_message, read_committed, read_run, scan_blocks, stored_dataset

__all__ = ["DrawStore", "Committed", "RunError", "RunDamaged", "RunLocked", "read_committed", "read_run",
           "stored_dataset", "read_checkpoint", "repair", "check_new_run_path", "check_appendable", "encode",
           "decode", "remove_dead_staging", "staging_folders", "CHECKPOINT", "PREVIOUS", "FORMAT", "KIND"]


# ------------------------------------------------------------------------------------------ the writer
class DrawStore:
    """Writes the (chain, draw) blocks of one run; the only code that changes a run besides :func:`repair`.

    ``create`` starts a new run (under a temporary name until its first block is committed) and ``open``
    reopens one to resume it; both hold the run's lock until :meth:`close`. ``append(posterior, stats,
    checkpoint)`` writes one block — dicts of (chains, B) arrays of the run's next draws — to the warmup
    groups while it lies before draw ``warmup_draws``, else to ``posterior`` / ``sample_stats``, then commits
    ``checkpoint`` (a dict of plain data and arrays: see :func:`encode`) atomically.
    """

    def __init__(self, path: str, chunk: int, final: str | None = None, warmup_draws: int = 0):
        self.path, self.final, self.chunk = path, final or path, int(chunk)
        self.warmup_draws = int(warmup_draws)
        self.n_draws = 0
        self.block_ends: list[int] = []
        self.digests: dict[str, list[str]] = {}
        self.static: dict[str, str] = {}
        self.took_over: LockInfo | None = None  # a stale lock this writer took over
        self._last: bytes | None = None  # the committed checkpoint, kept as the next 'previous'

    @classmethod
    def create(cls, path, attrs: dict, chunk: int, overwrite: bool = False, warmup_draws: int = 0,
               data: dict | None = None) -> DrawStore:
        """``data``: {'X': (n, d), 'y': (n,), 'x_center', 'x_scale': (d,)} standardised training data and
        scalers, written to constant_data / observed_data (names and units in ``attrs['data_meta']``)."""
        final = norm_path(path)
        check_new_run_path(final, overwrite)
        staging = f"{final}.partial-{os.getpid()}-{secrets.token_hex(3)}"
        os.mkdir(staging)
        try:
            root = zarr.open_group(staging, mode="w-")
            root.attrs.update({MARKER: json.dumps({"format": FORMAT, "kind": KIND}),
                               **{k: json.dumps(v) for k, v in attrs.items()}})
            store = cls(staging, chunk, final=final, warmup_draws=warmup_draws)
            for name, v in (data or {}).items():
                group = "observed_data" if name == "y" else "constant_data"
                grp = root.require_group(group)
                v = np.ascontiguousarray(v, dtype=np.float64)
                arr = grp.create_array(name, shape=v.shape, dtype=v.dtype, dimension_names=DATA_DIMS[name])
                arr[...] = v
                store.static[f"{group}/{name}"] = digest(v)
            acquire(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return store

    @classmethod
    def open(cls, path) -> tuple[DrawStore, Committed]:
        """Reopen a run to continue it: lock it, verify its committed draws, trim a torn append. Returns the
        store and the verified content it continues (RunError / RunLocked with one line when it cannot)."""
        path = norm_path(path)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"no run to resume at {path}")
        check_is_run(path)
        took_over = acquire(path)
        try:
            committed = read_committed(path)
            ckpt = committed.checkpoint
            check_appendable(path, ckpt)
            store = cls(path, ckpt["chunk"], warmup_draws=ckpt["warmup_draws"])
            store.n_draws, store.block_ends = ckpt["n_draws"], list(ckpt["block_ends"])
            store.digests = {k: list(v) for k, v in ckpt["digests"].items()}
            store.static = dict(ckpt["static_digests"])
            store._last = read_checkpoint_file(path)[1]
            store._trim()
        except BaseException:
            release(path)
            raise
        store.took_over = took_over
        return store, committed

    def append(self, posterior: dict, stats: dict, checkpoint: dict) -> None:
        B = next(iter(posterior.values())).shape[1]
        start, end, W = self.n_draws, self.n_draws + B, self.warmup_draws
        if start < W < end:
            raise ValueError(f"a block of draws {start}–{end - 1} straddles the warmup's end (draw {W})")
        warm = start < W
        off = 0 if warm else W  # the kept draws count from the warmup's end
        # Blocks are whole chunks, except a run's short last block (a length off the block grid); extending
        # such a run rewrites that one partial chunk, which readers may be reading: zarr (>= 3.4.2) writes
        # every chunk to a temporary and renames it into place, so a reader sees the old chunk or the new,
        # and both hold the same committed draws.
        names = (("warmup_posterior", "warmup_sample_stats") if warm else ("posterior", "sample_stats"))
        new_digests = {}
        with zarr.config.set({"array.write_empty_chunks": True}):  # every committed block has its file
            root = zarr.open_group(self.path, mode="r+", use_consolidated=False)
            for gname, block in zip(names, (posterior, stats), strict=True):
                C = next(iter(block.values())).shape[0]
                first = gname not in root
                columns = {"draw": np.arange(start - off, end - off, dtype=np.int64),
                           **{k: np.asarray(v, dtype=bool if np.asarray(v).dtype == bool else np.float64)
                              for k, v in block.items()}}
                if first:
                    grp = root.create_group(gname)
                    chain = np.arange(C, dtype=np.int64)
                    coord = grp.create_array("chain", shape=(C,), dtype=chain.dtype,
                                             dimension_names=("chain",))
                    coord[:] = chain
                    self.static[f"{gname}/chain"] = digest(chain)
                    for name, v in columns.items():
                        fill = False if v.dtype == bool else (0 if v.dtype.kind == "i" else np.nan)
                        grp.create_array(name, shape=v.shape[:-1] + (0,), chunks=v.shape[:-1] + (self.chunk,),
                                         dtype=v.dtype, fill_value=fill,
                                         dimension_names=("chain", "draw")[-v.ndim:])
                elif {f"{gname}/{k}" for k in columns} != {k for k in self.digests
                                                           if k.startswith(gname + "/")}:
                    raise ValueError(f"the {gname} records changed between blocks: {sorted(columns)}")
                for name, v in columns.items():
                    arr = root[f"{gname}/{name}"]
                    arr.resize(v.shape[:-1] + (end - off,))
                    arr[..., start - off:end - off] = v
                    new_digests[f"{gname}/{name}"] = digest(v)
        self._consolidate()
        for key, d in new_digests.items():
            self.digests.setdefault(key, []).append(d)
        self.n_draws = end
        self.block_ends.append(end)
        self._commit(checkpoint)
        if self.path != self.final:
            self._swap_in()

    def _commit(self, extra: dict) -> None:
        doc = {"daskgp_checkpoint": FORMAT, "n_draws": self.n_draws, "chunk": self.chunk,
               "warmup_draws": self.warmup_draws, "block_ends": self.block_ends, "digests": self.digests,
               "static_digests": self.static,
               **encode(extra)}
        raw = json.dumps(doc, allow_nan=False).encode("utf-8")
        commit(self.path, raw, self._last)
        self._last = raw

    def _consolidate(self) -> None:
        """Refresh the consolidated metadata (array shapes) that xarray and ArviZ read; before the commit,
        so it never shows fewer draws than the checkpoint names."""
        with warnings.catch_warnings():  # the checkpoint files are not zarr nodes; v3 has no spec for this
            warnings.simplefilter("ignore", zarr.errors.ZarrUserWarning)
            zarr.consolidate_metadata(self.path)

    def _swap_in(self) -> None:
        """Put the new run, now holding a committed block, where it belongs: the run it replaces (checked
        again now) is moved aside and deleted only after the new one is in place."""
        final = self.final
        legacy = path_kind(final) == "legacy"
        if os.path.lexists(final):
            check_new_run_path(final, overwrite=True)
            aside = f"{final}.replaced-{os.getpid()}-{secrets.token_hex(3)}"
            os.rename(final, aside)
            os.rename(self.path, final)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.rename(self.path, final)
        if legacy and os.path.isfile(final + LEGACY_SUFFIX):  # the old run's pickle, never read
            os.remove(final + LEGACY_SUFFIX)
        self.path = final

    def _trim(self) -> list[str]:
        """Cut arrays longer than the committed draws (a torn append) and drop leftover temporaries."""
        cut = []
        root = zarr.open_group(self.path, mode="r+", use_consolidated=False)
        W = self.warmup_draws
        for key in self.digests:
            arr = root[key]
            n = min(self.n_draws, W) if is_warmup_group(key) else max(self.n_draws - W, 0)
            if arr.shape[-1] != n:
                cut.append(f"{key} ({arr.shape[-1]} → {n})")
                arr.resize(arr.shape[:-1] + (n,))
        held = {k.split("/")[0] for k in [*self.digests, *self.static]}
        for g in GROUPS:  # a group whose first block was torn before its commit: not part of the run
        # (the data groups are written with the run's first commit; a run without a commit is never read)
            if g not in held and os.path.isdir(os.path.join(self.path, g)):
                shutil.rmtree(os.path.join(self.path, g))
                cut.append(f"{g} (uncommitted)")
        if cut:
            self._consolidate()
        for pattern in (f"{CHECKPOINT}.tmp-*", f"{PREVIOUS}.tmp-*", f"{LOCK_NAME}.stale-*"):
            for leftover in glob.glob(os.path.join(glob.escape(self.path), pattern)):
                os.remove(leftover)
        return cut

    def close(self) -> None:
        """Release the run. A run that never committed a block is deleted (the run it was to replace is
        untouched); otherwise a torn append is trimmed so plain zarr readers see the committed draws."""
        if self.n_draws == 0 and self.path != self.final:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        try:
            self._trim()
        finally:
            release(self.path)


# ------------------------------------------------------------------------------------------ repair
def remove_dead_staging(path) -> list[str]:
    """Remove the staging folders of new runs at ``path`` whose writer died before their first block was
    committed (:func:`daskgp.runs.layout.staging_folders`: only those holding nothing but a run's own
    entries); one line per folder removed or left (a foreign one)."""
    lines = []
    for folder, state in staging_folders(path):
        if state == "dead":
            shutil.rmtree(folder)
            lines.append(f"removed {folder}: the staging folder of a new run whose writer stopped before its "
                         "first block was committed (nothing in it was kept)")
        elif state == "foreign":
            lines.append(f"left {folder}: the staging folder of a stopped writer, with files that are not a "
                         "run's in it; move them away, then remove it")
    return lines


def repair(path, *, salvage: bool = False, force: bool = False) -> list[str]:
    """Mend the run at ``path`` in place and say what was done (one line per action).

    Refuses while a live writer holds the run; a stale lock is cleared, a lock from another host or an
    unreadable one only with ``force``. Restores the previous checkpoint when the last one is damaged
    (losing one block), trims torn appends, removes leftover temporaries; with ``salvage``, cuts a run whose
    committed draws are damaged back to the intact blocks before the first damage (it can then no longer be
    resumed). Raises :class:`RunError` when the run cannot be mended."""
    path = norm_path(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no run at {path}")
    check_is_run(path)
    actions = clear_for_repair(path, force)
    acquire(path)
    try:
        try:
            ckpt, _ = read_checkpoint_file(path)
        except RunDamaged as e:
            try:
                ckpt, raw = read_checkpoint_file(path, PREVIOUS)
            except RunDamaged as e2:
                raise RunDamaged(f"{e}, and so is the previous one ({e2}); daskgp repair cannot rebuild "
                                 "them: sample the run again") from None
            write_atomically(os.path.join(path, CHECKPOINT), raw)
            actions.append(f"{e}: restored the previous checkpoint ({ckpt['n_draws']} draws per chain)")
        _, damage = scan_blocks(path, ckpt)
        if damage:
            if not salvage:
                raise RunDamaged(damage_message(path, damage, ckpt["block_ends"]))
            ckpt = _salvaged(path, ckpt, damage)
            actions.append(f"{min(damage, key=lambda d: d.first_bad).text}: cut the run back to its "
                           f"{ckpt['n_draws']} intact draws per chain; it can no longer be resumed")
        store = DrawStore(path, ckpt["chunk"], warmup_draws=ckpt["warmup_draws"])
        store.n_draws, store.digests = ckpt["n_draws"], ckpt["digests"]
        cut = store._trim()
        if cut:
            actions.append(f"trimmed a torn append to the {ckpt['n_draws']} committed draws: "
                           f"{', '.join(cut)}")
    finally:
        release(path)
    if not actions:
        actions.append(f"{path} is intact: {ckpt['n_draws']} draws per chain committed; nothing to repair")
    return actions


def _salvaged(path: str, ckpt: dict, damage: list[Damage]) -> dict:
    if any(d.fix for d in damage):
        raise RunDamaged(damage_message(path, damage, ckpt["block_ends"]))
    first = min(d.first_bad for d in damage)
    keep = [e for e in ckpt["block_ends"] if e <= first]
    if not keep:
        raise RunDamaged(f"{damage_message(path, damage, ckpt['block_ends'])}; nothing to salvage")
    W = ckpt["warmup_draws"]
    doc = dict(ckpt, n_draws=keep[-1], block_ends=keep, states=None,
               digests={key: d[:len(group_blocks(keep, W, is_warmup_group(key)))]
                        for key, d in ckpt["digests"].items()},
               salvaged={"committed_draws": ckpt["n_draws"], "kept_draws": keep[-1],
                         "damage": [d.text for d in damage]})
    write_atomically(os.path.join(path, CHECKPOINT), json.dumps(encode(doc), allow_nan=False).encode())
    if os.path.exists(os.path.join(path, PREVIOUS)):
        os.remove(os.path.join(path, PREVIOUS))  # it describes states of the longer run
    return doc
