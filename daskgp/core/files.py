"""Files that are either complete or absent: write to a temporary name beside the target, flush to disk,
then rename over it (``os.replace`` is atomic within one filesystem), so a reader or a crash never sees a
half-written file; and the one rule for where daskgp may write at all (:func:`check_destination`): only
where the user pointed, never over a file or folder it did not write, never through a symbolic link."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

__all__ = ["MANIFEST", "MARK", "Output", "check_destination", "check_outputs", "replaced_atomically",
           "store_above", "write_atomically", "written_kind"]


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replaced_atomically(path, suffix: str = ""):
    """``with replaced_atomically("out.nc") as tmp: write(tmp)`` — ``path`` is replaced by what was written
    to ``tmp`` only when the block ends without an exception; otherwise ``tmp`` is removed and ``path`` is
    untouched. ``suffix`` ends the temporary name (``np.savez`` appends ``.npz`` to names without it). ``tmp``
    may also be a directory (a zarr store): an old directory at ``path`` is then moved aside first and removed
    once the new one is in place."""
    path = os.fspath(path)
    if os.path.islink(path):  # os.replace would swap the link itself, an open() would follow it
        raise ValueError(f"{path} is a symbolic link; daskgp never writes through one")
    tmp = f"{path}.tmp-{os.getpid()}{suffix}"
    old = f"{path}.old-{os.getpid()}"
    try:
        try:
            yield tmp
        except OSError as e:  # the user gave `path`: an error naming our temporary name would puzzle
            raise OSError(e.errno, f"could not write {path}: {e.strerror or e}".replace(tmp, path)) from None
        _fsync(tmp)
        if os.path.isdir(path) and not os.path.isdir(tmp):  # checked before any work; a folder made since
            raise IsADirectoryError(f"could not write {path}: it is a folder (nothing was replaced)")
        if os.path.isdir(tmp) and os.path.isdir(path):
            os.replace(path, old)  # a directory cannot replace a non-empty one in one step
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, old):
            if os.path.isdir(leftover):
                shutil.rmtree(leftover)
            elif os.path.exists(leftover):
                os.remove(leftover)


def write_atomically(path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (see :func:`replaced_atomically`)."""
    with replaced_atomically(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


# ---------------------------------------------------------------------- one rule for every file daskgp writes
MARK = "daskgp_kind"  # the attribute (netCDF, zarr, JSON, npz) that says which daskgp writer made a path
# folders that are someone's store: nothing daskgp writes goes inside one (it would corrupt or be deleted)
_STORE_FILES = ("zarr.json", ".zgroup", ".zarray", "daskgp-checkpoint.json")
_MAX_JSON = 64 << 20  # a marker is read only from a JSON document this small (a report, not a data dump)


def _json_kind(path: str) -> str | None:
    import json

    if os.path.getsize(path) > _MAX_JSON:
        return None
    with open(path, "rb") as f:
        doc = json.loads(f.read().decode("utf-8"))
    if isinstance(doc, dict) and MARK not in doc and doc.get("format") == "daskgp-advgp-1":
        return "daskgp.advgp-checkpoint"  # written by daskgp <= 0.5, before the marker
    return doc.get(MARK) if isinstance(doc, dict) else None


def _netcdf_kind(path: str) -> str | None:
    import h5py

    with h5py.File(path, "r") as f:  # netCDF-4 is HDF5: the global attributes without reading any variable
        v = f.attrs.get(MARK)
        if v is None and "model" in f.attrs:  # a model saved by daskgp <= 0.4: its model attribute
            v = f.attrs["model"]
    return v.decode() if isinstance(v, bytes) else (str(v) if v is not None else None)


MANIFEST = "daskgp_nodes"  # a zarr store's attribute: the nodes (arrays) its daskgp writer put in it


def _zarr_kind(path: str) -> str | None:
    """A zarr store is ours when its attributes carry the marker *and* the manifest of the nodes it was
    written with, and every entry, recursively, is one of those nodes' metadata or chunks — so a user's
    file or sub-group anywhere inside makes it foreign (an overwrite would delete it). A store without the
    manifest (daskgp <= 0.6) is not provably ours."""
    v, foreign = _zarr_manifest(path)
    return v if foreign is None else None


def _zarr_manifest(path: str) -> tuple[str | None, str | None]:
    """(the store's marker, what in it is not daskgp's — the first top-level entry that is not one of the
    nodes its manifest lists, or a node holding more than its metadata and chunks — in words, or None);
    (None, None) for a store without marker or manifest."""
    import json

    with open(os.path.join(path, "zarr.json"), "rb") as f:
        doc = json.loads(f.read().decode("utf-8"))
    attrs = doc.get("attributes", {}) if isinstance(doc, dict) else {}
    if not isinstance(attrs, dict):
        return None, None
    v, nodes = attrs.get(MARK), attrs.get(MANIFEST)
    if v is None or not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        return None, None
    for entry in sorted(os.listdir(path)):
        full = os.path.join(path, entry)
        if entry == "zarr.json":
            continue
        if entry not in nodes or os.path.islink(full):
            return v, f"{entry!r}, which daskgp did not write there"
        if not _only_chunks(full):
            return v, f"files in its node {entry!r} that daskgp did not write there"
    return v, None


def _only_chunks(node: str) -> bool:
    """An array node as zarr writes it: its ``zarr.json`` and, under ``c/``, chunk files named by their
    (decimal) indices, or one chunk file ``c`` (a scalar) — nothing else, no link, no nested group."""
    for entry in os.listdir(node):
        full = os.path.join(node, entry)
        if os.path.islink(full):
            return False
        if entry in ("zarr.json", "c") and os.path.isfile(full):
            continue
        if entry != "c" or not os.path.isdir(full):
            return False
        for root, dirs, files in os.walk(full):
            if any(not n.isdigit() or os.path.islink(os.path.join(root, n)) for n in [*dirs, *files]):
                return False
    return True


# a fit checkpoint folder's own files (daskgp.runs.fits): its commits first, the lock, the held-out log
_FIT_FILES = ("daskgp-checkpoint.json", "daskgp-checkpoint.prev.json", "daskgp-writer.lock",
              "daskgp-heldout.jsonl")
_FIT_ARRAYS = "daskgp-array-"  # and its arrays' files (daskgp.runs.fitarrays.ARRAY_FILE)


def _fit_folder_kind(path: str) -> str | None:
    """A fit checkpoint's folder (:mod:`daskgp.runs.fits`): its files and their temporaries only, the kind
    its commit (or the one before) names."""
    entries = os.listdir(path)
    if not entries or not all(e.startswith((*_FIT_FILES, _FIT_ARRAYS)) for e in entries):
        return None
    for name in _FIT_FILES[:2]:
        file = os.path.join(path, name)
        if os.path.isfile(file) and not os.path.islink(file):
            try:
                kind = _json_kind(file)
            except Exception:  # noqa: BLE001 — a torn commit: the previous one may still say
                continue
            if kind:
                return kind
    return None


def _npz_kind(path: str) -> str | None:
    with np.load(path) as f:  # allow_pickle=False: plain arrays only
        if MARK not in f.files and {"theta", "trace", "key"} <= set(f.files):
            return "daskgp.fit-checkpoint"  # an SGPR checkpoint of daskgp <= 0.5, before the marker
        return str(f[MARK]) if MARK in f.files else None


# A CSV has no place for a marker a user's file cannot have by accident (a header ending in the prediction
# columns was one, and a user's table with such a header was replaced): daskgp never replaces a CSV.
_READERS = {".json": _json_kind, ".nc": _netcdf_kind, ".nc4": _netcdf_kind, ".netcdf": _netcdf_kind,
            ".npz": _npz_kind}


def written_kind(path) -> str | None:
    """Which daskgp writer made ``path`` (its marker: :data:`MARK` in a JSON report, a netCDF's or a zarr
    store's attributes with its manifest, or an ``.npz``), or None for anything else — a user's file, a
    CSV, a symbolic link, a folder with foreign entries, an unreadable file. Reads metadata only; never
    unpickles or executes anything."""
    path = os.fspath(path)
    if os.path.islink(path) or not os.path.exists(path):
        return None
    try:
        if os.path.isdir(path):
            return _zarr_kind(path) if path.rstrip("/").endswith(".zarr") else _fit_folder_kind(path)
        reader = _READERS.get(os.path.splitext(path)[1].lower())
        return reader(path) if reader else None
    except Exception:  # noqa: BLE001 — truncated, foreign or garbage: not provably ours
        return None


def _within(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies below it (both resolved: a link cannot hide the relation)."""
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def check_destination(path, kind: str, *, overwrite: bool = False, suffixes=None, reads=(),
                      flag: str = "--out", folder: bool = False) -> str:
    """Refuse, before any work, a path daskgp must not write ``kind`` to; return it absolute. The rule
    (issues 29 and 56), the same for every file, folder and store daskgp writes:

    * it ends in one of ``suffixes`` (when given), and its folder exists and is writable;
    * it is not a symbolic link (daskgp never writes through one), not inside a zarr store, a run or a fit
      checkpoint;
    * it is none of ``reads`` (the inputs the same command reads), lies inside none of them (a table's
      folder) and holds none of them;
    * a new ``folder`` (Parquet predictions) must not exist: daskgp never replaces or deletes a folder;
    * an existing path is refused without ``overwrite`` and, even with it, replaced only when its marker
      (:func:`written_kind`) says daskgp wrote it as the same ``kind`` (never a CSV: no marker is possible).

    Raises FileExistsError, FileNotFoundError, PermissionError or ValueError with one line naming ``flag``.
    Several outputs of one command: :func:`check_outputs`.
    """
    raw = os.fspath(path)
    if not raw:
        raise ValueError(f"{flag}: the path is empty")
    if suffixes and not raw.lower().rstrip("/").endswith(tuple(suffixes)):
        raise ValueError(f"{flag} {raw}: give a path ending in {' or '.join(suffixes)}")
    full = os.path.abspath(raw)
    parent = os.path.dirname(full)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"{flag} {raw}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"{flag} {raw}: the folder {parent} is not writable")
    if os.path.islink(raw):
        raise ValueError(f"{flag} {raw} is a symbolic link; daskgp never writes through one: give the real "
                         "path")
    store = store_above(parent)
    if store is not None:
        raise ValueError(f"{flag} {raw} is inside the store {store}; write beside it, not into it")
    for r in reads:
        if r is None or not os.path.exists(r):
            continue
        r = os.fspath(r)
        if _within(full, r):
            where = "is" if os.path.realpath(full) == os.path.realpath(r) else "is inside"
            raise ValueError(f"{flag} {raw} {where} the input {r} this command reads")
        if os.path.lexists(raw) and _within(r, full):
            raise ValueError(f"{flag} {raw} holds the input {r} this command reads")
    if not os.path.lexists(raw):
        return full
    if folder:
        raise FileExistsError(f"{flag} {raw} exists: give a new folder (daskgp does not replace or delete a "
                              "folder)")
    if not overwrite:
        how = "--overwrite" if flag.startswith("--") else "overwrite=True"
        raise FileExistsError(f"{raw} exists; pass {how} to replace it")
    if raw.lower().endswith(".csv"):
        raise ValueError(f"refusing to overwrite {raw}: daskgp never replaces a CSV (it cannot tell one it "
                         "wrote from yours); remove it or choose another path")
    found = written_kind(raw)
    if found != kind:
        made = f"it is a {found} (not a {kind})" if found else f"daskgp did not write it (not a {kind})"
        if found is None and os.path.isfile(os.path.join(raw, "zarr.json")):
            try:
                marked, extra = _zarr_manifest(raw)
            except (OSError, ValueError):
                marked, extra = None, None
            if marked is not None and extra is not None:  # ours, with something of someone else's inside
                made = f"it holds {extra}: an overwrite would delete what is not daskgp's"
        raise ValueError(f"refusing to overwrite {raw}: {made}; choose another path")
    return full


def store_above(folder) -> str | None:
    """The nearest folder at or above ``folder`` that is a zarr store, a run or a fit checkpoint (it holds
    one of their metadata files), or None: nothing daskgp writes may go inside one."""
    folder = os.path.abspath(os.fspath(folder))
    while True:
        if any(os.path.lexists(os.path.join(folder, m)) for m in _STORE_FILES):
            return folder
        up = os.path.dirname(folder)
        if up == folder:
            return None
        folder = up


@dataclass(frozen=True)
class Output:
    """One path a command writes: what :func:`check_destination` needs (``flag`` names it in messages)."""

    path: str
    kind: str
    flag: str = "--out"
    overwrite: bool = False
    suffixes: tuple | None = None
    folder: bool = False


def check_outputs(outputs, reads=()) -> list[str]:
    """Every output of one command through :func:`check_destination`, and none the same as, inside or
    holding another (``--predictions`` onto ``--out``, or into ``OUT.checkpoint``): the absolute paths, in
    order. Call it before any work. ``outputs``: :class:`Output`s (None entries skipped)."""
    outs = [o for o in outputs if o is not None]
    full = [check_destination(o.path, o.kind, overwrite=o.overwrite, suffixes=o.suffixes, reads=reads,
                              flag=o.flag, folder=o.folder) for o in outs]
    for i in range(len(outs)):
        for j in range(len(outs)):
            if i != j and _within(full[i], full[j]) and (i < j or full[i] != full[j]):
                a, b = outs[i], outs[j]
                rel = "is the same path as" if full[i] == full[j] else "is inside"
                raise ValueError(f"{a.flag} {a.path} {rel} {b.flag} {b.path}: give each output its own path")
    return full


def array_digest(values) -> str:
    """A 128-bit BLAKE2b of an array's dtype, shape and bytes: what a saved model stores per variable so that
    a damaged copy (a lost chunk reads back as fill values) is refused instead of predicting NaN."""
    import hashlib

    a = np.asarray(values)
    h = hashlib.blake2b(digest_size=16)
    if a.dtype.kind in "OUS":  # text (names): its characters, in whatever width or object dtype it comes
        h.update(f"text{a.shape}".encode())
        h.update("\x1f".join(x.decode() if isinstance(x, bytes) else str(x) for x in a.ravel()).encode())
        return h.hexdigest()
    a = np.ascontiguousarray(a)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()
