"""The Bayesian GPLVM's seconds and bound against its rows a chunk (issue 58, item 5: defaults that scale; the
measurement behind keeping ``BayesianGPLVM``'s default ``chunk_rows`` of 1,000 at every n).

    python benchmarks/gplvm_chunks.py [--rows 1e6] [--chunk-rows 1000,8000,31250,62500,125000] [--fresh]

The synthetic taxi-like table of ``benchmarks/synthetic_taxi.py`` (**synthetic**; ``--rows`` rows drawn with
seed 0, its 9 inputs as the outputs Y), held as a dask array persisted on a 2-worker LocalCluster (1
thread each) in chunks of ``c`` rows; ``BayesianGPLVM(n_components=2, n_inducing=30, n_outer=1,
global_iter=3, local_iter=3, chunk_rows=c)`` — the same iterations whatever the chunks. Reported per
chunk size: the fit's seconds, its bound per row and the workers' peak memory (VmHWM, the workers restarted
before each size). Every global L-BFGS evaluation is two tasks a chunk
(statistics, gradient) and every local step one L-BFGS-B run a chunk, so a chunk costs a fixed part (the
scheduler's round trip, scipy's per-call overhead) besides its rows; and a local step moves every chunk's
q(x_i) at once against the others' statistics, so the chunking can change the bound a fit reaches. A probe
of a default: no ``target_met``. Resumable (a size already in benchmarks/results/gplvm_chunks.json is
skipped).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_results, write_results  # noqa: E402

OUT = HERE / "results" / "gplvm_chunks.json"
M, Q, ITER = 30, 2, 3


def _hwm_mb() -> float:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmHWM:")[1].split()[0]) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1e6")
    ap.add_argument("--chunk-rows", default="1000,8000,31250,62500,125000")
    ap.add_argument("--fresh", action="store_true")
    a = ap.parse_args()

    import dask.array as da
    from distributed import Client, LocalCluster
    from synthetic_taxi import draw

    import daskgp as dg
    from daskgp.compute.cluster import worker_environ

    n = int(float(a.rows))
    res = load_results(OUT, "gplvm_chunks", a.fresh)
    res.update(data="synthetic taxi-like table (benchmarks/synthetic_taxi.py), NOT real trips; its 9 inputs "
                    "as the outputs", rows=n, m=M, n_components=Q, rounds=1, global_iter=ITER,
               local_iter=ITER, workers=2, threads_per_worker=1)
    Y = draw(n, 0)[:, :9]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      env=worker_environ()) as cluster, Client(cluster) as client:
        for c in (int(k) for k in a.chunk_rows.split(",")):
            if str(c) in res["cases"]:
                continue
            client.restart()  # fresh worker processes: their VmHWM is this case's
            Yd = client.persist(da.from_array(Y, chunks=(c, -1)))
            est = dg.BayesianGPLVM(n_components=Q, n_inducing=M, n_outer=1, global_iter=ITER, local_iter=ITER,
                                   chunk_rows=c, random_state=0)
            t = time.perf_counter()
            est.fit(Yd, client=client)
            seconds = time.perf_counter() - t
            res["cases"][str(c)] = {"chunk_rows": c, "chunks": -(-n // c), "fit_seconds": seconds,
                                    "bound_per_row": float(est.bound_) / n,
                                    "bound_trace": [float(b) / n for b in est.bound_trace_],
                                    "seconds_evaluating": float(est.fit_info_["seconds_evaluating"]),
                                    "seconds_local": float(est.fit_info_["seconds_local"]),
                                    "local_steps_undone": int(est.fit_info_["local_steps_undone"]),
                                    "worker_peak_mb": sorted(client.run(_hwm_mb).values())}
            write_results(OUT, res)
            print(f"{c:,} rows a chunk ({-(-n // c)} chunks): {seconds:.0f} s, bound "
                  f"{res['cases'][str(c)]['bound_per_row']:.4f} a row", flush=True)
            del Yd, est
    return 0


if __name__ == "__main__":
    sys.exit(main())
