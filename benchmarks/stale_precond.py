"""A kept preconditioner far from where the solves are, and the curvature's solves sharing one (issue 55,
item 3: the warmup's cost).

    python benchmarks/stale_precond.py

house_8L's 8,192-row subset (benchmarks/fidelity.py's 'house8k'), the warmup's own posterior (the default
SGHMC configuration for 8,192 rows: 'cg-ulisse', rank-2,000 pivoted Cholesky, 32 probes, float32 rows).
Points: the subset MAP a warmup starts from (``FAR``, lengthscale e^1.21), the exact mode (fidelity.json's
reference) and halfway between. Measured, side by side in one process:

* per point, the CG iterations and seconds of a gradient with the preconditioner built at the subset MAP
  and kept (as a warmup's ascent kept it for 20 gradients), against one built at the point; and the
  seconds of a rank-2,000 build;
* the curvature (``laplace_precision``, 32 probes, CG to 1e-7) at the mode with one preconditioner built at
  φ for its 2p + 1 solves, against one built per solve (the former route), and the sds of both.

CG iterations are deterministic; the seconds are ratios taken in one run (``ratio`` = the shared
curvature's seconds over the per-solve one's; ``target_met`` = it is below 1 and the sds agree to 1 %).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import write_summary  # noqa: E402

FAR = np.array([0.8947, 1.2131, -1.6060])  # the subset MAP of house8k's default run (seed 0)


def main() -> int:
    from fidelity import case_data

    from daskgp.exact.mode import laplace_precision
    from daskgp.exact.posterior import GPPosterior
    from daskgp.mcmc.config import SamplerConfig
    from daskgp.mcmc.segments import chain_operator, chain_posterior, release_operators

    X, y = case_data("house8k")
    ref = json.loads((HERE / "results" / "fidelity.json").read_text())["references"]["house8k"]
    mode = np.array(ref["phi"])
    cfg = SamplerConfig(method="sghmc", seed=0).for_rows(len(y))
    cfg = cfg.for_start(len(y), mode, np.array(ref["cov"]))[0]
    op = chain_operator(X, cfg, "stale-precond", None, None, "warmup")
    out = {"n": len(y), "rank": cfg.precond_rank_for(len(y)), "points": {}}
    try:
        for label, at in (("halfway", 0.5 * (FAR + mode)), ("mode", mode)):
            row = {}
            for built, where in (("at the subset MAP", FAR), ("at the point", at)):
                post = chain_posterior(op, y, cfg, redraw_every=1)
                post.precond_every = 10**6  # kept, as far as the rule lets it
                post.stochastic_grad(where, 0)
                post.state.precond_iters = None  # the rule off: measure the kept one itself
                t = time.perf_counter()
                _, info = post.stochastic_grad(at, 1)
                row[built] = {"seconds": time.perf_counter() - t, "cg_iterations": info["cg_iterations"],
                              "solve_retries": info["solve_retries"]}
            out["points"][label] = row
            print(label, json.dumps(row), flush=True)
        post = chain_posterior(op, y, cfg, redraw_every=1)
        t = time.perf_counter()
        post.preconditioner_at(mode)
        out["build_seconds"] = time.perf_counter() - t
        post.stochastic_grad(mode, 0)
        curv = {}
        for how in ("shared", "per solve"):
            if how == "per solve":
                # the former route, for the rest of this process: log_marginal_gradient builds its own
                del GPPosterior.preconditioner_at
            t = time.perf_counter()
            H = laplace_precision(post, mode, n_probes=32, rng=1)
            sd = np.sqrt(np.diag(np.linalg.inv(H)))
            curv[how] = {"seconds": time.perf_counter() - t, "sd": sd.tolist()}
            print(how, json.dumps(curv[how]), flush=True)
        out["curvature"] = curv
    finally:
        release_operators("stale-precond")
    sds = np.array(curv["shared"]["sd"]) / np.array(curv["per solve"]["sd"])
    out["ratio"] = curv["shared"]["seconds"] / curv["per solve"]["seconds"]
    out["target_met"] = bool(out["ratio"] < 1 and np.all(np.abs(sds - 1) < 0.01))
    write_summary("stale_precond", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
