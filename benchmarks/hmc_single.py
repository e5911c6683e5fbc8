"""HMC's trajectories on the single-precision gradient against the double one (issue 55, items 1 and 5:
float32 arithmetic where the error allows; the README's ``make demo`` and the small-n path against NUTS).

    python benchmarks/hmc_single.py [--before REV] [--cases concrete,power1k] [--seeds 0,1,2] [--redo]

HMC's accept step reads the exact (double-precision) log density, so a trajectory may integrate any force that
depends on the position only and the kept draws stay exact (``daskgp.mcmc.samplers.hmc.HMC``); the force's
precision decides only the time per trajectory and the acceptance. "double": a git worktree of ``--before``
(the revision before the change: every leapfrog step a float64 gradient); "single": this checkout (the inner
steps on the float32 gradient where ``daskgp.exact.marginal.single_precision_ok`` allows it, the ends on the
float64 log density and gradient). Per case (fidelity.py's ``case_data``) and seed, each side runs
``daskgp.sample(..., method='hmc', n_chains=4, target_ess=400)`` — the library's defaults — in its own process
on its own 2-worker local cluster of one thread per worker (small_n_crossover.run_one: the cluster's start
left out), the two sides one after the other. Per run: wall seconds to the target (ESS 400 bulk and tail,
every parameter; R-hat < 1.01), ESS, R-hat and what the adaptation settled on (the kept draws' acceptance,
step and leapfrog steps). Per case: the paired wall-time ratios single ÷ double by seed, their geometric mean
and the standard error of its log (_common.paired_by_seed), and the two sides' posterior means apart in their
pooled sd (the same posterior). ``ratio`` (top level): the largest case's geometric mean. Resumable per (case,
side, seed): results/hmc_single.json after every run.
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
from _common import (  # noqa: E402
    ROOT,
    base_worktree,
    close_segment,
    load_results,
    paired_by_seed,
    run_child,
    write_results,
)

OUT = HERE / "results" / "hmc_single.json"
BEFORE = "4494d6c"  # main before the single-precision force

CHILD = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import daskgp
from fidelity import case_data
from small_n_crossover import run_one
from pathlib import Path

if __name__ == "__main__":
    name, seed, target, out = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
    X, y = case_data(name)
    res = run_one(X, y, "hmc", seed, target, out)
    print("RESULT " + json.dumps({**res, "daskgp": daskgp.__file__}))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--cases", default="concrete,power1k")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--target-ess", type=int, default=400)
    ap.add_argument("--redo", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(ROOT.parent / "shared" / "data"))
    from fidelity import case_data

    results = load_results(OUT, "hmc_single", a.redo)
    results["before"] = a.before
    seeds = [int(s) for s in a.seeds.split(",")]
    runs_dir = HERE / "runs"
    runs_dir.mkdir(exist_ok=True)
    started = time.time()
    try:
        with base_worktree(a.before) as before:
            for name in a.cases.split(","):
                rec = results["cases"].setdefault(name, {"n": len(case_data(name)[1]), "runs": {}})
                for seed in seeds:  # seed-major: a stopped benchmark leaves whole pairs
                    for side, tree in (("double", before), ("single", ROOT)):
                        key = f"{side}/{seed}"
                        if key in rec["runs"]:
                            continue
                        print(f"{name} (n={rec['n']}): {side}, seed {seed} …", flush=True)
                        out = runs_dir / f"hmc_single_{name}_{side}.zarr"
                        args = [str(HERE), name, str(seed), str(a.target_ess), str(out)]
                        rec["runs"][key] = run_child(tree, CHILD, args, single_threaded=False)
                        p = paired_by_seed(rec["runs"], "single", "double")
                        if p is not None:
                            rec["paired"] = p
                        write_results(OUT, results)
                        shown = ("wall_seconds", "min_ess", "max_rhat", "kept_stats")
                        print(f"  {json.dumps({k: rec['runs'][key][k] for k in shown})}", flush=True)
        done = [rec for rec in results["cases"].values() if rec.get("paired")]
        if done:
            results["ratio"] = max(done, key=lambda r: r["n"])["paired"]["geometric_mean"]
            results["target"] = "the single-precision force reaches the target sooner in every paired seed"
            results["target_met"] = all(r["paired"]["below_every_seed"] for r in done)
    finally:
        close_segment(OUT, results, started, cases=a.cases, seeds=a.seeds, before=a.before)
    print(json.dumps({k: results.get(k) for k in ("ratio", "target_met")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
