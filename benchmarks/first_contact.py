"""First contact: how long ``import daskgp``, ``daskgp --help`` and a prediction on a handful of rows take,
before and after a change, side by side in one run.

1. ``import daskgp`` and ``daskgp --help``, each in a fresh interpreter, ``--repeats`` times, for the working
   tree and for ``--before REV`` (checked out into a temporary git worktree, imported from there through
   PYTHONPATH); the heaviest imports of the working tree from ``python -X importtime``.
2. Predictions at 5 rows of concrete from a run loaded from disk (MH, 2 chains × 300 iterations, made once
   under benchmarks/runs/): 50 posterior draws, each a dense 1,030 × 1,030 Cholesky, with BLAS left at its
   default threads (what ``predict`` did before) and as ``predict`` now chooses
   (:mod:`daskgp.compute.threads`: one thread for a small dense solve), on a quiet machine and with one
   spinning process per core (the loaded machine of the report that asked for this).

Writes benchmarks/results/first_contact.json.

    python benchmarks/first_contact.py [--before REV] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _wall(cmd: list[str], env: dict, repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(), check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return {"min": min(times), "median": float(np.median(times)), "max": max(times), "runs": times}


def _startup(src: Path, repeats: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return {"import": _wall([sys.executable, "-c", "import daskgp"], env, repeats),
            "help": _wall([sys.executable, "-m", "daskgp", "--help"], env, repeats)}


def _heaviest_imports(k: int = 8) -> list:
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "daskgp", "--help"], capture_output=True,
                       text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    rows = []
    for line in r.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((parts[2].rstrip(), int(parts[1]) / 1e6))
    top = sorted((r for r in rows if not r[0].startswith("  ")), key=lambda r: -r[1])  # top-level only
    return [{"module": m.strip(), "cumulative_s": s} for m, s in top[:k]]


def _busy(k: int) -> list:
    """k processes spinning on a core each: the loaded machine of the issue's report."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(k)]


def _predict_latency(repeats: int) -> dict:
    import daskgp as dg
    from daskgp.compute import threads

    run = HERE / "runs" / "first_contact_concrete.zarr"
    if not run.exists():
        run.parent.mkdir(parents=True, exist_ok=True)
        ds = dg.load("concrete")
        dg.sample(ds.X_std, ds.y_std, out=str(run), data_meta=ds.meta(), method="mh", n_chains=2, n_iter=300)
    t0 = time.perf_counter()
    est = dg.BayesianGPRegressor.from_run(str(run))
    load_s = time.perf_counter() - t0
    X5 = dg.load("concrete").X[:5]
    out = {"load_run_s": load_s, "draws": est.n_predict_draws}
    saved = threads.SMALL_DENSE_N
    for load in (0, os.cpu_count() or 2):
        spinners = _busy(load)
        try:
            for name, limit in (("default_blas_threads", 0), ("chosen_threads", saved)):
                threads.SMALL_DENSE_N = limit  # 0: every solve "large", BLAS left at its default
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    est.predict(X5, return_std=True)
                    times.append(time.perf_counter() - t0)
                key = name if load == 0 else f"{name}_with_{load}_busy_processes"
                out[key] = {"min": min(times), "median": float(np.median(times)), "max": max(times)}
        finally:
            threads.SMALL_DENSE_N = saved
            for p in spinners:
                p.kill()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=None, help="a git revision to compare against")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(HERE / "results" / "first_contact.json"))
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(ROOT.parent / "shared" / "data"))
    result = {"machine": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
              "repeats": a.repeats, "after": _startup(ROOT, a.repeats)}
    if a.before:
        with tempfile.TemporaryDirectory() as tmp:
            wt = Path(tmp) / "before"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(wt), a.before],
                           check=True, capture_output=True)
            try:
                result["before"] = {"rev": a.before, **_startup(wt, a.repeats)}
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(wt)],
                               check=False, capture_output=True)
    result["heaviest_imports_after"] = _heaviest_imports()
    result["predict_5_rows_concrete"] = _predict_latency(a.repeats)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    from _common import write_results  # stamped with its provenance (benchmarks/claims.py)
    write_results(Path(Path(a.out)), result)
    for k in ("before", "after"):
        if k in result:
            r = result[k]
            print(f"{k:6s} import {r['import']['median']:.2f} s   --help {r['help']['median']:.2f} s")
    for k, v in result["predict_5_rows_concrete"].items():
        if isinstance(v, dict):
            print(f"predict 5 rows, {k}: median {v['median']:.2f} s (min {v['min']:.2f}, max {v['max']:.2f})")
    print(f"written {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
