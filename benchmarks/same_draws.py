"""Issue 32's "behaviour kept" check for the sampler registry: the draws of every built-in sampler, at a base
git revision (checked out into a temporary worktree) and in this checkout, each in its own process on its own
2-worker LocalCluster — 300 concrete rows, 2 chains × 200 iterations (warmup and kept), seed 3. Equal
digests mean the refactor kept each sampler's arithmetic bit for bit, so its effective samples per second
can differ only by the driver's overhead. No time is recorded: this is an identity check, and the two runs
need not share a quiet machine. Writes benchmarks/results/same_draws.json.

    python benchmarks/same_draws.py [--base REV]
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
from _common import ROOT, base_worktree, head_revision, run_child, write_results  # noqa: E402

METHODS = ("sghmc", "sgld", "mh")
_CHILD = r"""
import hashlib, json, sys, tempfile
import numpy as np

def main():
    import daskgp
    from distributed import Client, LocalCluster
    c = daskgp.load("concrete")
    X, y = c.X_std[:300], c.y_std[:300]
    out = {"daskgp": daskgp.__file__}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            Client(cl) as client, tempfile.TemporaryDirectory() as tmp:
        for method in sys.argv[1].split(","):
            dt = daskgp.sample(X, y, out=f"{tmp}/{method}.zarr", client=client, method=method, n_chains=2,
                               n_iter=200, checkpoint_every=50, batch=50, subset_size=200, seed=3)
            h = hashlib.sha1()
            for g in ("warmup_posterior", "posterior"):
                for name in dt.attrs["param_names"]:
                    h.update(np.ascontiguousarray(dt[g][name].values).tobytes())
            out[method] = {"sha1": h.hexdigest()}
    print("RESULT " + json.dumps(out))

if __name__ == "__main__":
    main()
"""


def _run(tree: Path) -> dict:
    return run_child(tree, _CHILD, [",".join(METHODS)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="de4ca6f", help="the revision before the sampler registry")
    ap.add_argument("--out", default=str(HERE / "results" / "same_draws.json"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    with base_worktree(args.base) as base:
        before, after = _run(base), _run(ROOT)
    results = {"benchmark": "same_draws", "base": args.base, "head": head_revision(), "cpus": os.cpu_count(),
               "before": before, "after": after, "wall_s": time.perf_counter() - t0,
               "identical": {m: before[m]["sha1"] == after[m]["sha1"] for m in METHODS}}
    write_results(Path(args.out), results)
    print(json.dumps(results["identical"]))
    return 0 if all(results["identical"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
