"""New rows for a fitted Bayesian GPLVM (Titsias & Lawrence 2010, section 4.1; Gal, van der Wilk &
Rasmussen 2014, the MNIST experiment): each row's q(x*) = N(μ*, diag S*) maximises the bound of the training
set plus that row on its observed output dimensions, with the training set's q(X) and global parameters
fixed (their statistics summed once, ``base``). The gain in the bound approximates log p(y* | Y), the
predictive mean at q(x*) fills the row's missing entries.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.optim import lbfgsb
from .bound import SuffStats, bound_and_grads, psi1_stat
from .chunks import local_objective
from .fit import SparsePosterior

__all__ = ["new_points"]


def new_points(Y, base: SuffStats, A_cols, post: SparsePosterior, n_iter: int, start: str = "predictive"):
    """For every row of Y (r, p) (NaN = missing): q(x*) maximising the bound of the training set plus
    this row on its observed columns. Returns (μ (r, q), S (r, q), gain (r,) nats, filled Y (r, p)).

    The bound is multimodal in x*, so each row's local search starts at an inducing input: the one where
    the fitted model's predictive density of the row's observed entries, times the latent prior N(0, I),
    is highest — one (r, m) matrix product for the block. (It was the bound itself at every inducing input,
    m bound evaluations per row; ``start="bound"`` still does that, for benchmarks/gplvm_scoring.py: on
    digits the new start scores 1.3–1.6× faster at the same accuracy, and the gains of 99 % of the rows are
    unchanged.) The bound without the row, F0, depends only on which columns are observed, so it is
    computed once per pattern."""
    theta = post.theta
    r, q = Y.shape[0], theta.Z.shape[1]
    mu, S = np.zeros((r, q)), np.zeros((r, q))
    gain, filled = np.zeros(r), Y.copy()
    observed = ~np.isnan(Y)
    Y0 = np.where(observed, Y, 0.0)
    mean_z, var_z = post.predict_block(theta.Z)  # (m, p), (m,): the predictive at each inducing input
    sq = (Y0**2).sum(axis=1)[:, None] - 2 * Y0 @ mean_z.T + observed.astype(float) @ (mean_z**2).T
    log_pred = -0.5 * (observed.sum(axis=1)[:, None] * np.log(2 * math.pi * var_z)[None, :] + sq / var_z)
    best = np.argmax(log_pred - 0.5 * np.sum(theta.Z**2, axis=1)[None, :], axis=1)  # (r,)
    F0s: dict[bytes, float] = {}
    for i in range(r):
        obs = observed[i]
        st = SuffStats(base.n, float(A_cols[obs].sum()), base.B, base.C[:, obs], base.D, base.KL)
        F0 = F0s.get(obs.tobytes())
        if F0 is None:
            F0 = F0s[obs.tobytes()] = bound_and_grads(st, theta, grads=False)
        fun = local_objective(Y[i, obs][None, :], st, theta, 1, q)
        if start == "bound":
            x0 = min((np.concatenate([z, np.full(q, math.log(0.05))]) for z in theta.Z),
                     key=lambda x: fun(x, grad=False))
        else:
            x0 = np.concatenate([theta.Z[best[i]], np.full(q, math.log(0.05))])  # small variance
        res = lbfgsb(fun, x0, bounds=[(None, None)] * q + [(-12.0, 3.0)] * q, max_iter=n_iter)
        mu[i], S[i] = res.x[:q], np.exp(res.x[q:])
        gain[i] = -res.fun - F0
        filled[i, ~obs] = (psi1_stat(mu[i:i + 1], S[i:i + 1], theta) @ post.a)[0, ~obs]
    return mu, S, gain, filled
