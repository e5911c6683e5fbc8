"""SEP on minibatches: a task per worker against a task per chunk (issue 58, item 2's lever: SEP's minibatch
iteration cost 0.17 s at 2,000 rows, most of it the scheduler's round of 13 tasks of ~150 rows each).

    python benchmarks/sep_tasks.py [--before REV] [--rounds 3] [--iterations 60] [--redo]

"before": a git worktree of ``--before`` (a task per chunk, a tree of sums); "after": this checkout (a task
per worker over the chunks it holds, the results summed in chunk order: the same numbers). Each side fits
``SparseGPClassifier(method='sep', n_inducing=100, batch_size=2000, max_iter=ITERATIONS)`` on the flights
delayed > 15 min training rows (10 % test, seed 0; 13 chunks of 20,000 rows) in its own process on its own
2-worker local cluster (one thread per worker), the sides alternating for ``--rounds`` rounds. Per run: the
seconds per iteration after the first 10 (from the callback's clock; the set-up left out) and the last
iteration's evidence estimate, which must be the same on both sides to round-off (the same rows, the same
steps). ``ratio``: median after ÷ median before. Resumable per (side, round): results/sep_tasks.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import base_worktree, load_results, missing_rounds, run_child, write_results  # noqa: E402

OUT = HERE / "results" / "sep_tasks.json"
BEFORE = "986c3da"  # main before the task per worker

CHILD = r'''
import json, sys, time
import numpy as np
from distributed import Client, LocalCluster
from sklearn.model_selection import train_test_split
import daskgp
from daskgp.datasets import load_classification

if __name__ == "__main__":
    iterations = int(sys.argv[1])
    d = load_classification("flights_delayed")
    y = (d.y == np.unique(d.y)[1]).astype(int)
    Xtr, _, ytr, _ = train_test_split(d.X, y, test_size=0.1, random_state=0, stratify=y)
    stamps = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0") as cl, Client(cl) as client:
        est = daskgp.SparseGPClassifier(n_inducing=100, method="sep", batch_size=2000, max_iter=iterations,
                                        random_state=0)
        est.fit(Xtr, ytr, client=client, callback=lambda ev: stamps.append(time.perf_counter()))
    gaps = np.diff(stamps[9:])
    print("RESULT " + json.dumps({"seconds_per_iteration": float(np.median(gaps)),
                                  "mean_seconds_per_iteration": float(gaps.mean()),
                                  "iterations": len(stamps), "last_evidence": float(est.evidence_),
                                  "daskgp": daskgp.__file__}))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--redo", action="store_true")
    a = ap.parse_args()
    res = load_results(OUT, "sep_tasks", a.redo)
    res.update(before=a.before, iterations=a.iterations)
    runs = res.setdefault("runs", {"before": {}, "after": {}})
    t0 = time.time()
    with base_worktree(a.before) as base:
        for side, r, tree in missing_rounds(runs, base, a.rounds):
            runs[side][str(r)] = run_child(tree, CHILD, [str(a.iterations)])
            print(side, r, runs[side][str(r)], flush=True)
            write_results(OUT, res)
    med = {s: statistics.median(v["seconds_per_iteration"] for v in runs[s].values()) for s in runs}
    ev = {s: [v["last_evidence"] for v in runs[s].values()] for s in runs}
    res.update(median_seconds_per_iteration=med, ratio=med["after"] / med["before"],
               same_evidence=max(abs(x - y) for x in ev["before"] for y in ev["after"])
               <= 1e-8 * max(1.0, abs(ev["before"][0])))
    res.setdefault("segments", []).append({"wall_seconds": time.time() - t0})
    write_results(OUT, res)
    print(f"SEP minibatch iteration: {med['before']:.3f} s → {med['after']:.3f} s "
          f"(ratio {res['ratio']:.2f}); same evidence: {res['same_evidence']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
