"""Where ADVGP's kernel starts: the collapsed bound of a sample of the rows, maximised by L-BFGS-B.

Peng, Zhe & Qi (2017) start ADVGP's hyperparameters and inducing inputs by hand and leave everything to the
asynchronous first-order steps (section 5). Measured on a 10⁶–10⁸-row synthetic taxi table (nine inputs,
rush-hour peaks a few hours wide in one of them), those steps spent 1,500–2,400 updates on a plateau: from
the default start (every lengthscale √q in standardised units) the peaks are invisible, the hour's
lengthscale drifted only as gradient noise allowed, and the test RMSE stayed at the linear model's until
it crossed — at a time that varied from run to run (3 of 5 runs of 600 s crossed, 2 did not).

A standard remedy for stochastic variational fits is to start from hyperparameters fitted on a subset of
the rows. Here that is Titsias' collapsed bound F (the −L of :func:`daskgp.advgp.model.collapsed_objective`
at the optimal q(w)) of the rows the k-means start already draws
(:data:`daskgp.inducing.placement.SAMPLE_ROWS`, 2·10⁴), maximised by the same L-BFGS-B and box bounds as
SGPR's fit, Z included; ADVGP's updates then refine the kernel on all rows. The sample is the data itself
when n is below its size: the start is then the collapsed optimum and ADVGP's steps have only q(w)'s
distributed refinement left. Known weakness: 2·10⁴ rows may switch off an input whose effect is weak
(on the taxi table, the pickup coordinates: lengthscales near 3·10⁴) that all rows would keep, and Adam's
log-lengthscale steps bring it back only slowly; when the paper's start does cross its plateau it ended
about 1.5 % better there.
"""

from __future__ import annotations

import numpy as np

from ..compute.rows import aligned
from ..core.optim import lbfgsb
from ..inducing.features import vector_bounds
from .model import ADVGPParams, collapsed_objective

__all__ = ["INITS", "subset_start"]

# 'subset': the collapsed bound of the sample maximised first (the default); 'kmeans': the paper's start —
# Z at k-means centres, σ² = 1, every lengthscale √q, the noise at ``noise_init`` (standardised units)
INITS = ("subset", "kmeans")


def subset_start(X, y, p0: ADVGPParams, max_iter: int = 200) -> tuple[ADVGPParams, dict]:
    """(p, info): the kernel part of ``p0`` (Z, σ², l, σ²_n) moved to a maximum of the collapsed bound of the
    rows X (b, q), y (b,) (standardised units) by L-BFGS-B for at most ``max_iter`` iterations; q(w) is left
    as in ``p0`` (the caller sets it from all rows). ``info``: the bound at the start and the end per row
    (nats), iterations, evaluations, L-BFGS-B's message."""
    # aligned copies: the same rows from numpy or from a table's chunks give the same bits (compute.rows)
    X, y = aligned(np.asarray(X, dtype=np.float64)), aligned(np.asarray(y, dtype=np.float64))
    b = len(y)
    v0 = p0.to_vector()
    o = p0.n_kernel
    evaluations = [0]

    def fun(x):
        evaluations[0] += 1
        try:
            f, g = collapsed_objective(X, y, p0.with_vector(np.concatenate([x, v0[o:]])))
        except np.linalg.LinAlgError:
            return np.inf, np.zeros_like(x)  # L-BFGS-B backtracks from a non-PD step
        return f / b, g / b

    f0 = fun(v0[:o])[0]
    m, q = p0.Z.shape
    res = lbfgsb(fun, v0[:o], bounds=vector_bounds(m, q), max_iter=max_iter)
    # the bound at the point returned, evaluated again: after an abnormal line search scipy's res.fun can be
    # a trial point's value rather than res.x's (seen: 4e-8 relative apart), and the info must describe p
    f_end = fun(res.x)[0] if np.isfinite(res.fun) else np.inf
    x, f_end = (res.x, f_end) if np.isfinite(f_end) and f_end <= f0 else (v0[:o], f0)
    p = p0.with_vector(np.concatenate([x, v0[o:]]))
    return p, {"bound_per_row_start": -float(f0), "bound_per_row": -float(f_end),
               "iterations": int(res.nit), "evaluations": evaluations[0], "message": str(res.message),
               "rows": b}
