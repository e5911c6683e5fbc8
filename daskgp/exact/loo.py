"""Pointwise leave-one-out log predictive densities of a GP, for ArviZ's ``log_likelihood`` group.

A GP's observations are not conditionally independent given θ, so the log-likelihood does not split into
per-observation terms. What PSIS-LOO needs for such a model is log p(y_i | y_−i, θ) for every draw θ_s
(Bürkner, Gabry & Vehtari 2021, "Efficient leave-one-out cross-validation for Bayesian non-factorized normal
and Student-t models", eq. 8; Sundararajan & Keerthi 2001): with C = K_θ⁻¹ (K_θ the covariance of y, noise
included) and g = C y,

    y_i | y_−i, θ ~ N(y_i − g_i / C_ii, 1 / C_ii),   log p = −½ log 2π + ½ log C_ii − ½ g_i² / C_ii.

``az.loo`` over these values (importance-sampled across θ) estimates the model's expected log predictive
density. C's diagonal needs a dense factorisation, O(n³) per draw: this is for n ≤ ``MAX_LOO_N``.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from ..compute.operator import dense_covariance
from ..compute.threads import blas_threads_for
from ..core.validation import check_X, check_y
from ..model.kernels import Kernel

__all__ = ["loo_log_density", "MAX_LOO_N"]

MAX_LOO_N = 5000  # a 5,000² Cholesky and inverse take seconds; the draws multiply it


def loo_log_density(X, y, kernel: Kernel, log_draws, y_scale: float = 1.0) -> np.ndarray:
    """(S, n) log p(y_i | y_−i, θ_s) in nats, for y in its original units (y = shift + ``y_scale`` · the
    standardised y given here: the Jacobian −log y_scale is included).

    X (n, d), y (n,): standardised training data; log_draws (S, p): log θ per draw, kernel parameters then
    the noise variance (the order of :func:`daskgp.exact.predict.predictive`)."""
    X = check_X(X)
    y = check_y(y, X.shape[0])
    n = X.shape[0]
    if n > MAX_LOO_N:
        raise ValueError(f"leave-one-out densities need the diagonal of K^-1, a dense O(n^3) factorisation "
                         f"per draw: n={n} is more than {MAX_LOO_N}")
    draws = np.atleast_2d(np.asarray(log_draws, dtype=float))
    if draws.shape[1] != kernel.n_params + 1 or not np.all(np.isfinite(draws)):
        raise ValueError(f"log_draws must be finite, shape (S, {kernel.n_params + 1}), got {draws.shape}")
    if not y_scale > 0:
        raise ValueError(f"y_scale must be > 0, got {y_scale}")
    out = np.empty((len(draws), n))
    with blas_threads_for(n):
        for s, phi in enumerate(draws):
            K = dense_covariance(X, kernel.with_log_params(phi[:-1]), float(np.exp(phi[-1])))
            L = scipy.linalg.cholesky(K, lower=True)
            Linv = scipy.linalg.solve_triangular(L, np.eye(n), lower=True)
            c_diag = np.einsum("ij,ij->j", Linv, Linv)  # diag(K⁻¹) = column sums of (L⁻¹)²
            g = scipy.linalg.cho_solve((L, True), y)
            out[s] = -0.5 * math.log(2 * math.pi) + 0.5 * np.log(c_diag) - 0.5 * g**2 / c_diag
    return out - math.log(y_scale)
