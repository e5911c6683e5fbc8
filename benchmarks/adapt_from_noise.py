"""The adaptation length from the measured gradient noise (issue 33, item 3), side by side with the fixed one.

    python benchmarks/adapt_from_noise.py [--rows 3000] [--seeds 0,1] [--target-ess 200] [--cap 1500]

power_plant, ``--rows`` random rows, standardised: above EXACT_WARMUP_MAX_N, so that the warmup is the
stochastic ascent that measures the noise, and by default above LARGE_N (6,000), where SGHMC's large-n
gradient (CG, rank 2,000) is quiet enough for the rule to shorten the adaptation — at 3,000 rows (ULISSE,
rank 300) the warmup measured λ = 2.68, for which the rule gives 350 iterations and the cap's fifth 300: the
same run twice; the default sampler (SGHMC, 4 chains on 2 local workers) to
``--target-ess`` under a cap of ``--cap`` iterations per chain, twice per seed: the adaptation length of
the fixed rule (``n_adapt`` = min(400, cap/5), as before) and the one SGHMC takes from the gradient noise
the warmup measured at the mode (the default now). Same seed, same warmup: the runs differ from the
chains' start on. Per run: the adaptation length, the noise, the step, wall time (warmup included),
iterations per chain to the target, kept-draw iterations per effective sample, seconds per effective
sample, max R-hat, and each parameter's mean gap (in exact sd) and sd ratio against the exact posterior
(dense-Cholesky MAP and Laplace covariance, as ``fidelity.py``). ``ratio`` = median over seeds of
(seconds per ESS, noise rule) ÷ (seconds per ESS, fixed rule); ``target_met``: the noise rule is not
slower (ratio ≤ 1) and every run of it is within fidelity.py's tolerances (0.2 sd, ±15 %).
Results: benchmarks/results/adapt_from_noise.json, written after every run (a rerun skips the runs there);
each run is a zarr store under benchmarks/runs/, carried across sessions in benchmarks/carried/ (hours at
6,000 rows on 2 cores) and resumed where it stopped.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_results, resumable, sitting, write_results  # noqa: E402
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
    ap.add_argument("--rows", type=int, default=6000)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--target-ess", type=int, default=200)
    ap.add_argument("--cap", type=int, default=1500)
    ap.add_argument("--redo", action="store_true")
    args = ap.parse_args(argv)
    res = load_results(OUT, "adapt_from_noise", args.redo)
    X, y = rows(args.rows)
    refs = res.setdefault("references", {})
    if str(args.rows) not in refs:
        refs[str(args.rows)] = {"n": args.rows, **exact_reference(X, y)}
        write_results(OUT, res)

    import arviz as az

    import daskgp as dg
    from daskgp.compute.cluster import close_client, get_client

    client = get_client(n_workers=2)
    fixed = min(400, args.cap // 5)
    for seed in [int(s) for s in args.seeds.split(",")]:
        for rule in ("fixed", "noise"):
            key = f"rows{args.rows}_seed{seed}_{rule}"
            if key in res["cases"]:
                continue
            over = {"n_adapt": fixed} if rule == "fixed" else {}
            out = HERE / "runs" / f"adapt_from_noise_{args.rows}_{key}.zarr"
            hooks, finish = sitting(out)  # a run longer than a session continues from benchmarks/carried/
            if resumable(out):
                dt = dg.resume(str(out), X=X, y=y, client=client, **hooks)
            else:
                dt = dg.sample(X, y, out=str(out), client=client, seed=seed, n_iter=args.cap,
                               target_ess=args.target_ess, checkpoint_every=50, **over, **hooks)
            wall = finish()
            row = compare(dt, refs[str(args.rows)])
            cfg = dt.attrs["config"]
            row.update(segment_wall_s=wall, n_adapt=cfg["n_adapt"], adapt_from_noise=cfg["adapt_from_noise"],
                       noise_at_mode=dt.attrs["warmup"].get("noise_at_mode"),
                       iterations_per_chain=int(dt.attrs["n_draws"]),  # the warmup's included
                       max_rhat=float(az.rhat(np.log(dt["posterior"].to_dataset())).to_array().max()),
                       within_tolerance=bool(max(abs(v) for v in row["mean_gap_sd"]) <= 0.2
                                             and max(abs(v - 1) for v in row["sd_ratio"]) <= 0.15))
            res["cases"][key] = row
            write_results(OUT, res)
            print(key, {k: row[k] for k in ("n_adapt", "noise_at_mode", "seconds", "iterations_per_chain",
                                            "iterations_per_ess", "seconds_per_ess", "mean_gap_sd",
                                            "sd_ratio")}, flush=True)
    close_client(client)
    ratios = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        a = res["cases"].get(f"rows{args.rows}_seed{seed}_noise")
        b = res["cases"].get(f"rows{args.rows}_seed{seed}_fixed")
        if a and b:
            ratios.append(a["seconds_per_ess"] / b["seconds_per_ess"])
    noise_runs = [r for k, r in res["cases"].items()
                  if k.startswith(f"rows{args.rows}_") and k.endswith("_noise")]
    ratio = float(np.median(ratios)) if ratios else None
    met = bool(ratios and ratio <= 1 and all(r["within_tolerance"] for r in noise_runs))
    res = {"ratio": ratio, "target_met": met, **{k: v for k, v in res.items() if k not in ("ratio",
                                                                                          "target_met")}}
    res["ratios"] = ratios
    write_results(OUT, res)
    print({k: res[k] for k in ("ratio", "ratios", "target_met")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
