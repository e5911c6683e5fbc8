"""ADVGP's rows per gradient task against time to accuracy (issue 58, item 5: defaults that scale): the
2013 NYC flights (10 % test, the split of ``daskgp sgpr``), m = 100, τ = 0, two workers and the estimator's
default partitions (two per worker), every other setting at its default; ``batch_size`` ∈ {whole
partition, 32,768, 8,192, 2,048, 'auto'} for ``--budget`` seconds each, over ``--seeds``.

Per (batch, seed): the test RMSE (minutes) every 10 s of wall time (predictions off the clock), updates,
seconds per update; summarised at 30, 60 and 120 s as mean ± sd over seeds and, paired per seed, the
difference from the whole-partition gradient (the old default). Chooses nothing itself: the default rule
(:func:`daskgp.advgp.estimator.auto_batch_size`) is read from it in the docs.

    python benchmarks/advgp_batch.py [--budget 120] [--seeds 0,1] [--batches none,32768,8192,2048,auto]

Resumable: each (batch, seed) is written to benchmarks/results/advgp_batch.json when it finishes.
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
from _common import load_results, value_at, write_results  # noqa: E402

OUT = HERE / "results" / "advgp_batch.json"
TIMES = (30.0, 60.0, 120.0)


def summarise(res: dict) -> dict:
    cases = res["cases"]
    out = {}
    for t in TIMES:
        row = {}
        for b, per in cases.items():
            if not per:
                continue
            seeds = sorted(per)
            v = np.array([value_at(per[s]["curve"], t, 2) for s in seeds])
            row[b] = {"seeds": seeds, "rmse": [float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else None]}
            base = cases.get("none", {})
            both = [s for s in seeds if s in base]
            if b != "none" and both:
                d = np.array([value_at(per[s]["curve"], t, 2) - value_at(base[s]["curve"], t, 2)
                              for s in both])
                row[b]["minus_whole"] = [float(d.mean()), float(d.std(ddof=1)) if len(d) > 1 else None]
        out[f"{t:g}s"] = row
    res["at"] = out
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--batches", default="none,32768,8192,2048,auto")
    ap.add_argument("--fresh", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    from advgp_flights import _advgp, _cluster

    import daskgp
    from daskgp.compute.cluster import close_client
    from daskgp.datasets import train_test

    res = load_results(OUT, "advgp_batch", a.fresh)
    res.update(m=100, tau=0, budget=a.budget, daskgp=daskgp.__version__)
    t0 = time.time()
    try:
        for seed in [int(s) for s in a.seeds.split(",")]:
            data = train_test(daskgp.load("flights"), test_fraction=0.1, seed=seed)
            for b in a.batches.split(","):
                per = res["cases"].setdefault(b, {})
                if str(seed) in per:
                    continue
                batch = None if b == "none" else (b if b == "auto" else int(b))
                client = _cluster()
                try:
                    r = _advgp(client, data, 100, 0, a.budget, batch, None, 10.0, seed=seed, tol=None)
                finally:
                    close_client(client)
                r.pop("objective", None)
                per[str(seed)] = r
                print(f"batch {b} seed {seed}: {r['updates']} updates, {r['seconds_per_update']:.3f} s each, "
                      f"RMSE {r['final_rmse']:.3f}", flush=True)
                summarise(res)
                write_results(OUT, res)
    finally:
        res.setdefault("segments", []).append({"wall_seconds": time.time() - t0, "seeds": a.seeds,
                                               "batches": a.batches})
        summarise(res)
        write_results(OUT, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
