"""Where SGPR starts, measured: test RMSE and bound against L-BFGS-B iterations from the k-means start
(``init='kmeans'``, the default) and from the subset start (``init='subset'``: the collapsed bound of the
2·10⁴-row k-means sample maximised in the client first), on the 10⁶-row **synthetic** taxi-like table of
``benchmarks/synthetic_taxi.py`` (what ``benchmarks/scale.py`` writes; 1 % held out by row hash), m = 100,
two single-threaded workers, over several seeds (the seed draws the sample, k-means and nothing else: the
split is fixed).

The question it answers: at 10⁸ rows one pass over the rows (one evaluation of the bound) is minutes, so the
number of passes to a good fit decides what SGPR costs; does the subset start buy a good fit in fewer passes,
and what does it cost at the end? Every ``--every`` iterations the parameters are kept; after the fit the
test RMSE of each kept iterate is computed from its optimal q(u) (one more pass each, not timed).

    python benchmarks/scale.py --rows 1e6 --methods linear   # writes the table if it is not there
    python benchmarks/sgpr_start.py [--seeds 0,1,2] [--iterations 100] [--every 5]

Resumable per (start, seed) case: results/sgpr_start.json after each; every invocation's wall time is
appended to 'segments'.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import close_segment, load_results, write_results  # noqa: E402

OUT = HERE / "results" / "sgpr_start.json"
TABLE = HERE / "runs" / "taxi_1e06"
TEST_FRACTION, M = 0.01, 100


def run_case(init: str, seed: int, iterations: int, every: int) -> dict:
    """One fit on a fresh local cluster; its trajectory of (iteration, bound, seconds, test RMSE)."""
    import dask.array as da
    from distributed import Client, LocalCluster

    import daskgp as dg
    from daskgp.compute.cluster import worker_environ
    from daskgp.datasets import read_table, split_table
    from daskgp.sparse.chunks import ChunkedRows
    from daskgp.sparse.fit import SparsePosterior

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      env=worker_environ()) as cluster, Client(cluster) as client:
        t = read_table(str(TABLE), target="duration_min")
        Xtr, ytr, Xte, yte = split_table(t, TEST_FRACTION, seed=0)
        Xte, yte = da.compute(Xte, yte)
        kept = {}
        t0 = time.perf_counter()

        def keep(theta, trace):
            k = len(trace)
            if k <= 3 or k % every == 0 or k == iterations:
                kept[k] = (theta, float(trace[-1]), time.perf_counter() - t0)

        est = dg.SparseGPRegressor(n_inducing=M, max_iter=iterations, random_state=seed, init=init)
        est.fit(Xtr, ytr, client=client, on_params=keep)
        seconds = time.perf_counter() - t0
        # each kept iterate's q(u) from one more pass over the training rows, in the fit's units
        Xs, ys = (Xtr - est.x_mean_) / est.x_scale_, (ytr - est.y_mean_) / est.y_scale_
        rows = ChunkedRows.from_arrays(client, ys, est.chunk_rows, X=Xs)
        Xtes = (Xte - est.x_mean_) / est.x_scale_
        trajectory = []
        for k in sorted(kept):
            theta, bound, at = kept[k]
            mean = SparsePosterior.from_stats(theta, rows.stats(theta)).predict_block(Xtes)[0].ravel()
            rmse = float(np.sqrt(np.mean((mean * est.y_scale_ + est.y_mean_ - yte) ** 2)))
            trajectory.append({"iteration": k, "bound": bound, "seconds": at, "test_rmse": rmse})
        rows.release()
        start = {k: v for k, v in getattr(est, "start_info_", {}).items() if k != "message"}
        return {"init": init, "seed": seed, "fit_seconds": seconds, "iterations": est.n_iter_,
                "evaluations": est.fit_info_["n_evaluations"], "message": est.fit_info_["message"],
                "start": start, "lengthscales_std": est.params_.lengthscales.tolist(),
                "trajectory": trajectory}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--case", nargs=2, metavar=("INIT", "SEED"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.case:  # the child: one case, its JSON on stdout
        print("RESULT", json.dumps(run_case(a.case[0], int(a.case[1]), a.iterations, a.every)))
        return 0
    if not TABLE.exists():
        raise SystemExit(f"{TABLE} is missing: benchmarks/scale.py --rows 1e6 --methods linear writes it")
    res = load_results(OUT, "sgpr_start", a.fresh)
    res.update(data="synthetic taxi-like table, 10^6 rows (benchmarks/synthetic_taxi.py), NOT real trips",
               m=M, test_fraction=TEST_FRACTION, iterations=a.iterations, every=a.every, workers=2,
               threads_per_worker=1)
    t_start = time.time()
    try:
        for seed in (int(s) for s in a.seeds.split(",")):
            for init in ("kmeans", "subset"):
                key = f"{init}/{seed}"
                if key in res["cases"]:
                    continue
                argv = [sys.executable, __file__, "--case", init, str(seed), "--iterations",
                        str(a.iterations), "--every", str(a.every)]
                r = subprocess.run(argv, capture_output=True, text=True, env=os.environ.copy())
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
                if r.returncode or not lines:
                    raise SystemExit(f"{key} failed: {r.stderr[-3000:]}")
                res["cases"][key] = c = json.loads(lines[-1][7:])
                write_results(OUT, res)
                tr = c["trajectory"]
                print(key, f"RMSE after 1 iteration {tr[0]['test_rmse']:.3f}, after {tr[-1]['iteration']} "
                      f"{tr[-1]['test_rmse']:.3f}; {c['evaluations']} evaluations, {c['fit_seconds']:.0f} s",
                      flush=True)
    finally:
        close_segment(OUT, res, t_start, seeds=a.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
