"""The 'map' warmup of a gradient sampler by the exact Cholesky MAP (up to ``EXACT_WARMUP_MAX_N`` rows)
against the stochastic ascent it replaced there (``warmup='ascent'``): wall seconds, and how far the
ascent's end point and Laplace sds are from the exact ones.

    python benchmarks/warmup_exact.py [--cases concrete,power_plant:2000] [--seeds 0,1]

A local cluster of 2 single-threaded worker processes (this machine has 2 cores), the public
``daskgp.mcmc.chains.sample`` with the default sampler (SGHMC) and every default but the warmup, 2 chains ×
10 iterations (the chains' cost is not counted: the warmup's seconds are its 'seconds' attribute, the
subset MAP both share excluded). The exact MAP and Laplace covariance are the reference: the ascent's end
point is reported in units of the exact Laplace sd, its sds as ratios to the exact ones.

Writes benchmarks/results/warmup_exact.json: ``ratio`` = median over cases and seeds of ascent ÷ exact
warmup seconds (how much faster the exact warmup is), ``target_met`` = ratio ≥ 1 (the exact warmup is the
cheaper one at every size it is used for).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import write_summary  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="concrete,power_plant:2000",
                    help="data sets, each optionally ':N' for N random rows")
    ap.add_argument("--seeds", default="0,1")
    args = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parents[1] / "shared" / "data"))
    from distributed import Client, LocalCluster

    import daskgp as dg
    from daskgp.mcmc.chains import sample
    from daskgp.mcmc.config import EXACT_WARMUP_MAX_N

    seeds = [int(s) for s in args.seeds.split(",")]
    scratch = tempfile.mkdtemp(prefix="daskgp-warmup-exact-")
    rows = []
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
                Client(lc) as client:
            for case in args.cases.split(","):
                name, _, n = case.partition(":")
                ds = dg.load(name)
                idx = (np.random.default_rng(0).choice(ds.n, int(n), replace=False) if n
                       else np.arange(ds.n))
                X, y = ds.X_std[idx], ds.y_std[idx]
                X, y = (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()
                assert X.shape[0] <= EXACT_WARMUP_MAX_N, (case, X.shape)
                for seed in seeds:
                    rec = {"case": case, "n": int(X.shape[0]), "seed": seed}
                    for warmup in ("map", "ascent"):
                        out = os.path.join(scratch, f"{name}-{seed}-{warmup}.zarr")
                        w = sample(X, y, out=out, client=client, n_chains=2, n_iter=10, checkpoint_every=10,
                                   seed=seed, warmup=warmup).attrs["warmup"]
                        rec[warmup] = {"seconds": w["seconds"], "phi": w["phi"],
                                       "sd": np.sqrt(np.diag(w["cov"])).tolist(),
                                       "gradients": w.get("gradients", 0), "cov_from": w["cov_from"]}
                    ex, asc = rec["map"], rec["ascent"]
                    rec["speedup"] = asc["seconds"] / ex["seconds"]
                    rec["ascent_gap_sd"] = ((np.array(asc["phi"]) - ex["phi"]) / ex["sd"]).tolist()
                    rec["ascent_sd_ratio"] = (np.array(asc["sd"]) / ex["sd"]).tolist()
                    print(case, seed, f"exact {ex['seconds']:.1f} s, ascent {asc['seconds']:.1f} s "
                          f"({asc['gradients']} gradients); gap (sd)",
                          np.round(rec["ascent_gap_sd"], 3), "sd ratio", np.round(rec["ascent_sd_ratio"], 3),
                          flush=True)
                    rows.append(rec)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ratio = float(np.median([r["speedup"] for r in rows]))
    result = {"ratio": ratio, "target_met": bool(ratio >= 1),
              "ratio_is": "ascent / exact warmup seconds (median over cases and seeds)",
              "exact_warmup_max_n": EXACT_WARMUP_MAX_N, "cases": rows,
              "workers": "LocalCluster, 2 processes x 1 thread"}
    write_summary("warmup_exact", result)


if __name__ == "__main__":
    main()
