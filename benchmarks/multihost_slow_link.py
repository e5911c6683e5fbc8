"""ADVGP's staleness bound on a real slow link (issue 34 item 5): hosts as network namespaces on this
machine (tests/multihost/hosts.py: scheduler, two worker hosts, the client on a fourth), power_plant as 6
Parquet files on the shared file system (5 train: one partition each, spread over both worker hosts; 1 test,
1,595 rows), m = 40, Adam (the default), for the same wall budget with τ = 0 and τ = 8, each seed and link:
host w2's link rate-limited both ways by tc's token bucket ('none': unthrottled). Reports per case the
seconds per update, the updates, the largest staleness, and the time each τ took to reach fixed test RMSE
targets (None: never in the budget).

    sudo python benchmarks/multihost_slow_link.py [--seeds 0,1,2] [--rates 512kbit,none] [--budget 40]

Needs root (network namespaces). Writes benchmarks/results/multihost_slow_link.json after every case and
skips cases already there (--fresh: start again); each invocation's wall time is appended to 'segments'."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from _common import close_segment, load_results, time_to, write_results  # noqa: E402

OUT = HERE / "results" / "multihost_slow_link.json"
TARGETS = (4.20, 4.15, 4.13)  # MW; the mean predictor's RMSE on these rows is ≈ 17


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--rates", default="512kbit,none")
    ap.add_argument("--budget", type=float, default=40.0)
    ap.add_argument("--fresh", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    import numpy as np
    import pandas as pd

    import daskgp as dg
    from daskgp.compute.cluster import worker_environ
    from tests.multihost.hosts import Hosts, wait_for_workers

    res = load_results(OUT, "multihost_slow_link", a.fresh)
    res.update(budget=a.budget, m=40, optimizer="adam", taus=[0, 8], targets=list(TARGETS))
    env = os.environ.copy()
    env.update({k: str(v) for k, v in worker_environ().items()})
    t_start = time.time()
    try:
        with tempfile.TemporaryDirectory() as tmp, Hosts(["sched", "w1", "w2", "client"]) as h:
            ds = dg.load("power_plant")
            df = pd.DataFrame(np.column_stack([ds.X, ds.y]), columns=[*ds.feature_names, ds.target_name])
            folder = Path(tmp) / "plant.parquet"
            folder.mkdir()
            cuts = np.linspace(0, len(df), 7).astype(int)
            for i, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
                df.iloc[lo:hi].to_parquet(folder / f"part.{i}.parquet", index=False)
            h.start_scheduler(env)
            h.start_worker("w1", env)
            h.start_worker("w2", env)
            wait_for_workers(h, "client", 2, env)
            for rate in a.rates.split(","):
                for seed in (int(s) for s in a.seeds.split(",")):
                    key = f"{rate}/seed{seed}"
                    if key in res["cases"]:
                        continue
                    h.slow("w2", None if rate == "none" else rate)
                    out = Path(tmp) / "case.json"
                    try:
                        script = str(HERE.parent / "tests" / "multihost" / "slow_link.py")
                        argv = [script, str(out), "--parquet", str(folder), "--scheduler",
                                h.scheduler_address, "--budget", str(a.budget), "--seed", str(seed)]
                        r = h.python("client", argv, env=env)
                    finally:
                        h.slow("w2", None)
                    if r.returncode:
                        raise SystemExit(f"{key}: {r.stderr[-2000:]}")
                    case = json.loads(out.read_text())
                    for tau in ("0", "8"):
                        c = case[tau]
                        c["seconds_to_rmse"] = {str(t): time_to(c["curve"], t, 2) for t in TARGETS}
                        c["final_rmse"] = c["curve"][-1][2]
                    spu = [case[tau]["seconds_per_update"] for tau in ("0", "8")]
                    case["ratio_seconds_per_update"] = spu[0] / spu[1]
                    res["cases"][key] = case
                    write_results(OUT, res)
                    c0, c8 = case["0"], case["8"]
                    print(key, f"s/update τ=0 {c0['seconds_per_update']:.3f}, "
                          f"τ=8 {c8['seconds_per_update']:.3f}; "
                          f"final RMSE {c0['final_rmse']:.3f} / {c8['final_rmse']:.3f}; to 4.15: "
                          f"{c0['seconds_to_rmse']['4.15']} / {c8['seconds_to_rmse']['4.15']}", flush=True)
    finally:
        close_segment(OUT, res, t_start, rates=a.rates, seeds=a.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
