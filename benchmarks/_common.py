"""Set-up shared by the benchmark scripts: data and a cluster, and the resumable results JSON."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def start(dataset: str, n_workers: int):
    """(data set, benchmarks/runs/ folder, client of a new local cluster), with $DASKGP_DATA defaulting to
    the ../shared/data folder beside the project."""
    os.environ.setdefault("DASKGP_DATA", str(HERE.parents[0].parent / "shared" / "data"))
    import daskgp
    from daskgp.compute.cluster import get_client

    ds = daskgp.load(dataset)
    runs = HERE / "runs"
    runs.mkdir(exist_ok=True)
    return ds, runs, get_client(n_workers=n_workers)


def load_results(path: Path, benchmark: str, redo: bool) -> dict:
    """A resumable benchmark's results: what ``path`` holds (nothing with ``redo``), with its name, a
    'cases' dict and this machine's description."""
    results = {} if redo or not path.exists() else json.loads(path.read_text())
    results.setdefault("benchmark", benchmark)
    results.setdefault("cases", {})
    results["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform()}
    return results


def write_results(path: Path, results: dict, measured: bool = True) -> None:
    """Write the results JSON whole or not at all (a killed run never leaves half a file), stamped with its
    provenance: the revision measured and a content hash of the code measured (``claims.provenance``; the
    docs flag a result whose code has changed since). ``measured`` False (a report re-summarising what
    earlier runs measured): the provenance those runs stamped is kept."""
    if str(HERE) not in sys.path:  # scripts run as benchmarks/NAME.py have it; tests loading this file do not
        sys.path.insert(0, str(HERE))
    from claims import provenance

    if measured or "provenance" not in results:
        results["provenance"] = provenance(path.stem)
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=float))  # numpy scalars as numbers
    os.replace(tmp, path)


def close_segment(path: Path, results: dict, started: float, **what) -> None:
    """Record one invocation of a resumable benchmark — its wall seconds since ``started`` (``time.time()``)
    and ``what`` it was asked to do — under 'segments', and write the results; called in a ``finally``, so
    an interrupted segment's time is kept too."""
    import time

    results.setdefault("segments", []).append({"wall_seconds": time.time() - started, **what})
    write_results(path, results)


def write_summary(name: str, result: dict) -> Path:
    """Write a one-shot benchmark's ``result`` (with 'ratio' and 'target_met' at the top) to
    benchmarks/results/NAME.json with this machine's description, whole or not at all; print the two
    headline fields and the path."""
    result["machine"] = {"cores": os.cpu_count(), "python": platform.python_version(),
                         "platform": platform.platform()}
    path = HERE / "results" / f"{name}.json"
    write_results(path, result)
    print(json.dumps({k: result[k] for k in ("ratio", "target_met")}))
    print("wrote", path)
    return path


def read_result(name: str) -> dict:
    """The results JSON ``name`` (its stem) under benchmarks/results/."""
    return json.loads((HERE / "results" / f"{name}.json").read_text())


def head_revision() -> str:
    """This checkout's HEAD, abbreviated."""
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


@contextlib.contextmanager
def base_worktree(revision: str):
    """A temporary git worktree of ``revision`` (removed on exit): the "before" side of a before/after."""
    base = Path(tempfile.mkdtemp(prefix="daskgp-base-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), revision], check=True,
                   capture_output=True)
    try:
        yield base
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)


def missing_rounds(runs: dict, base: Path, rounds: int):
    """Yield (side, round, tree) for each run of a before/after benchmark not yet in ``runs`` ({"before":
    {round: result}, "after": {...}}), the sides alternating round by round: "before" in ``base`` (a
    :func:`base_worktree`), "after" in this checkout."""
    for r in range(rounds):
        for side, tree in (("before", base), ("after", ROOT)):
            if str(r) not in runs[side]:
                yield side, r, tree


def run_child(tree: Path, script: str, args: list[str], timeout: int = 1800,
              single_threaded: bool = True) -> dict:
    """Run ``script`` (Python source) in its own single-threaded process whose daskgp is imported from
    ``tree``; returns the JSON it printed on its last ``RESULT `` line, after checking that the daskgp it
    reported (key "daskgp", its file) came from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if single_threaded:  # False: the machine's default BLAS threads (a thread pool per core measured as used)
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.setdefault("DASKGP_DATA", str(ROOT.parent / "shared" / "data"))
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(script)
    try:
        out = subprocess.run([sys.executable, f.name, *args], env=env, cwd=tempfile.gettempdir(),
                             capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(f.name)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode or not lines:
        raise RuntimeError(f"the child process on {tree} failed:\n{out.stderr[-2000:]}")
    res = json.loads(lines[-1][7:])
    assert Path(res.pop("daskgp")).resolve().is_relative_to(tree.resolve()), f"ran a daskgp outside {tree}"
    return res


# A session here is stopped after 180 minutes and the next starts from a fresh clone, where benchmarks/runs/
# (ignored) is empty: a run that takes longer than a session is carried across in git instead, as one
# archive per run under benchmarks/carried/ — its zarr store (draws, checkpoints, the run's data: a few MB)
# and, until its first block, its warmup's checkpoint folder, never the writer's lock. It is packed after
# every committed block and every few minutes of the warmup, so that a stop loses at most the block or
# warmup segment in flight.
CARRIED = HERE / "carried"


def carried_archive(out: Path) -> Path:
    """Where the run ``out`` is carried between sessions: benchmarks/carried/NAME.zarr.tar.gz."""
    return CARRIED / f"{out.name}.tar.gz"


def _parts(out: Path) -> list[Path]:
    """The run's folders on disk that hold a commit: the run itself and its warmup checkpoint
    (``OUT.warmup``). A warmup folder before its first commit holds only its writer's lock: nothing to
    carry, and an empty folder would not resume."""
    from daskgp.runs.commit import CHECKPOINT

    return [p for p in (out, out.with_name(out.name + ".warmup")) if (p / CHECKPOINT).exists()]


def resumable(out: Path) -> bool:
    """Whether the run ``out`` has something committed on disk to resume from (the run, or its warmup)."""
    return bool(_parts(out))


def restore_run(out: Path) -> bool:
    """Unpack the carried archive of the run ``out`` (benchmarks/runs/NAME.zarr) when neither the run nor
    its warmup is on disk and an archive is; True when it did. Extraction uses tarfile's 'data' filter (no
    absolute paths, links or paths out of benchmarks/runs/)."""
    import tarfile

    archive = carried_archive(out)
    if _parts(out) or not archive.exists():
        return False
    out.parent.mkdir(exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(out.parent, filter="data")
    return True


def carry_run(out: Path) -> Path | None:
    """Pack the run ``out`` as it stands on disk (the run, its warmup checkpoint) into
    benchmarks/carried/NAME.zarr.tar.gz, replacing the archive whole (a stop mid-pack leaves the previous
    one), leaving out the writer's lock. Call it between a run's commits (its ``on_block``) or during its
    warmup, whose commits are single files replaced atomically. Returns the archive, or None when nothing
    of the run is on disk yet."""
    import tarfile

    from daskgp.runs.lock import LOCK_NAME

    parts = _parts(out)
    if not parts:
        return None
    archive = carried_archive(out)
    CARRIED.mkdir(exist_ok=True)
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for part in parts:
            tar.add(part, arcname=part.name,
                    filter=lambda info: None if Path(info.name).name == LOCK_NAME else info)
    os.replace(tmp, archive)
    return archive


def discard_run(out: Path) -> None:
    """Remove the run ``out`` once its result is recorded: the run and its warmup checkpoint on disk, and
    its carried archive (nothing left to continue)."""
    import shutil

    for part in (out, out.with_name(out.name + ".warmup")):
        if part.is_dir():
            shutil.rmtree(part)
    carried_archive(out).unlink(missing_ok=True)


def sitting(out: Path, segments: list | None = None, save=None):
    """One sitting of a long run at ``out``: its carried archive unpacked if the run is not on disk
    (:func:`restore_run`), a record of the sitting (start, revision, wall seconds, draws per chain, whether
    it was restored) appended to ``segments``, and the run's hooks. Returns (hooks, finish): ``hooks`` are
    the ``on_block`` (updates the record, calls ``save()``, carries the run) and ``on_warmup``
    (:func:`warmup_carrier`) keyword arguments of ``sample`` / ``resume``; ``finish()`` records the
    sitting's final wall time and returns it."""
    import time

    seg = {"started": time.strftime("%Y-%m-%d %H:%M"), "revision": head_revision(), "wall_s": 0.0,
           "restored_from_carried": restore_run(out), "draws_per_chain": None}
    if segments is not None:
        segments.append(seg)
    t0 = time.perf_counter()

    def on_block(post, stats, first):
        seg["wall_s"] = time.perf_counter() - t0
        seg["draws_per_chain"] = int(first + next(iter(post.values())).shape[1])
        if save is not None:
            save()
        carry_run(out)

    def finish() -> float:
        seg["wall_s"] = time.perf_counter() - t0
        return seg["wall_s"]

    return {"on_block": on_block, "on_warmup": warmup_carrier(out)}, finish


def stop_on_signals():
    """A ``RunControl`` that SIGINT or SIGTERM stops as the dashboard's Stop does — the tasks in flight
    cancelled, the committed draws and the warmup's checkpoint kept — so that the caller's ``finally``
    records and carries the sitting. Set explicitly: a job started in the background by a non-interactive
    shell inherits SIGINT ignored, and Python then installs no handler of its own (a sitting once went on
    through kill -INT)."""
    import signal
    import threading

    from daskgp.mcmc.control import RunControl

    control = RunControl()

    def stop(signum, frame):
        print(f"signal {signum}: stopping the sitting at the next safe point", flush=True)
        threading.Thread(target=control.stop, name="sitting-stop", daemon=True).start()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    return control


def warmup_carrier(out: Path, every_s: float = 300.0):
    """An ``on_warmup`` callback that carries the run (:func:`carry_run`) at most every ``every_s`` seconds
    while its warmup runs."""
    import time

    last = [time.monotonic()]

    def on_warmup(event):
        if time.monotonic() - last[0] >= every_s:
            last[0] = time.monotonic()
            carry_run(out)

    return on_warmup


def paired_by_seed(runs: dict, a: str, b: str, field: str = "wall_seconds") -> dict | None:
    """Runs ``a`` against ``b`` paired by seed, from a results dict keyed '<label>/<seed>' whose entries hold
    ``field``, 'mean_log' and 'sd_log' (the posterior's log-parameter means and sds): the seeds both ran;
    the ratios a ÷ b of ``field``; their geometric mean and the standard error of its log over seeds (None
    for one seed); whether a was below b in every seed; and per seed the two posterior means apart in their
    pooled sd (the same posterior sampled twice). None when no seed has both."""
    import math

    import numpy as np

    seeds = sorted(int(k.split("/")[1]) for k in runs
                   if k.startswith(f"{a}/") and f"{b}/{k.split('/')[1]}" in runs)
    if not seeds:
        return None
    ratios = [runs[f"{a}/{s}"][field] / runs[f"{b}/{s}"][field] for s in seeds]
    logs = np.log(ratios)
    gaps = []
    for s in seeds:
        ra, rb = runs[f"{a}/{s}"], runs[f"{b}/{s}"]
        pooled = np.sqrt(0.5 * (np.square(ra["sd_log"]) + np.square(rb["sd_log"])))
        gaps.append((np.abs(np.subtract(ra["mean_log"], rb["mean_log"])) / pooled).tolist())
    return {"seeds": seeds, "ratios": ratios, "geometric_mean": float(np.exp(logs.mean())),
            "se_of_log": float(logs.std(ddof=1) / math.sqrt(len(logs))) if len(logs) > 1 else None,
            "below_every_seed": bool(all(r < 1 for r in ratios)), "mean_gap_in_pooled_sd": gaps}


def median_seconds(fn, repeats: int, warmup: int = 0) -> float:
    """The median wall seconds of ``repeats`` calls of ``fn()``, after ``warmup`` untimed calls (a first
    call that pays for imports, caches or a cluster's function shipping)."""
    import statistics
    import time

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(statistics.median(times))


def time_to(curve, target: float, col: int = 1):
    """The first second of a (seconds, ...) curve at which its column ``col`` is at or below ``target``
    (None: never)."""
    return next((p[0] for p in curve if p[col] <= target), None)


def nearest_at(curve, seconds: float, column: int):
    """The value in ``column`` of the point of ``curve`` (rows [seconds, ...]) nearest in time to ``seconds``
    (the curves are logged every few seconds, a little after each mark)."""
    return min(curve, key=lambda row: abs(row[0] - seconds))[column]


def value_at(curve, t: float, col: int = 1):
    """A (seconds, ...) curve's column ``col`` at second t: its last point at or before t (its first when
    none is; the final one when the run ended sooner)."""
    pts = [p for p in curve if p[0] <= t]
    return pts[-1][col] if pts else curve[0][col]
