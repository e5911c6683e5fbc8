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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _common import write_results  # noqa: E402

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
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    env.setdefault("DASKGP_DATA", str(ROOT.parent / "shared" / "data"))
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(_CHILD)
    try:
        out = subprocess.run([sys.executable, f.name, ",".join(METHODS)], env=env, cwd=tempfile.gettempdir(),
                             capture_output=True, text=True, timeout=1800)
    finally:
        os.unlink(f.name)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode or not lines:
        raise RuntimeError(f"the run in {tree} failed:\n{out.stderr[-2000:]}")
    res = json.loads(lines[-1][7:])
    assert Path(res.pop("daskgp")).resolve().is_relative_to(tree.resolve()), "ran the wrong tree"
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="de4ca6f", help="the revision before the sampler registry")
    ap.add_argument("--out", default=str(HERE / "results" / "same_draws.json"))
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="daskgp-base-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base], check=True,
                   capture_output=True)
    t0 = time.perf_counter()
    try:
        before, after = _run(base), _run(ROOT)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    results = {"benchmark": "same_draws", "base": args.base, "head": head, "cpus": os.cpu_count(),
               "before": before, "after": after, "wall_s": time.perf_counter() - t0,
               "identical": {m: before[m]["sha1"] == after[m]["sha1"] for m in METHODS}}
    write_results(Path(args.out), results)
    print(json.dumps(results["identical"]))
    return 0 if all(results["identical"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
