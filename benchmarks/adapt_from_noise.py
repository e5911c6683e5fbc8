"""The adaptation length from the measured gradient noise (issue 33, item 3), side by side with the fixed one.

    python benchmarks/adapt_from_noise.py [--rows 3000] [--seeds 0,1] [--target-ess 200] [--cap 1500]

power_plant, ``--rows`` random rows (above EXACT_WARMUP_MAX_N, so the warmup is the stochastic ascent that
measures the noise), standardised; the default sampler (SGHMC, 4 chains on 2 local workers) to
``--target-ess`` under a cap of ``--cap`` iterations per chain, twice per seed: the adaptation length of
the fixed rule (``n_adapt`` = min(400, cap/5), as before) and the one SGHMC takes from the gradient noise
the warmup measured at the mode (the default now). Same seed, same warmup: the runs differ from the
chains' start on. Per run: the adaptation length, the noise, the step, wall time (warmup included),
iterations per chain to the target, kept-draw iterations per effective sample, seconds per effective
sample, max R-hat, and each parameter's mean gap (in exact sd) and sd ratio against the exact posterior
(dense-Cholesky MAP and Laplace covariance, as ``fidelity.py``). ``ratio`` = median over seeds of
(seconds per ESS, noise rule) ÷ (seconds per ESS, fixed rule); ``target_met``: the noise rule is not
slower (ratio ≤ 1) and every run of it is within fidelity.py's tolerances (0.2 sd, ±15 %).
Results: benchmarks/results/adapt_from_noise.json, written after every run (a rerun skips the runs there).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_results, write_results  # noqa: E402
from fidelity import compare, exact_reference  # noqa: E402

OUT = HERE / "results" / "adapt_from_noise.json"


def rows(n: int):
    os.environ.setdefault("DASKGP_DATA", str(HERE.parents[0].parent / "shared" / "data"))
    import daskgp as dg

    ds = dg.load("power_plant")
    idx = np.random.default_rng(0).choice(ds.n, n, replace=False)
    X, y = ds.X_std[idx], ds.y_std[idx]
    return (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--target-ess", type=int, default=200)
    ap.add_argument("--cap", type=int, default=1500)
    ap.add_argument("--redo", action="store_true")
    args = ap.parse_args(argv)
    res = load_results(OUT, "adapt_from_noise", args.redo)
    X, y = rows(args.rows)
    if "reference" not in res or res["reference"].get("n") != args.rows:
        res["reference"] = {"n": args.rows, **exact_reference(X, y)}
        write_results(OUT, res)

    import arviz as az

    import daskgp as dg
    from daskgp.compute.cluster import get_client

    client = get_client(n_workers=2)
    fixed = min(400, args.cap // 5)
    for seed in [int(s) for s in args.seeds.split(",")]:
        for rule in ("fixed", "noise"):
            key = f"seed{seed}_{rule}"
            if key in res["cases"]:
                continue
            over = {"n_adapt": fixed} if rule == "fixed" else {}
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                dt = dg.sample(X, y, out=f"{tmp}/r.zarr", client=client, seed=seed, n_iter=args.cap,
                               target_ess=args.target_ess, **over)
                wall = time.perf_counter() - t0
            row = compare(dt, res["reference"])
            cfg = dt.attrs["config"]
            row.update(wall_s=wall, n_adapt=cfg["n_adapt"], adapt_from_noise=cfg["adapt_from_noise"],
                       noise_at_mode=dt.attrs["warmup"].get("noise_at_mode"),
                       iterations_per_chain=int(dt.attrs["n_draws"]),  # the warmup's included
                       max_rhat=float(az.rhat(np.log(dt["posterior"].to_dataset())).to_array().max()),
                       within_tolerance=bool(max(abs(v) for v in row["mean_gap_sd"]) <= 0.2
                                             and max(abs(v - 1) for v in row["sd_ratio"]) <= 0.15))
            res["cases"][key] = row
            write_results(OUT, res)
            print(key, {k: row[k] for k in ("n_adapt", "noise_at_mode", "wall_s", "iterations_per_chain",
                                            "iterations_per_ess", "seconds_per_ess", "mean_gap_sd",
                                            "sd_ratio")}, flush=True)
    client.close()
    ratios = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        a, b = res["cases"].get(f"seed{seed}_noise"), res["cases"].get(f"seed{seed}_fixed")
        if a and b:
            ratios.append(a["seconds_per_ess"] / b["seconds_per_ess"])
    noise_runs = [r for k, r in res["cases"].items() if k.endswith("_noise")]
    res["ratio"] = float(np.median(ratios)) if ratios else None
    res["ratios"] = ratios
    res["target_met"] = bool(ratios and res["ratio"] <= 1 and all(r["within_tolerance"] for r in noise_runs))
    write_results(OUT, res)
    print({k: res[k] for k in ("ratio", "ratios", "target_met")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
