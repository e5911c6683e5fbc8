"""A run on disk: draws appended to a zarr store block by block, committed by a checkpoint that is plain data.
This module is the format (the layout, the run's marker, the checkpoint and the paths a run may take); the
verified reading of the committed blocks is :mod:`daskgp.runs.reader`, the writer and repair
:mod:`daskgp.runs.draws`.

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

from ..core.files import store_above
from .commit import CHECKPOINT, PREVIOUS, RunDamaged, RunError, read_document
from .lock import LOCK_NAME, RunLocked, lock_info, process_alive

__all__ = ["RunError", "RunDamaged", "is_run", "read_checkpoint", "check_new_run_path", "check_appendable",
           "staging_folders", "staged_run", "CHECKPOINT", "PREVIOUS", "FORMAT", "KIND",
           # the layout, which the reader (daskgp.runs.reader) and the writer (daskgp.runs.draws) share
           "DATA_DIMS", "DATA_GROUPS", "GROUPS", "MARKER", "group_blocks", "is_warmup_group", "path_kind",
           "norm_path", "read_checkpoint_file", "check_is_run", "root_attributes"]

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


def _block_starts(ends: list[int]) -> list[int]:
    return [0] + ends[:-1]


def group_blocks(ends: list[int], W: int, warm: bool) -> list[tuple[int, int]]:
    """(start, end) in run draws of the blocks a group holds: the warmup groups those before draw W, the
    others the rest (a block never straddles W)."""
    return [(s, e) for s, e in zip(_block_starts(ends), ends, strict=True) if (e <= W) == warm]


# ------------------------------------------------------------------------------------------ what is at a path
def norm_path(path) -> str:
    p = os.fspath(path)
    return p.rstrip("/") or p


def root_attributes(path: str) -> dict | None:
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
    attrs = root_attributes(path)
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
        fmt = json.loads(root_attributes(path)[MARKER]).get("format")
        if fmt != FORMAT:
            why = ("format 2 kept the warmup's draws inside posterior: sample it again, or read it with "
                   "daskgp 0.2" if fmt == 2 else "a newer daskgp may read it")
            raise RunError(f"{path} is a daskgp run of format {fmt!r}; this daskgp reads format {FORMAT} "
                           f"({why})")
        return
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "zarr.json")):
        raise RunError(f"{path} is not a daskgp run (no zarr.json)")
    if os.path.isdir(path) and root_attributes(path) is None:
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


def check_appendable(path, ckpt: dict) -> None:
    """Refuse to continue a run that ``daskgp repair --salvage`` cut back (its chain states are gone)."""
    if ckpt.get("salvaged"):
        raise RunError(f"{path} was cut back by 'daskgp repair --salvage' and cannot be resumed")
