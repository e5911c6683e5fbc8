"""The Bayesian GPLVM's ψ-statistics a row, before and after writing ψ2's exponent and derivatives as (m, m)
products (issue 58, item 4: the cost that kept a 10⁷-row GPLVM out of reach; :mod:`daskgp.sparse.psi`).

    python benchmarks/psi_cost.py [--before REV] [--rounds 3] [--redo]

Data: house_8L (22,784 rows, its 8 inputs and target standardised: p = 9 outputs, as the taxi table's 9
columns), latent q = 2 from its first two principal components, S = 0.1, m = 30 inducing inputs drawn from
those means (seed 0): the settings of ``benchmarks/scale.py``'s GPLVM cases. Each side, in its own
single-threaded process (``_common.run_child``), times the three per-chunk maps of a GPLVM bound on all
22,784 rows as one chunk — the statistics (``chunk_stats``), the local gradient (``chunk_local_grad``, every
local L-BFGS evaluation) and the global one (``chunk_global_grad``) — best of 3 calls each, and then a whole
fit: ``BayesianGPLVM(n_components=2, n_inducing=30, n_outer=2, global_iter=5, local_iter=5)`` on a 2-worker
local cluster (1 thread each), its seconds and final bound. The sides must agree: the statistics (sums of
positive terms) to 1e-12 relative, the fits' bounds to 1e-6 (an L-BFGS path may round differently), and the
gradients to 1e-5 of their largest entry: their weights ∂F/∂D reach 1e9 here (β = 10 on 22,784 rows) and
the sums cancel, so either form is off a long-double evaluation of the direct form by up to 1e-8 (checked
on the first 3,000 rows when this was written: before 7e-9, after 5e-9 for ∂F/∂μ), and the two forms over
all rows by about 1e-6. Sides alternate for ``--rounds`` rounds; ``ratio``: median after ÷ median
before of the per-row seconds of a local-gradient evaluation (statistics + local gradient, what a local
iteration costs), and of the whole fit. Resumable per (side, round): results/psi_cost.json.
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

OUT = HERE / "results" / "psi_cost.json"
BEFORE = "b6f25c0"  # main before daskgp.sparse.psi

CHILD = r'''
import json, time
import numpy as np
from distributed import Client, LocalCluster
import daskgp
from daskgp.sparse import bound as B
from daskgp.inducing.features import GlobalParams

def best(f, k=3):
    out, ts = None, []
    for _ in range(k):
        t = time.perf_counter(); out = f(); ts.append(time.perf_counter() - t)
    return out, min(ts)

if __name__ == "__main__":
    d = daskgp.load("house_8L")
    Y = np.column_stack([d.X_std, d.y_std])
    Y = (Y - Y.mean(0)) / Y.std(0)
    U, s, _ = np.linalg.svd(Y - Y.mean(0), full_matrices=False)
    mu = U[:, :2] * s[:2] / np.sqrt(len(Y))
    mu = mu / mu.std(0)
    S = np.full_like(mu, 0.1)
    Z = mu[np.random.default_rng(0).choice(len(mu), 30, replace=False)]
    th = GlobalParams(Z, 1.0, np.ones(2), noise=0.1)
    st, t_stats = best(lambda: B.chunk_stats(Y, th, mu, S))
    g = B.bound_and_grads(st, th)
    (dmu, dS), t_local = best(lambda: B.chunk_local_grad(Y, th, g, mu, S))
    glob, t_global = best(lambda: B.chunk_global_grad(Y, th, g, mu, S))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cl, Client(cl) as client:
        est = daskgp.BayesianGPLVM(n_components=2, n_inducing=30, n_outer=2, global_iter=5, local_iter=5,
                                   random_state=0)
        t = time.perf_counter()
        est.fit(Y, client=client)
        t_fit = time.perf_counter() - t
    print("RESULT " + json.dumps({
        "rows": len(Y), "stats_seconds": t_stats, "local_grad_seconds": t_local,
        "global_grad_seconds": t_global, "fit_seconds": t_fit, "fit_bound": float(est.bound_),
        "D": np.asarray(st.D).ravel().tolist(), "dmu": dmu.ravel()[:2000].tolist(),
        "dS": dS.ravel()[:2000].tolist(), "global_grad": np.asarray(glob).ravel().tolist(),
        "daskgp": daskgp.__file__}))
'''


def _rel(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(a)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--redo", action="store_true")
    a = ap.parse_args()
    res = load_results(OUT, "psi_cost", a.redo)
    res.update(before=a.before, data="house_8L (22,784 rows; 8 inputs and the target as p = 9 outputs)",
               q=2, m=30, fit="BayesianGPLVM(n_components=2, n_inducing=30, n_outer=2, global_iter=5, "
                              "local_iter=5), 2 workers × 1 thread")
    runs = res.setdefault("runs", {"before": {}, "after": {}})
    t0 = time.time()
    with base_worktree(a.before) as base:
        for side, r, tree in missing_rounds(runs, base, a.rounds):
            out = runs[side][str(r)] = run_child(tree, CHILD, [], single_threaded=True)
            if r:  # only round 0's numbers are compared
                for k in ("D", "dmu", "dS", "global_grad"):
                    out.pop(k)
            print(side, r, {k: v for k, v in out.items() if "seconds" in k or k == "fit_bound"}, flush=True)
            write_results(OUT, res)
    b0, a0 = runs["before"]["0"], runs["after"]["0"]
    if "D" in b0 and "D" in a0:  # round 0 keeps the compared numbers until they are compared, then drops them
        res["agreement"] = {k: _rel(b0[k], a0[k]) for k in ("D", "dmu", "dS", "global_grad")}
    res["agreement"]["fit_bound"] = abs(b0["fit_bound"] - a0["fit_bound"]) / abs(b0["fit_bound"])
    agree = res["agreement"]
    med = {s: {k: statistics.median(v[k] for v in runs[s].values())
               for k in ("stats_seconds", "local_grad_seconds", "global_grad_seconds", "fit_seconds")}
           for s in runs}
    n = b0["rows"]
    per_row = {s: {f"{k}_evaluation_us": 1e6 * (med[s]["stats_seconds"] + med[s][f"{k}_grad_seconds"]) / n
                   for k in ("local", "global")} for s in med}
    ratio = per_row["after"]["local_evaluation_us"] / per_row["before"]["local_evaluation_us"]
    same = (agree["D"] <= 1e-12 and max(agree["dmu"], agree["dS"], agree["global_grad"]) <= 1e-5
            and agree["fit_bound"] <= 1e-6)
    res.update(median_seconds=med, per_row=per_row, same_numbers=same, ratio=ratio,
               fit_ratio=med["after"]["fit_seconds"] / med["before"]["fit_seconds"],
               target_met=bool(same and ratio < 1))
    for v in (b0, a0):  # keep the JSON small: the compared numbers are summarised in 'agreement'
        for k in ("D", "dmu", "dS", "global_grad"):
            v.pop(k, None)
    res.setdefault("segments", []).append({"wall_seconds": time.time() - t0})
    write_results(OUT, res)
    print(f"a local evaluation: {per_row['before']['local_evaluation_us']:.1f} → "
          f"{per_row['after']['local_evaluation_us']:.1f} µs a row (ratio {ratio:.3f}); the fit "
          f"{med['before']['fit_seconds']:.1f} → {med['after']['fit_seconds']:.1f} s; agreement {agree}",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
