"""ADVGP's end-of-fit refine: q(w) re-made at its closed-form optimum for the final kernel from every row
(``ADVGPRegressor(refine=True)``, the default since revision 93fc529), against the q(w) the server's natural
steps leave (issue 58, item 2).

    python benchmarks/advgp_refine.py [--seeds 0,1,2] [--budget 150] [--fresh]

All 2013 NYC flights rows (10 % test, the NGD-SVGP benchmark's split, ``random_state`` = seed), m = 100,
every other setting the library's default (τ = 0, 'auto' rows per task, 4 partitions on a fresh 2-worker
LocalCluster). One fit of ``--budget`` seconds of updates per seed, ``refine=False``; every 30 s the
server's parameters are kept, and after the fit each is scored twice on the test rows: as the server left it,
and with q(w) re-made from every training row at its kernel (what ``refine`` does when a fit stops there;
:func:`daskgp.advgp.model.optimal_q` of the rows' summed statistics, here in this process, off the clock).
The two sides share the kernel, so each pair differs by q(w) alone: ``diff`` = refined − unrefined test RMSE
(minutes), and the −ELBO per training row of both (nats; standardised y). The first snapshot is the one after
the first update. Resumable by seed; writes ``benchmarks/results/advgp_refine.json``.
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
from _common import close_segment, load_results, write_results  # noqa: E402
from advgp_flights import _cluster, _refined, _rmse, _standardised  # noqa: E402
from ngd_peers import split  # noqa: E402

OUT = HERE / "results" / "advgp_refine.json"
EVERY = 30.0


def one(seed: int, budget: float) -> dict:
    import daskgp as dg
    from daskgp.advgp.model import negative_elbo
    from daskgp.compute.cluster import close_client

    Xtr, ytr, Xte, yte = split("flights", seed)
    client = _cluster()
    est = dg.ADVGPRegressor(n_inducing=100, max_iter=10**9, random_state=seed, refine=False)
    snaps, last = [], [-np.inf]

    def snap(event):
        t = time.perf_counter() - t0
        if t - last[0] >= EVERY:
            snaps.append((t, event.step, event.model))
            last[0] = t

    t0 = time.perf_counter()
    try:
        est.fit(Xtr, ytr, client=client, callback=snap, time_budget=budget)
    finally:
        close_client(client)
    snaps.append((time.perf_counter() - t0, est.n_iter_, est.params_))
    Xs, ys = _standardised(est, Xtr, ytr)
    points = []
    for t, version, p in snaps:
        t1 = time.perf_counter()
        q = _refined(p, Xs, ys)
        refine_seconds = time.perf_counter() - t1
        before, after = (_rmse(est._predict_block(Xte, params=x)[:, 0], yte) for x in (p, q))
        points.append({"seconds": t, "update": int(version), "rmse": before, "rmse_refined": after,
                       "diff": after - before, "neg_elbo_per_row": negative_elbo(Xs, ys, p) / len(ys),
                       "neg_elbo_per_row_refined": negative_elbo(Xs, ys, q) / len(ys),
                       "refine_seconds_here": refine_seconds})
        print(f"seed {seed} {t:6.1f} s update {version}: {before:.3f} -> {after:.3f}", flush=True)
    return {"points": points, "updates": est.n_iter_, "converged": bool(est.converged_),
            "batch_size": est.batch_size_}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget", type=float, default=150.0)
    ap.add_argument("--fresh", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    res = load_results(OUT, "advgp_refine", a.fresh)
    res.update(task="flights", m=100, budget=a.budget, every=EVERY, workers=2, threads_per_worker=1)
    t_start = time.time()
    try:
        for seed in a.seeds.split(","):
            if seed in res.setdefault("seeds", {}):
                continue
            res["seeds"][seed] = one(int(seed), a.budget)
            write_results(OUT, res)
        # after the first update (whose q(w) the kernel's first step leaves far off): every later snapshot
        diffs = np.array([pt["diff"] for s in res["seeds"].values() for pt in s["points"][1:]])
        gains = np.array([pt["neg_elbo_per_row"] - pt["neg_elbo_per_row_refined"]
                          for s in res["seeds"].values() for pt in s["points"]])
        res["summary"] = {"pairs": int(diffs.size), "refined_better": int((diffs < 0).sum()),
                          "diff_mean": float(diffs.mean()), "diff_sd": float(diffs.std(ddof=1)),
                          "diff_range": [float(diffs.min()), float(diffs.max())],
                          "neg_elbo_gain_per_row_min": float(gains.min())}
    finally:
        close_segment(OUT, res, t_start, seeds=a.seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
