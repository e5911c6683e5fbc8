"""Scoring new rows with the Bayesian GPLVM (``transform`` / ``impute`` / ``score_samples`` and
``GPLVMClassifier``'s per-class bound gains, Gal et al. 2014's MNIST experiment): where each row's local
search for q(x*) starts.

Both starts pick an inducing input: ``"bound"`` (before) evaluates the bound of the training set plus the row
at every inducing input (m bound evaluations per row and class), ``"predictive"`` (now) picks the one where
the fitted model's predictive density of the row, times the latent prior, is highest (one matrix product per
block of rows). Then the same L-BFGS-B on the bound. Side by side on the same fitted models, in one process,
single-threaded BLAS: seconds to score the test rows, the classifier's accuracy with each, and the bound
gains each reaches (the gain is the row's approximate log density: a worse start can only end in a worse
local optimum).

    python benchmarks/gplvm_scoring.py [--seeds 0,1,2] [--inducing 10,30]

scikit-learn's digits (1,797 images, 8 × 8): per seed, 50 training images per digit and 300 test images,
drawn at random. Writes benchmarks/results/gplvm_scoring.json: ``ratio`` = median over seeds and sizes of
bound-start ÷ predictive-start seconds; ``target_met`` = ratio > 1 and the accuracy within 2 test images of
the bound start's in every case.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import write_summary  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--inducing", default="10,30")
    ap.add_argument("--n-iter", type=int, default=30, help="L-BFGS-B iterations per row (the default)")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from distributed import Client, LocalCluster
    from sklearn.datasets import load_digits

    from daskgp.sparse.gplvm_classifier import GPLVMClassifier
    from daskgp.sparse.gplvm_points import new_points

    Y, labels = load_digits(return_X_y=True)
    cases = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            Client(lc) as client:
        for m in (int(v) for v in args.inducing.split(",")):
            for seed in (int(s) for s in args.seeds.split(",")):
                rng = np.random.default_rng(seed)
                train = np.concatenate([rng.choice(np.flatnonzero(labels == k), 50, replace=False)
                                        for k in range(10)])
                test = rng.choice(np.setdiff1d(np.arange(len(Y)), train), 300, replace=False)
                params = dict(n_components=3, n_inducing=m, n_outer=2, global_iter=20, local_iter=20,
                              chunk_rows=50, random_state=seed)
                clf = GPLVMClassifier(params, n_iter=args.n_iter).fit(Y[train], labels[train], client=client)
                rec = {"inducing": m, "seed": seed, "test_rows": len(test)}
                gains = {}
                for start in ("bound", "predictive"):
                    t0 = time.perf_counter()
                    g = np.column_stack([
                        new_points((Y[test] - mdl.y_mean_) / mdl.y_scale_, mdl.stats_, mdl.A_cols_,
                                   mdl.posterior_, args.n_iter, start=start)[2]
                        for mdl in clf.models_])
                    seconds = time.perf_counter() - t0
                    gains[start] = g
                    scores = np.column_stack([mdl._log_density(g[:, k]) for k, mdl in enumerate(clf.models_)])
                    pred = clf.classes_[np.argmax(scores + clf.log_prior_, axis=1)]
                    rec[start] = {"seconds": seconds, "accuracy": float(np.mean(pred == labels[test]))}
                d = gains["predictive"] - gains["bound"]  # nats, per (row, class)
                rec["speedup"] = rec["bound"]["seconds"] / rec["predictive"]["seconds"]
                rec["gain_difference_nats"] = {"median": float(np.median(d)),
                                               "p05": float(np.quantile(d, 0.05)),
                                               "p95": float(np.quantile(d, 0.95)),
                                               "share_worse_by_1_nat": float(np.mean(d < -1.0)),
                                               "share_better_by_1_nat": float(np.mean(d > 1.0))}
                b, pr = rec["bound"], rec["predictive"]
                print(m, seed, f"bound {b['seconds']:.1f} s acc {b['accuracy']:.3f}; "
                      f"predictive {pr['seconds']:.1f} s acc {pr['accuracy']:.3f}; "
                      f"speed-up {rec['speedup']:.2f}; gain diff", rec["gain_difference_nats"], flush=True)
                cases.append(rec)
    ratio = float(np.median([c["speedup"] for c in cases]))
    close = all(abs(c["predictive"]["accuracy"] - c["bound"]["accuracy"]) * c["test_rows"] <= 2
                for c in cases)
    result = {"ratio": ratio, "target_met": bool(ratio > 1 and close),
              "ratio_is": "bound-start / predictive-start seconds to score the test rows (median)",
              "n_iter": args.n_iter, "cases": cases}
    write_summary("gplvm_scoring", result)


if __name__ == "__main__":
    main()
