"""Posterior predictive of a GP whose hyperparameters carry posterior uncertainty.

For each draw θ_s the GP predictive at x* is N(m_s, v_s) with m_s = k*ᵀK⁻¹y and v_s = k** − k*ᵀK⁻¹k* + σ²_s,
the solves done through the kernel operator (batched CG: y and every k* column share each pass; exact
Cholesky when asked). Over draws the predictive is the mixture (1/S) Σ_s N(m_s, v_s): its mean, variance and
central interval (quantiles of the mixture, found by bisection on its CDF).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import xarray as xr
from scipy.special import ndtr

from ..compute.operator import KernelOperator, dense_covariance
from ..compute.solvers import PivotedCholesky, cg
from ..compute.threads import SMALL_DENSE_N, blas_threads_for
from ..core.validation import check_X, check_y
from ..model.kernels import Kernel

__all__ = ["predictive", "mixture_quantiles"]


def mixture_quantiles(means, variances, q) -> np.ndarray:
    """Quantiles q (scalar) of equal-weight Gaussian mixtures: means, variances (S, m) → (m,)."""
    sd = np.sqrt(variances)
    lo = (means - 10 * sd).min(axis=0)
    hi = (means + 10 * sd).max(axis=0)
    for _ in range(80):  # bisection: the interval shrinks by 2^-80
        mid = 0.5 * (lo + hi)
        below = ndtr((mid - means) / sd).mean(axis=0) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def predictive(X, y, kernel: Kernel, log_draws, X_new, *, y_scaler=None, level: float = 0.95,
               exact: bool | None = None, tol: float = 1e-8, precond_rank: int = 200,
               client=None) -> xr.Dataset:
    """Mixture predictive at X_new (m, d) over posterior draws.

    X (n, d), y (n,): standardised training data; kernel: the kernel family (its parameters are replaced by
    each draw); log_draws (S, p): φ = log θ per draw, in the order kernel params..., noise.
    y_scaler: a fitted scikit-learn scaler to return the predictive in original units.
    exact: Cholesky per draw (default for n ≤ 5000) or CG through the operator.
    Returns a Dataset over ``point`` with mean, variance, sd, lower, upper (central ``level`` interval) and
    the per-draw means and variances (``draw_mean``, ``draw_var`` over (draw, point)).
    """
    X = check_X(X)
    y = check_y(y, X.shape[0])
    X_new = check_X(X_new, "X_new", min_rows=1)
    if X_new.shape[1] != X.shape[1]:
        raise ValueError(f"X_new has {X_new.shape[1]} columns, the training inputs {X.shape[1]}")
    draws = np.atleast_2d(np.asarray(log_draws, dtype=float))
    if draws.shape[1] != kernel.n_params + 1 or not np.all(np.isfinite(draws)):
        raise ValueError(f"log_draws must be finite, shape (S, {kernel.n_params + 1}), got {draws.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n, m = X.shape[0], X_new.shape[0]
    exact = n <= 5000 if exact is None else exact
    means, variances = np.empty((len(draws), m)), np.empty((len(draws), m))
    op = None if exact else KernelOperator(X, kernel, 1.0, client=client)
    with blas_threads_for(n if exact else n + SMALL_DENSE_N):  # CG's kernel blocks keep the default
        _per_draw(X, y, kernel, draws, X_new, exact, op, tol, precond_rank, means, variances)
    variances = np.maximum(variances, 1e-12)
    if y_scaler is not None:  # affine: y = μ + σ·z
        scale, shift = float(y_scaler.scale_[0]), float(y_scaler.mean_[0])
        means, variances = shift + scale * means, scale**2 * variances
    mean = means.mean(axis=0)
    var = (variances + means**2).mean(axis=0) - mean**2
    a = 0.5 * (1 - level)
    lower, upper = mixture_quantiles(means, variances, a), mixture_quantiles(means, variances, 1 - a)
    return xr.Dataset(
        {"mean": ("point", mean), "variance": ("point", var), "sd": ("point", np.sqrt(var)),
         "lower": ("point", lower), "upper": ("point", upper),
         "draw_mean": (("draw", "point"), means), "draw_var": (("draw", "point"), variances)},
        coords={"point": np.arange(m), "draw": np.arange(len(draws))}, attrs={"level": level})


def _per_draw(X, y, kernel, draws, X_new, exact, op, tol, precond_rank, means, variances) -> None:
    """Each draw's predictive mean and variance at X_new, written into ``means`` and ``variances`` (S, m)."""
    for s, phi in enumerate(draws):
        k = kernel.with_log_params(phi[:-1])
        noise = float(np.exp(phi[-1]))
        Ks = np.asarray(k(X, X_new))  # (n, m)
        if exact:
            c = scipy.linalg.cho_factor(dense_covariance(X, k, noise), lower=True)
            sol = scipy.linalg.cho_solve(c, np.column_stack([y, Ks]))
        else:
            at = op.with_log_params(phi)
            P = PivotedCholesky(at, rank=precond_rank)
            sol = cg(at, np.column_stack([y, Ks]), tol=tol, precond=P).x
        means[s] = Ks.T @ sol[:, 0]
        variances[s] = np.asarray(k.diag(X_new)) - np.einsum("ij,ij->j", Ks, sol[:, 1:]) + noise
