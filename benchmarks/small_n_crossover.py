"""Where the exact-gradient HMC stops beating SGHMC (issue 55, item 5): both samplers' library defaults, side
by side, end to end, over seeds, at growing n.

    python benchmarks/small_n_crossover.py [--cases concrete,house2k] [--seeds 0,1,2] [--target-ess 400]

Per case (benchmarks/fidelity.py's ``case_data``: a data set's rows or a seeded subset, standardised) and
seed, each of ``method='hmc'`` (leapfrog on the exact Cholesky gradient with an accept step) and
``method='sghmc'`` (the stochastic-gradient default) runs ``daskgp.sample`` to the target ESS (bulk and tail,
every parameter; R-hat < 1.01) with 4 chains on its own 2-worker local cluster of one thread per worker (the
cluster's start is left out of the wall time, which holds the warmup and the chains). Per run: wall seconds,
min ESS, max R-hat, seconds per ESS. Per seed, the paired ratios HMC ÷ SGHMC (the same data, seed and
machine state for both, one after the other) of the wall time to the target — matched accuracy: both stop
at the first committed block that meets it — and of seconds per ESS, which also credits a run for the ESS
it made past the target (SGHMC's blocks of 100 iterations overshoot 400 by up to half, HMC's of 25 less).
Per case: each ratio's geometric mean and the standard error of its log over seeds, and the two samplers'
posterior means apart in their pooled sd (they sample the same posterior). ``ratio`` (top level): the
largest size's worst geometric-mean wall-time ratio; ``crossover_rows``: the largest n at which every
paired seed's wall-time ratio, in every case of that size or smaller, is below 1 — what ``method='auto'``
may take as HMC's ``default_max_n``. ``--report`` only summarises the results file.

Resumable, within a run too: results/small_n_crossover.json after every run; a run stopped by SIGINT or
SIGTERM (at its next safe point: the committed draws kept) is carried in benchmarks/carried/ and continued
by the next invocation with ``daskgp.resume`` (a bimodal case, 2,000 power_plant rows, takes HMC about
40 minutes a seed: longer than a session for the whole case). Each run records its sittings (wall time,
draws per chain); its wall time is their sum.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import (  # noqa: E402
    carry_run,
    close_segment,
    discard_run,
    load_results,
    paired_by_seed,
    resumable,
    sitting,
    stop_on_signals,
    write_results,
)

OUT = HERE / "results" / "small_n_crossover.json"
METHODS = ("hmc", "sghmc")


def run_one(X, y, method: str, seed: int, target_ess: int, out: Path, segments: list, save, control,
            **options) -> dict | None:
    """One run to the target, in this sitting: started, or continued from what an earlier sitting committed
    (the run at ``out`` or its carried archive); its sitting appended to ``segments`` and ``save()``d as it
    goes. Returns the run's record, or None when ``control`` stopped it (kept on disk and carried)."""
    import arviz as az

    import daskgp as dg
    from daskgp.compute.cluster import close_client, get_client
    from daskgp.mcmc.control import RunStopped

    client = get_client(n_workers=2, threads_per_worker=1)
    hooks, finish = sitting(out, segments, save)  # after the cluster's start: its time is left out
    try:
        if resumable(out):
            dt = dg.resume(str(out), X=X, y=y, client=client, control=control, **hooks)
        else:
            dt = dg.sample(X, y, out=str(out), client=client, method=method, n_chains=4,
                           target_ess=target_ess, seed=seed, overwrite=True, control=control, **hooks,
                           **options)
    except RunStopped:
        return None
    finally:
        finish()
        save()
        close_client(client)  # its local cluster too: a run's idle workers would load the next run's cores
        carry_run(out)
    wall = sum(float(g["wall_s"]) for g in segments)
    post = dt["posterior"].to_dataset()
    names = list(dt.attrs["param_names"])
    bulk = [float(az.ess(post, method="bulk")[nm]) for nm in names]
    tail = [float(az.ess(post, method="tail")[nm]) for nm in names]
    ess = min(min(bulk), min(tail))
    logs = np.stack([np.log(post[nm].values).ravel() for nm in names], axis=-1)
    return {"wall_seconds": wall, "sittings": list(segments), "elapsed_attr": float(dt.attrs["elapsed"]),
            "min_ess": ess,
            "ess_bulk": bulk, "ess_tail": tail, "max_rhat": float(max(az.rhat(post)[nm] for nm in names)),
            "seconds_per_ess": wall / ess, "kept_draws_per_chain": int(post.sizes["draw"]),
            "warmup_draws": int(dt.attrs["warmup_draws"]), "mean_log": logs.mean(0).tolist(),
            "sd_log": logs.std(0, ddof=1).tolist(), "names": names,
            "checkpoint_every": int(dt.attrs["config"]["checkpoint_every"]),
            "n_adapt": int(dt.attrs["config"]["n_adapt"]), "kept_stats": kept_stats(dt)}


def kept_stats(dt) -> dict:
    """The kept draws' sampler statistics, means over chains and draws (what the adaptation settled on)."""
    if "sample_stats" not in dt:
        return {}
    st = dt["sample_stats"].to_dataset()
    return {k: float(st[k].astype(float).mean()) for k in ("accept_prob", "step", "n_leapfrog", "divergent")
            if k in st}


def summarise(rec: dict) -> None:
    walls = paired_by_seed(rec["runs"], "hmc", "sghmc")
    if walls is None:
        return
    per_ess = paired_by_seed(rec["runs"], "hmc", "sghmc", "seconds_per_ess")
    rec["paired"] = {"seeds": walls["seeds"],
                     "wall_ratio_hmc_over_sghmc": walls["ratios"],
                     "geometric_mean_wall_ratio": walls["geometric_mean"],
                     "se_of_log_wall_ratio": walls["se_of_log"],
                     "ratio_hmc_over_sghmc": per_ess["ratios"],
                     "geometric_mean_ratio": per_ess["geometric_mean"],
                     "se_of_log_ratio": per_ess["se_of_log"],
                     "hmc_wins_every_seed": walls["below_every_seed"],
                     "hmc_wins_every_seed_per_ess": per_ess["below_every_seed"],
                     "mean_gap_in_pooled_sd": walls["mean_gap_in_pooled_sd"]}


def _crossover_rows(done: list[dict]) -> int | None:
    """The largest n at which HMC won every paired seed of every case of that size or smaller, with ≥ 3
    seeds at that size: a case of the same size that HMC lost in any seed (a two-mode posterior beside a
    unimodal one) ends the search below it, since 'auto' cannot tell the two apart before it runs."""
    won = None
    for n in sorted({c["n"] for c in done}):
        at = [c for c in done if c["n"] == n]
        if not all(c["paired"]["hmc_wins_every_seed"] for c in at):
            break
        if all(len(c["paired"]["seeds"]) >= 3 for c in at):
            won = n
    return won


def _estimate(done: list[dict], won: int | None) -> float | None:
    """Where the geometric-mean wall-time ratio crosses 1 between the largest size HMC won and the next
    larger size (there, the worst of its cases), log-linear in n (HMC's gradient costs n³, SGHMC's n² per
    product): None without both."""
    above = sorted({c["n"] for c in done if won is not None and c["n"] > won})
    if won is None or not above:
        return None
    ra = max(math.log(c["paired"]["geometric_mean_wall_ratio"]) for c in done if c["n"] == won)
    rb = max(math.log(c["paired"]["geometric_mean_wall_ratio"]) for c in done if c["n"] == above[0])
    if rb <= 0:
        return None
    return float(math.exp(math.log(won) - ra / (rb - ra) * (math.log(above[0]) - math.log(won))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="concrete,house2k")  # run in this order; all are summarised
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--target-ess", type=int, default=400)
    ap.add_argument("--redo", action="store_true")
    ap.add_argument("--report", action="store_true", help="only summarise what the results file holds")
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    from fidelity import case_data

    results = load_results(OUT, "small_n_crossover", a.redo)
    seeds = [int(s) for s in a.seeds.split(",")]
    runs_dir = HERE / "runs"
    runs_dir.mkdir(exist_ok=True)
    started = time.time()
    control = stop_on_signals()  # SIGINT / SIGTERM: the run in flight stops at its next safe point, carried
    try:
        for name in ([] if a.report else a.cases.split(",")):
            X, y = case_data(name)
            rec = results["cases"].setdefault(name, {"n": len(y), "runs": {}})
            for seed in seeds:  # seed-major: a stopped benchmark leaves whole pairs
                for method in METHODS:
                    key = f"{method}/{seed}"
                    if key in rec["runs"] or control.stopped:
                        continue
                    print(f"{name} (n={len(y)}): {method}, seed {seed} …", flush=True)
                    out = runs_dir / f"crossover_{name}_{method}_{seed}.zarr"
                    # the sittings of a run not yet at its target (continued by the next invocation)
                    sittings = rec.setdefault("in_progress", {}).setdefault(key, [])
                    got = run_one(X, y, method, seed, a.target_ess, out, sittings,
                                  lambda: write_results(OUT, results), control)
                    if got is None:
                        print(f"  stopped after {sum(float(g['wall_s']) for g in sittings):.0f} s in "
                              f"{len(sittings)} sittings; carried, continued by the next invocation",
                              flush=True)
                        continue
                    rec["runs"][key] = got
                    del rec["in_progress"][key]
                    discard_run(out)  # recorded: nothing to carry on
                    summarise(rec)
                    write_results(OUT, results)
                    shown = ("wall_seconds", "min_ess", "max_rhat", "seconds_per_ess")
                    print(f"  {json.dumps({k: rec['runs'][key][k] for k in shown})}", flush=True)
        for rec in results["cases"].values():
            summarise(rec)
        done = sorted((c for c in results["cases"].values() if "paired" in c), key=lambda c: c["n"])
        if done:
            largest = [c for c in done if c["n"] == done[-1]["n"]]
            results["ratio"] = max(c["paired"]["geometric_mean_wall_ratio"] for c in largest)
            results["crossover_rows"] = _crossover_rows(done)
            results["target_met"] = results["crossover_rows"] is not None
            results["crossover_estimate_rows"] = _estimate(done, results["crossover_rows"])
            results["target"] = ("the largest n at which HMC reaches the target ESS and R-hat sooner than "
                                 "SGHMC in every one of >= 3 paired seeds of every case of that size or "
                                 "smaller: 'auto' runs HMC up to there")
    finally:
        if not a.report:
            close_segment(OUT, results, started, cases=a.cases, seeds=a.seeds)
        else:
            write_results(OUT, results, measured=False)
    print(json.dumps({k: results.get(k) for k in ("ratio", "crossover_rows", "target_met")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
