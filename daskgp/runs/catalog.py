"""Every run under the folders a reader may see (``daskgp dashboard --runs DIR``): what each is, who writes it
and where it stands, read from the runs' small JSON files and the results files' attributes only — nothing
is written, locked, executed or followed through a symbolic link, and nothing outside the allowed folders is
read.

A folder is listed when it is

* a chains run (:mod:`daskgp.runs.layout`: ``zarr.json`` with the ``daskgp_run`` marker), finished, being
  written (here or by a process on another host that shares the storage), interrupted, or damaged — and a
  new run's staging folder (``OUT.partial-PID-HEX``) before its first block commits (phase 'starting');
* a fit checkpoint (:mod:`daskgp.runs.fits`: SGPR, ADVGP, GPC, the GPLVM, or a chains run's warmup before
  its first draws), while a fit is in progress or after it was interrupted;
* a finished fit's results file (the netCDF ``daskgp sgpr|advgp|gpc --out`` writes, or a model's ``save``),
  which holds the fit's trace once its checkpoint is removed (:data:`RESULT_KINDS`).

Each is one :class:`RunEntry`. A damaged run is listed with its one-line message, never skipped: the reader
can see it exists and what ``daskgp repair`` would say.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .commit import CHECKPOINT
from .layout import RunError, is_run, read_checkpoint, staged_run
from .lock import LockInfo, lock_info

__all__ = ["RunEntry", "allowed_path", "commit_stamp", "describe", "find_runs", "MAX_DEPTH", "MAX_ENTRIES",
           "RESULT_KINDS"]

MAX_DEPTH = 4  # folders below a root searched for runs (a run's own folders are never searched)
MAX_ENTRIES = 20_000  # directory entries looked at per listing: a huge tree is cut, not walked for minutes
# a results file's marker (daskgp.core.files.MARK) → (the family, the variable that holds one value a step)
RESULT_KINDS = {"daskgp.SparseGPRegressor": ("sgpr", "bound_trace"),
                "daskgp.ADVGPRegressor": ("advgp", "objective"),
                "daskgp.SparseGPClassifier": ("gpc", "evidence")}
RESULT_SUFFIXES = (".nc", ".nc4", ".netcdf")


@dataclass(frozen=True)
class RunEntry:
    """One run: ``path`` (real, absolute), ``name`` (relative to ``root``, for display), ``kind`` ('chains',
    or a fit's family: 'sgpr', 'advgp', 'gpc', 'gplvm', 'warmup', …), ``phase`` (chains: 'starting' for a new
    run's staging folder ``OUT.partial-PID-HEX`` before its first block, 'warmup' while the committed draws
    are the warmup's, then 'sampling'; 'damaged'; a chains run's pre-chain warmup checkpoint ``OUT.warmup``:
    'warmup'; other fit checkpoints: 'fitting'; results files: 'finished'), ``state`` ('writing' while a
    live writer, or one on another host, holds its lock; 'finished' when a chains run has its iterations,
    and for a results file; 'stopped' otherwise: interrupted, stopped from a page, or stopped at its ESS
    target — resumable), ``steps`` (committed draws per chain, or a fit's
    finished steps), ``total`` (the iterations a chains run asks for, None for fits), ``writer`` (its lock,
    when there is one), ``modified`` (the last commit's time, seconds since the epoch) and ``message`` (why
    it is damaged)."""

    path: str
    name: str
    root: str
    kind: str
    phase: str
    state: str
    steps: int
    total: int | None
    writer: LockInfo | None
    modified: float
    message: str = ""

    @property
    def who(self) -> str:
        """Who writes it, in words ('' when nobody holds its lock)."""
        if self.writer is None:
            return ""
        if self.writer.state == "unreadable":
            return "an unreadable lock"
        return f"PID {self.writer.pid} on {self.writer.host} ({self.writer.state})"


def _real_roots(roots) -> list[str]:
    out = []
    for r in roots:
        real = os.path.realpath(os.fspath(r))
        if not os.path.isdir(real):
            raise ValueError(f"runs folder {r} does not exist or is not a folder")
        out.append(real)
    if not out:
        raise ValueError("no runs folder given")
    return out


def allowed_path(roots, path) -> tuple[str, str]:
    """(real path, its root): ``path`` resolved (symbolic links, ``..``) must lie inside one of ``roots``
    (relative paths are taken from the first root); ValueError in one line otherwise."""
    real_roots = _real_roots(roots)
    p = os.fspath(path)
    real = os.path.realpath(p if os.path.isabs(p) else os.path.join(real_roots[0], p))
    for root in real_roots:
        if real == root or real.startswith(root.rstrip("/") + "/"):
            return real, root
    raise ValueError(f"{path} is outside the runs folders this dashboard may read "
                     f"({', '.join(real_roots)})")


def _json(path: str, limit: int = 1 << 22):
    """A small JSON file, or None (missing, too big, not JSON)."""
    try:
        if os.path.getsize(path) > limit:
            return None
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None


def _fit_kind(path: str) -> tuple[str, int] | None:
    """(the family of a fit checkpoint folder — 'sgpr' from 'daskgp.sgpr-checkpoint' —, its finished steps)
    from one read of its commit, or None when ``path`` is not a fit checkpoint folder."""
    from ..core.files import MARK
    from .fits import MARKER as FIT_MARKER
    from .fits import is_fit_store

    if not is_fit_store(path):
        return None
    doc = _json(os.path.join(path, CHECKPOINT), limit=1 << 28)
    kind = doc.get(MARK) if isinstance(doc, dict) and FIT_MARKER in doc else None
    steps = doc["step"] if isinstance(doc, dict) and type(doc.get("step")) is int else 0
    if not isinstance(kind, str):
        return ("fit" if os.path.exists(os.path.join(path, CHECKPOINT)) else "fit (starting)"), steps
    return kind.removeprefix("daskgp.").removesuffix("-checkpoint"), steps


def commit_stamp(path) -> tuple[int, int] | None:
    """(mtime in ns, size) of the run's or fit's last commit, None without one: a reader rereads a run
    only when this changed."""
    try:
        st = os.stat(os.path.join(os.fspath(path), CHECKPOINT))
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _results_entry(path: str, name: str, root: str) -> RunEntry | None:
    """A finished fit's results file, from its attributes and one variable's shape (h5py: no data read)."""
    from ..core.files import written_kind

    marker = written_kind(path) if path.lower().endswith(RESULT_SUFFIXES) else None
    if marker not in RESULT_KINDS:
        return None
    kind, var = RESULT_KINDS[marker]
    try:
        import h5py

        with h5py.File(path, "r") as f:
            steps = int(f[var].shape[0]) if var in f else 0
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return RunEntry(path, name, root, kind, "finished", "finished", steps, None, None, os.path.getmtime(path))


def describe(path, root: str) -> RunEntry | None:
    """The entry of the run at ``path`` (real) found under ``root``, or None when it is not a run (or no
    longer exists: a finished fit removes its checkpoint)."""
    path = os.fspath(path)
    name = os.path.relpath(path, root)
    if os.path.isfile(path):
        return _results_entry(path, name, root)
    ckpt_file = os.path.join(path, CHECKPOINT)
    try:
        modified = os.path.getmtime(ckpt_file if os.path.exists(ckpt_file) else path)
    except OSError:  # removed, perhaps between the two looks
        return None
    writer = lock_info(path)
    state = "writing" if writer is not None and writer.state in ("live", "foreign") else "stopped"
    if staged_run(path) is not None and is_run(path):  # a new run before its first block commits
        return RunEntry(path, name, root, "chains", "starting", state, 0, None, writer, modified)
    if is_run(path):
        try:
            ck = read_checkpoint(path)
        except (RunError, FileNotFoundError, ValueError) as e:
            return RunEntry(path, name, root, "chains", "damaged", state, 0, None, writer, modified,
                            str(e).splitlines()[0])
        cfg = ck.get("config") if isinstance(ck.get("config"), dict) else {}
        total = int(cfg["n_iter"]) if isinstance(cfg.get("n_iter"), int) else None
        n, warm = int(ck["n_draws"]), int(ck["warmup_draws"])
        if state == "stopped" and total is not None and n >= total:
            state = "finished"
        return RunEntry(path, name, root, "chains", "warmup" if n <= warm else "sampling", state, n, total,
                        writer, modified)
    fit = _fit_kind(path)
    if fit is None:
        return None
    kind, steps = fit
    phase = "warmup" if kind == "warmup" else "fitting"  # a chains run's pre-chain warmup (OUT.warmup)
    return RunEntry(path, name, root, kind, phase, state, steps, None, writer, modified)


def find_runs(roots, max_depth: int = MAX_DEPTH) -> list[RunEntry]:
    """Every run under the folders ``roots``, newest commit first. Symbolic links are not followed (a link
    could lead outside the roots); a run's own folders are not searched; at most :data:`MAX_ENTRIES`
    directory entries are looked at."""
    found, seen = [], 0
    for root in _real_roots(roots):
        stack = [(root, 0)]
        while stack and seen < MAX_ENTRIES:
            folder, depth = stack.pop()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for e in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    break
                if e.name.startswith("."):
                    continue
                is_folder = e.is_dir(follow_symlinks=False)
                results = e.is_file(follow_symlinks=False) and e.name.lower().endswith(RESULT_SUFFIXES)
                if not (is_folder or results):  # links, other files
                    continue
                entry = describe(e.path, root)
                if entry is not None:
                    found.append(entry)
                elif is_folder and depth + 1 < max_depth:
                    stack.append((e.path, depth + 1))
    return sorted(found, key=lambda r: -r.modified)
