"""Hutchinson against Hutch++ for the trace terms of the GP gradient, ½ tr(K⁻¹ ∂ⱼK), on concrete.

    python benchmarks/trace_estimators.py [--repeats 400] [--budget 32]

Dense and exact (n = 1,030): K and every A_j = K⁻¹ ∂ⱼK at the exact MAP (isotropic RBF + noise, Gamma(2, 1)
priors). Per parameter, the sd over ``--repeats`` draws of
  * Hutchinson with ``budget`` Rademacher probes: the gradient's estimator, where one solve K⁻¹z serves every
    parameter;
  * Hutch++ (Meyer, Musco, Musco & Woodruff 2021) with ``budget`` products A_j v per parameter (a third to
    sketch Q = orth(A_j S), whose trace Qᵀ A_j Q is then exact, the rest Hutchinson on the deflated
    remainder): it needs A_j S per parameter, so p × ``budget`` solves;
  * Hutch++ with ``budget`` // p products per parameter: the same solves as Hutchinson.
Also the leading |eigenvalues| of each A_j (Hutch++ gains only where a few dominate). Writes
benchmarks/results/trace_estimators.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def hutchinson(A, m, rng):
    Z = rng.choice([-1.0, 1.0], size=(A.shape[0], m))
    return float(np.einsum("ij,ij->", Z, A @ Z)) / m


def hutch_pp(A, m, rng):
    n, s = A.shape[0], m // 3
    Q, _ = np.linalg.qr(A @ rng.choice([-1.0, 1.0], size=(n, s)))
    G = rng.choice([-1.0, 1.0], size=(n, m - 2 * s))
    G = G - Q @ (Q.T @ G)
    return float(np.trace(Q.T @ A @ Q) + np.einsum("ij,ij->", G, A @ G) / G.shape[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=400)
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    os.environ.setdefault("DASKGP_DATA", str(HERE.parents[0].parent / "shared" / "data"))
    import daskgp
    from daskgp.core.priors import GammaPrior
    from daskgp.exact.posterior import subset_map
    from daskgp.model.kernels import make_kernel

    ds = daskgp.load("concrete")
    X, y = ds.X_std, ds.y_std
    kernel, prior = make_kernel("rbf"), GammaPrior(2.0, 1.0)
    phi, cov = subset_map(X, y, kernel, 0.3, prior=prior, size=len(y), rng=args.seed)
    k = kernel.with_log_params(phi[:-1])
    s2, n = float(np.exp(phi[-1])), len(y)
    K = np.asarray(k(X, X)) + s2 * np.eye(n)
    dK = [np.asarray(g) for g in k.gradients(X)] + [s2 * np.eye(n)]
    names = kernel.param_names + ["noise"]
    p = len(names)
    rng = np.random.default_rng(args.seed)
    out = {}
    for nm, d in zip(names, dK, strict=True):
        A = np.linalg.solve(K, d)
        A = 0.5 * (A + A.T)  # the quadratic forms zᵀAz see only the symmetric part
        ev = np.sort(np.abs(np.linalg.eigvalsh(A)))[::-1]
        est = {"hutchinson": [hutchinson(A, args.budget, rng) for _ in range(args.repeats)],
               "hutch++ (budget per parameter)": [hutch_pp(A, args.budget, rng) for _ in range(args.repeats)],
               "hutch++ (same solves)": [hutch_pp(A, args.budget // p, rng) for _ in range(args.repeats)]}
        out[nm] = {"trace": float(np.trace(A)), "top_abs_eigenvalues": ev[:8].tolist(),
                   "sd_half_trace": {kk: 0.5 * float(np.std(v)) for kk, v in est.items()},
                   "bias_half_trace": {kk: 0.5 * float(np.mean(v) - np.trace(A)) for kk, v in est.items()}}
        print(nm, json.dumps(out[nm]["sd_half_trace"]), flush=True)
    result = {"what": "sd of 1/2 tr(K^-1 dK_j) estimates on concrete at the exact MAP",
              "settings": vars(args), "params": out, "daskgp_version": daskgp.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M")}
    from _common import write_results  # stamped with its provenance (benchmarks/claims.py)
    write_results(Path(HERE / "results" / "trace_estimators.json"), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
