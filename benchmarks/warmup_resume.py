"""The price of a resumable warmup (issue 33, item 3): the default sampler's warmup on power_plant
(9,568 rows) committed every ``--every`` gradients against the same warmup in one segment, and the same
committed warmup stopped after a few segments and resumed — end points, seconds, and the gradient noise the
warmup measured.

    python benchmarks/warmup_resume.py [--data power_plant] [--seeds 0,1] [--every 10] [--rows N]

A local cluster of 2 single-threaded worker processes (this machine has 2 cores), through the public
``daskgp.mcmc.chains.sample`` / ``resume`` (2 chains, ``checkpoint_every`` iterations: the chains' cost is
not counted; the warmup's own seconds are its 'seconds' attribute and the wall time from the first warmup
event to 'done'). Per seed:

* ``whole``: ``checkpoint_every`` = 10⁶ (one segment: the warmup as it was before it checkpointed);
* ``committed``: ``checkpoint_every`` = ``--every`` (a task and a commit every ``--every`` gradients);
* ``resumed`` (first seed only): ``committed``, stopped (``RunControl.stop``) once 3 segments are
  committed, then ``resume`` — the wall time of both parts, and whether it ended at the same point.

Writes benchmarks/results/warmup_resume.json: ``ratio`` = median over seeds of committed ÷ whole warmup
seconds (the overhead of committing), ``target_met`` = ratio ≤ 1.10 and every end point bit-identical;
``noise_eig``: the largest whitened gradient-noise variance the ascents measured (the λ that sets SGHMC's
step), per seed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _run(X, y, client, out, seed, every, stop_after=None):
    """One run through sample(); returns (the run's warmup attribute, warmup wall seconds, events)."""
    from daskgp.mcmc.chains import resume, sample
    from daskgp.mcmc.control import RunControl, RunStopped
    from daskgp.mcmc.warmup import WarmupStore, warmup_path

    control, events, t = RunControl(), [], {}
    stopper = threading.Event()

    def on_warmup(ev):
        if not events or events[-1]["stage"] != ev["stage"]:
            print(f"  {ev['stage']} (k={ev['k']}, {ev.get('total', 0.0):.0f} s)", flush=True)
        events.append(dict(ev))
        t.setdefault("first", time.perf_counter())
        if ev["stage"] == "done":
            t["done"] = time.perf_counter()
        if stop_after and not stopper.is_set() and WarmupStore(warmup_path(out)).iterations() >= stop_after:
            stopper.set()
            threading.Thread(target=control.stop, daemon=True).start()

    opts = dict(n_chains=2, n_iter=every if every < 10**6 else 10, seed=seed, checkpoint_every=every)
    t0 = time.perf_counter()
    try:
        dt = sample(X, y, out=out, client=client, control=control, on_warmup=on_warmup, **opts)
        parts = None
    except RunStopped:
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        dt = resume(out, X=X, y=y, client=client, on_warmup=on_warmup)
        parts = {"until_stopped": first, "resumed": t["done"] - t1,
                 "committed_at_stop": stop_after}
    warm = dict(dt.attrs["warmup"])
    return warm, t["done"] - t["first"], parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="power_plant")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--rows", type=int, default=None, help="the first N rows only (a quick look)")
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    import daskgp as dg

    ds = dg.load(args.data)
    X, y = ds.X_std[: args.rows], ds.y_std[: args.rows]
    seeds = [int(s) for s in args.seeds.split(",")]
    scratch = tempfile.mkdtemp(prefix="daskgp-warmup-bench-")
    rows = []
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
                Client(lc) as client:
            for i, seed in enumerate(seeds):
                rec = {"seed": seed}
                for name, every, stop in [("whole", 10**6, None), ("committed", args.every, None)] + (
                        [("resumed", args.every, 3 * args.every)] if i == 0 else []):
                    out = os.path.join(scratch, f"{name}-{seed}.zarr")
                    warm, wall, parts = _run(X, y, client, out, seed, every, stop)
                    rec[name] = {"warmup_seconds": warm["seconds"], "wall_seconds": wall,
                                 "gradients": warm["gradients"], "ascent_gradients": warm["iterations"],
                                 "converged": warm["converged"], "noise_eig": warm.get("noise_eig"),
                                 "phi": warm["phi"], "sd": np.sqrt(np.diag(warm["cov"])).tolist(),
                                 "parts": parts}
                    print(name, seed, f"{warm['seconds']:.1f} s", warm["gradients"], "gradients",
                          f"λ={warm.get('noise_eig')}", flush=True)
                same = [rec[k]["phi"] == rec["whole"]["phi"] and rec[k]["sd"] == rec["whole"]["sd"]
                        for k in ("committed", "resumed") if k in rec]
                rec["identical"] = all(same)
                rec["overhead"] = rec["committed"]["warmup_seconds"] / rec["whole"]["warmup_seconds"]
                rows.append(rec)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ratio = float(np.median([r["overhead"] for r in rows]))
    result = {"ratio": ratio, "target_met": bool(ratio <= 1.10 and all(r["identical"] for r in rows)),
              "ratio_is": "committed / whole warmup seconds (median over seeds)",
              "data": args.data, "n": int(X.shape[0]), "every": args.every, "seeds": rows,
              "machine": {"cores": os.cpu_count(), "platform": platform.platform()},
              "workers": "LocalCluster, 2 processes x 1 thread"}
    path = HERE / "results" / "warmup_resume.json"
    from _common import write_results  # stamped with its provenance (benchmarks/claims.py)
    write_results(Path(path), result)
    print(json.dumps({k: result[k] for k in ("ratio", "target_met", "n", "every")}))
    print("wrote", path)


if __name__ == "__main__":
    main()
