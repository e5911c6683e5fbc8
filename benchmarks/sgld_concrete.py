"""The paper's concrete experiment: SGLD with ULISSE gradients against exact Metropolis–Hastings.

    python benchmarks/sgld_concrete.py [--sgld-iter 20000] [--mh-iter 8000] [--chains 4] [--workers 2]

concrete (n = 1,030, standardised), isotropic RBF + noise, Gamma(2, 1) priors, both samplers with the library
defaults on a 2-worker LocalCluster, one after the other in this run:
  * MH: adaptive random-walk on the exact Cholesky posterior (adaptation over the first fifth), 4 chains;
  * SGLD: 4 chains, N_r = 4 probes redrawn every 20 iterations, ULISSE, step 0.1 → 1e-3 frozen by the
    paper's rule (threshold 0.01, batches of 100), rank-100 pivoted-Cholesky preconditioner.
Posterior mean and sd per parameter from the post-warmup draws (SGLD: after every chain froze), max R-hat,
bulk ESS and wall seconds per effective sample, all by ArviZ. Target: every SGLD mean within 0.3 MH posterior
sd of MH's and every SGLD sd within ±30 % of MH's. Writes benchmarks/results/sgld_concrete.json with
``ratio`` = max |mean_SGLD − mean_MH| / sd_MH and ``target_met``; the runs stay in benchmarks/runs/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from _common import start  # benchmarks/ is on sys.path when run as a script

HERE = Path(__file__).resolve().parent


def _table(tab, seconds):
    return {name: {"mean": float(r["mean"]), "sd": float(r["sd"]), "r_hat": float(r["r_hat"]),
                   "ess_bulk": float(r["ess_bulk"]), "ess_tail": float(r["ess_tail"]),
                   "sec_per_ess": float(r["sec_per_ess"])} for name, r in tab.iterrows()} | {
        "_seconds": seconds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sgld-iter", type=int, default=20_000)
    ap.add_argument("--mh-iter", type=int, default=8_000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resume", action="store_true", help="continue the runs in benchmarks/runs/")
    args = ap.parse_args(argv)
    import daskgp
    from daskgp.compute.cluster import close_client
    from daskgp.mcmc.chains import resume, sample
    from daskgp.mcmc.diagnostics import run_summary

    ds, runs, client = start("concrete", args.workers)
    out = {}
    try:
        for method, n_iter, every in (("mh", args.mh_iter, 500), ("sgld", args.sgld_iter, 500)):
            path = str(runs / f"concrete_{method}.zarr")
            t0 = time.perf_counter()

            def progress(done, N, rhat, msgs, method=method, t0=t0):
                r = None if rhat is None else round(rhat, 3)
                print(f"  {method}: {min(done)}/{N} per chain, R-hat {r}, {time.perf_counter() - t0:.0f} s",
                      flush=True)

            if args.resume and Path(path).exists():
                dt = resume(path, X=ds.X, y=ds.y, client=client, progress=progress)
            else:
                dt = sample(ds.X, ds.y, out=path, overwrite=True, client=client, method=method,
                            n_chains=args.chains, n_iter=n_iter, checkpoint_every=every, seed=args.seed,
                            data_spec={"dataset": "concrete"}, progress=progress)
            tab, notes = run_summary(dt)
            print(method, "\n", tab, "\n", notes, flush=True)
            out[method] = _table(tab, dt.attrs["elapsed"]) | {"_notes": notes}
            if method == "sgld":
                st = dt["sample_stats"].to_dataset()
                out[method]["_frozen_step"] = [float(s[-1]) for s in st["step"].values]
                out[method]["_freeze_iteration"] = [int(np.argmax(f)) for f in st["frozen"].values]
                out[method]["_cg_iterations_mean"] = float(np.nanmean(st["cg_iterations"].values))
                out[method]["_sec_per_iteration_mean"] = float(np.nanmean(st["seconds"].values))
            else:
                st = dt["sample_stats"].to_dataset()
                out[method]["_acceptance_after_adaptation"] = float(
                    st["accepted"].values[:, dt.attrs["config"]["n_iter"] // 5:].mean())
    finally:
        close_client(client)
    names = [k for k in out["mh"] if not k.startswith("_")]
    comp = {}
    for nm in names:
        m, s = out["mh"][nm], out["sgld"][nm]
        comp[nm] = {"mean_diff_over_sd_mh": abs(s["mean"] - m["mean"]) / m["sd"],
                    "sd_ratio": s["sd"] / m["sd"]}
    ratio = max(c["mean_diff_over_sd_mh"] for c in comp.values())
    sd_ratios = [c["sd_ratio"] for c in comp.values()]
    target = ratio <= 0.3 and all(0.7 <= r <= 1.3 for r in sd_ratios)
    result = {"ratio": ratio, "target_met": bool(target),
              "target": "every |mean_SGLD - mean_MH| <= 0.3 sd_MH and every sd_SGLD/sd_MH in [0.7, 1.3]",
              "comparison": comp, "mh": out["mh"], "sgld": out["sgld"],
              "settings": vars(args), "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                                                   "platform": platform.platform()},
              "daskgp_version": daskgp.__version__, "date": time.strftime("%Y-%m-%d %H:%M")}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "sgld_concrete.json").write_text(json.dumps(result, indent=2, default=float))
    print(json.dumps({"ratio": ratio, "sd_ratios": sd_ratios, "target_met": target}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
