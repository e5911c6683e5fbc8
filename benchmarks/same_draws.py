"""The "behaviour kept" check of a refactor (issue 32's sampler registry, issue 57's driver cut along its
seams): the draws of every built-in sampler, at a base git revision (checked out into a temporary worktree)
and in this checkout, each in its own process on its own 2-worker LocalCluster — 300 concrete rows, 2 chains
× 200 iterations (warmup and kept), seed 3. A case is a method, optionally with its warmup route
(``sghmc:ascent`` climbs by the stochastic ascent in checkpointed segments, ``sghmc:subset`` starts from the
subset; a bare method takes its default: the exact MAP at this size); ``gpc:ep``, ``gpc:sep``, ``gpc:adf``
fit the classifier (300 breast-cancer rows, m = 10, 25 iterations) and digest its evidence trace,
hyperparameters, factor and predictions; ``advgp:adam``, ``advgp:adadelta``, ``sgpr`` and ``gplvm`` fit the
sparse regressions (:func:`_sparse_fit`) and digest their objective trace, parameters and predictions (the
GPLVM's embedding). Equal digests mean the refactor kept
each sampler's arithmetic and each route's start bit for bit, so its effective samples per second can differ
only by the driver's overhead. No time is recorded: this is an identity check, and the two runs need not
share a quiet machine. Writes benchmarks/results/same_draws.json (or ``--out``).

    python benchmarks/same_draws.py [--base REV] [--cases sghmc,sgld,mh,hmc,sghmc:ascent,sghmc:subset,gpc:sep]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import ROOT, base_worktree, head_revision, run_child, write_results  # noqa: E402

CASES = ("sghmc", "sgld", "mh")  # issue 32's; a base revision before HMC knows no 'hmc'
_CHILD = r"""
import hashlib, json, sys, tempfile
import numpy as np

def _sparse_fit(daskgp, method, option, c, client):
    # (fitted estimator, its objective trace): ADVGP (tau = 0, its update `option`: adam or adadelta, 60
    # updates from k-means), SGPR (m = 10, 30 L-BFGS-B iterations) on 300 concrete rows, the GPLVM on 120
    # of scikit-learn's digits
    if method == "advgp":
        est = daskgp.ADVGPRegressor(n_inducing=10, max_iter=60, tol=None, init="kmeans", random_state=3,
                                    optimizer=option or "adam").fit(c.X[:300], c.y[:300], client=client)
        return est, [r.objective for r in est.records_]
    if method == "sgpr":
        est = daskgp.SparseGPRegressor(n_inducing=10, max_iter=30, random_state=3).fit(c.X[:300], c.y[:300],
                                                                                      client=client)
        return est, est.bound_trace_
    from sklearn.datasets import load_digits
    d = load_digits()
    est = daskgp.BayesianGPLVM(n_inducing=8, n_outer=2, global_iter=10, local_iter=3, random_state=3).fit(
        d.data[d.target == 0][:120], client=client)
    return est, est.bound_trace_


def main():
    import daskgp
    from distributed import Client, LocalCluster
    c = daskgp.load("concrete")
    X, y = c.X_std[:300], c.y_std[:300]
    out = {"daskgp": daskgp.__file__}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            Client(cl) as client, tempfile.TemporaryDirectory() as tmp:
        for case in sys.argv[1].split(","):
            method, _, warmup = case.partition(":")
            if method == "gpc":  # a classifier fit: its evidence trace, hyperparameters, factor, predictions
                from sklearn.datasets import load_breast_cancer
                Xc, yc = load_breast_cancer(return_X_y=True)
                clf = daskgp.SparseGPClassifier(n_inducing=10, method=warmup, max_iter=25, chunk_rows=100,
                                                random_state=3).fit(Xc[:300], yc[:300], client=client)
                h = hashlib.sha1()
                for a in ([r.evidence for r in clf.records_], clf.params_.to_vector(), clf.factor_.T,
                          clf.factor_.c, clf.predict_proba(Xc[300:])):
                    h.update(np.ascontiguousarray(np.asarray(a, dtype=float)).tobytes())
                out[case] = {"sha1": h.hexdigest()}
                continue
            if method in ("advgp", "sgpr", "gplvm"):  # a sparse fit: its trace, parameters, predictions
                est, trace = _sparse_fit(daskgp, method, warmup, c, client)
                h = hashlib.sha1()
                for a in (trace, est.params_.to_vector(), est.predict(c.X[300:400]) if method != "gplvm"
                          else est.embedding_):
                    h.update(np.ascontiguousarray(np.asarray(a, dtype=float)).tobytes())
                out[case] = {"sha1": h.hexdigest()}
                continue
            dt = daskgp.sample(X, y, out=f"{tmp}/{method}-{warmup}.zarr", client=client, method=method,
                               n_chains=2, n_iter=200, checkpoint_every=50, batch=50, subset_size=200, seed=3,
                               **({"warmup": warmup} if warmup else {}))
            h = hashlib.sha1()
            for g in ("warmup_posterior", "posterior"):
                for name in dt.attrs["param_names"]:
                    h.update(np.ascontiguousarray(dt[g][name].values).tobytes())
            out[case] = {"sha1": h.hexdigest()}
    print("RESULT " + json.dumps(out))

if __name__ == "__main__":
    main()
"""


def _run(tree: Path, cases) -> dict:
    return run_child(tree, _CHILD, [",".join(cases)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="de4ca6f", help="the revision before the sampler registry")
    ap.add_argument("--cases", default=",".join(CASES), help="method[:warmup], comma-separated")
    ap.add_argument("--out", default=str(HERE / "results" / "same_draws.json"))
    args = ap.parse_args()
    cases = args.cases.split(",")
    t0 = time.perf_counter()
    with base_worktree(args.base) as base:
        before, after = _run(base, cases), _run(ROOT, cases)
    results = {"benchmark": "same_draws", "base": args.base, "head": head_revision(), "cpus": os.cpu_count(),
               "before": before, "after": after, "wall_s": time.perf_counter() - t0,
               "identical": {m: before[m]["sha1"] == after[m]["sha1"] for m in cases}}
    write_results(Path(args.out), results)
    print(json.dumps(results["identical"]))
    return 0 if all(results["identical"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
