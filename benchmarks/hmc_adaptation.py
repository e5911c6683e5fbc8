"""How long must HMC adapt when it starts at the exact MAP in the exact Laplace covariance? (issue 55, item 5:
the README's ``make demo`` — concrete to ESS 400, R-hat < 1.01 — in ≤ 60 s on 2 cores)

    python benchmarks/hmc_adaptation.py [--cases concrete,power1k] [--adapt 150,50] [--seeds 0,1,2]

HMC's accept step makes its kept draws exact for any step and metric, so the adaptation's length decides
only how fast a run reaches its target, not whether its draws are right. Per case (fidelity.py's
``case_data``) and seed, ``daskgp.sample(..., method='hmc', n_chains=4, target_ess=400, n_adapt=K)`` runs
for each adaptation length K on its own 2-worker local cluster of one thread per worker (as
small_n_crossover.py: the cluster's start left out). Per run: wall seconds to the target, ESS, R-hat, and
what the adaptation settled on (the kept draws' acceptance rate, step and leapfrog steps). Per case and K:
the wall-time ratio against the first K listed (the library's default), paired by seed, its geometric mean
and the standard error of its log over seeds; and every run's posterior means apart from the default's in
their pooled sd (the same posterior). ``ratio`` (top level): the largest case's geometric-mean wall-time
ratio for the shortest K. Resumable per (case, K, seed): results/hmc_adaptation.json after every run.

``--variant NAME`` measures a change to the code against the same baseline: its results go to
results/hmc_adaptation_NAME.json, which starts from the baseline length's runs in hmc_adaptation.json (a
run is deterministic given its seed, so only the machine's noise differs between the two files). The
step-only adaptation (``METRIC_WINDOWS_MIN_ADAPT``) was measured so, as ``--variant steponly``.
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
from _common import close_segment, load_results, paired_by_seed, write_results  # noqa: E402

OUT = HERE / "results" / "hmc_adaptation.json"


def summarise(rec: dict, lengths: list[int]) -> None:
    """Paired wall-time ratios of each adaptation length against the first (the default), by seed."""
    rec["paired"] = {}
    for K in lengths[1:]:
        p = paired_by_seed(rec["runs"], str(K), str(lengths[0]))
        if p is not None:
            rec["paired"][str(K)] = {
                "seeds": p["seeds"], "wall_ratio": p["ratios"],
                "geometric_mean_wall_ratio": p["geometric_mean"],
                "se_of_log_wall_ratio": p["se_of_log"], "faster_every_seed": p["below_every_seed"],
                "mean_gap_in_pooled_sd": p["mean_gap_in_pooled_sd"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="concrete,power1k")
    ap.add_argument("--adapt", default="150,50")  # the first is the baseline every other is paired with
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--target-ess", type=int, default=400)
    ap.add_argument("--redo", action="store_true")
    ap.add_argument("--variant", default="",
                    help="a name: results to hmc_adaptation_<name>.json, the baseline's runs copied from OUT")
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    from fidelity import case_data
    from small_n_crossover import run_one

    lengths = [int(k) for k in a.adapt.split(",")]
    seeds = [int(s) for s in a.seeds.split(",")]
    out = OUT.with_name(f"hmc_adaptation_{a.variant}.json") if a.variant else OUT
    results = load_results(out, "hmc_adaptation", a.redo)
    if a.variant and not results["cases"] and OUT.exists():
        for name, rec in json.loads(OUT.read_text())["cases"].items():
            base = {k: v for k, v in rec["runs"].items() if k.startswith(f"{lengths[0]}/")}
            results["cases"][name] = {"n": rec["n"], "runs": base, "baseline_from": OUT.name}
    runs_dir = HERE / "runs"
    runs_dir.mkdir(exist_ok=True)
    started = time.time()
    try:
        for name in a.cases.split(","):
            X, y = case_data(name)
            rec = results["cases"].setdefault(name, {"n": len(y), "runs": {}})
            for seed in seeds:  # seed-major: a stopped benchmark leaves whole pairs
                for K in lengths:
                    key = f"{K}/{seed}"
                    if key in rec["runs"]:
                        continue
                    print(f"{name} (n={len(y)}): n_adapt {K}, seed {seed} …", flush=True)
                    rec["runs"][key] = run_one(X, y, "hmc", seed, a.target_ess,
                                               runs_dir / f"hmc_adaptation_{name}.zarr", n_adapt=K)
                    summarise(rec, lengths)
                    write_results(out, results)
                    shown = ("wall_seconds", "min_ess", "max_rhat", "kept_draws_per_chain", "kept_stats")
                    print(f"  {json.dumps({k: rec['runs'][key][k] for k in shown})}", flush=True)
        done = [(rec["n"], rec["paired"]) for rec in results["cases"].values() if rec.get("paired")]
        if done:
            n, paired = max(done, key=lambda t: t[0])
            shortest = str(min(int(k) for k in paired))
            results["ratio"] = paired[shortest]["geometric_mean_wall_ratio"]
            results["target"] = (f"n_adapt {shortest} reaches the target sooner than {lengths[0]} in every "
                                 "paired seed of every case")
            results["target_met"] = all(p[shortest]["faster_every_seed"] for _, p in done if shortest in p)
    finally:
        close_segment(out, results, started, cases=a.cases, adapt=a.adapt, seeds=a.seeds, variant=a.variant)
    print(json.dumps({k: results.get(k) for k in ("ratio", "target_met")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
