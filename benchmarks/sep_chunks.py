"""SEP's seconds a minibatch against the number of row chunks (issue 58, item 5): the measurement behind
``chunk_rows='auto'`` (:func:`daskgp.gpc.fit.auto_chunk_rows`).

    python benchmarks/sep_chunks.py [--rows 2e6] [--chunks 4,8,16,32,64,100] [--seconds 30] [--fresh]

The synthetic taxi-like table of ``benchmarks/synthetic_taxi.py`` (**synthetic**; ``--rows`` rows drawn with
seed 0, the label "the trip took more than 20 minutes"), held as a dask array persisted on a 2-worker
LocalCluster (1 thread each) in ``c`` chunks of equal rows; ``SparseGPClassifier(method='sep')`` at m = 100
with minibatches of 2,000 rows (its default beyond 20,000 rows) for ``--seconds`` of fitting, no refinement.
Reported per chunk count: iterations and milliseconds an iteration (the fit's seconds over its iterations,
the k-means start included, the same for every count). SEP's minibatch is drawn from every chunk, and each
chunk's share costs a fixed part on its worker plus its m × m sums at the client every pass: the cost grows
with the chunks whatever the rows. A probe of a default: no ``target_met``. Resumable (a count already in
benchmarks/results/sep_chunks.json is skipped).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_results, write_results  # noqa: E402

OUT = HERE / "results" / "sep_chunks.json"
M, BATCH, LONG_TRIP = 100, 2_000, 20.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="2e6")
    ap.add_argument("--chunks", default="4,8,16,32,64,100")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--fresh", action="store_true")
    a = ap.parse_args()

    import dask.array as da
    from distributed import Client, LocalCluster
    from synthetic_taxi import draw

    import daskgp as dg
    from daskgp.compute.cluster import worker_environ

    n = int(float(a.rows))
    res = load_results(OUT, "sep_chunks", a.fresh)
    res.update(data="synthetic taxi-like table (benchmarks/synthetic_taxi.py), NOT real trips", rows=n, m=M,
               batch_size=BATCH, label=f"duration_min > {LONG_TRIP:g}", seconds=a.seconds, workers=2,
               threads_per_worker=1)
    rows = draw(n, 0)
    X, y = rows[:, :9], (rows[:, 9] > LONG_TRIP).astype(int)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      env=worker_environ()) as cluster, Client(cluster) as client:
        for c in (int(k) for k in a.chunks.split(",")):
            if str(c) in res["cases"]:
                continue
            size = -(-n // c)
            Xd, yd = client.persist([da.from_array(X, chunks=(size, -1)), da.from_array(y, chunks=size)])
            est = dg.SparseGPClassifier(n_inducing=M, method="sep", max_iter=10**9, random_state=0,
                                        chunk_rows=size, batch_size=BATCH, refine_passes=0)
            t = time.perf_counter()
            est.fit(Xd, yd, client=client, time_budget=a.seconds)
            seconds = time.perf_counter() - t
            res["cases"][str(c)] = {"chunks": c, "chunk_rows": size, "iterations": est.n_iter_,
                                    "fit_seconds": seconds, "ms_per_iteration": 1000 * seconds / est.n_iter_}
            write_results(OUT, res)
            print(f"{c} chunks of {size:,}: {est.n_iter_} iterations, "
                  f"{res['cases'][str(c)]['ms_per_iteration']:.0f} ms each", flush=True)
            del Xd, yd
    return 0


if __name__ == "__main__":
    sys.exit(main())
