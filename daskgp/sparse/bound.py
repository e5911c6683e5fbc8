"""The collapsed variational bound of sparse GP regression and the Bayesian GPLVM in the map-reduce form of
Gal, van der Wilk & Rasmussen (2014), with its gradients.

Given the inducing inputs Z (m, q), Titsias' collapsed bound is a function of sums over data points, which
every chunk of rows computes on its own:

    A = Σ_i y_iᵀ y_i,   B = Σ_i ⟨K_ii⟩,   C = Σ_i ⟨K_mi⟩ y_iᵀ (m, p),   D = Σ_i ⟨K_mi K_im⟩ (m, m),
    KL = Σ_i KL(q(x_i) ‖ N(0, I)),

with expectations under q(x_i) = N(μ_i, diag S_i) (the psi-statistics of the RBF-ARD kernel, closed form).
For regression the inputs are observed (S_i = 0, KL = 0) and the expectations are plain kernel values. The
bound, eq. (4.3) of the paper, for p output dimensions and noise precision β, with P = K_mm + β·D:

    F = −np/2·log 2π + np/2·log β + p/2·log|K_mm| − p/2·log|P|
        − β/2·A + β²/2·tr(Cᵀ P⁻¹ C) − βp/2·B + βp/2·tr(K_mm⁻¹ D) − KL.

Gradients follow the paper's two maps: the centre turns the summed statistics into ∂F/∂(A, B, C, D) and the
direct K_mm part (:func:`bound_and_grads`); every chunk then turns those partial derivatives into its
contribution to ∂F/∂(Z, σ², l) (:func:`chunk_global_grad`) and, for latent inputs, into ∂F/∂(μ_i, S_i) of
its own rows (:func:`chunk_local_grad`). The distributed driver is :mod:`daskgp.sparse.chunks`.

Units: everything here is in the units the caller passes (the estimators standardise first). The observed-
input path is written against the arrays' own namespace (``array_api_compat``), so cupy chunks work (untested
here: no GPU); the psi-statistics of latent inputs (:mod:`daskgp.sparse.psi`) are numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from array_api_compat import array_namespace

from ..compute.backend import cho_solve, cholesky, diagonal, into, like, require_float64
from ..core.validation import check_X
from ..inducing.features import JITTER, GlobalParams, kmm, kmm_backprop
from ..inducing.stats import SuffStats, observed_grad, observed_stats
from ..model.kernels import RBF
from .psi import latent_grads, psi1_terms, psi_blocks

__all__ = ["SuffStats", "BoundGrads", "GlobalParams", "rbf_ard", "kmm", "psi1_stat", "chunk_stats",
           "chunk_stats_cached", "bound_and_grads", "collapsed_bound", "chunk_global_grad",
           "chunk_local_grad", "kl_gauss", "kmm_backprop"]


def rbf_ard(X1, X2, variance: float, lengthscales):
    """k(x, x′) = σ²·exp(−½ Σ_q (x_q − x′_q)²/l_q²): (n1, n2), in X1's array namespace — the foundation's
    :class:`daskgp.model.kernels.RBF` with one lengthscale per input dimension (the kernel of the
    psi-statistics below; other kernels go through :mod:`daskgp.inducing.features`)."""
    ls = np.asarray(lengthscales, dtype=np.float64) * np.ones(X1.shape[1])
    return RBF(variance=float(variance), lengthscale=ls, ard=True)(X1, X2)


def _require_rbf(theta: GlobalParams) -> None:
    if theta.kernel != "rbf":
        raise ValueError(f"latent inputs (the Bayesian GPLVM) need the RBF kernel: its psi-statistics are "
                         f"closed-form for it alone, got kernel={theta.kernel!r}")


def kl_gauss(mu, S) -> float:
    """Σ_i KL(N(μ_i, diag S_i) ‖ N(0, I)), nats."""
    return 0.5 * float(np.sum(S + mu**2 - 1.0 - np.log(S)))


def _as_2d(Y):
    return Y[:, None] if Y.ndim == 1 else Y


def psi1_stat(mu, S, theta: GlobalParams) -> np.ndarray:
    """ψ1 (b, m) = ⟨k(x_i, z_j)⟩ under q(x_i) = N(μ_i (b, q), diag S_i (b, q)): the expected kernel between
    latent inputs and the inducing inputs."""
    return psi1_terms(mu, S, theta.Z, theta.variance, theta.lengthscales)[0]


def chunk_stats(Y, theta: GlobalParams, mu=None, S=None) -> SuffStats:
    """Statistics of one chunk. Y (b, p) outputs; θ the global parameters (Z (m, q)); inputs either observed
    (``mu`` = X (b, q), S None) or latent with q(x_i) = N(mu_i, diag S_i), S (b, q) variances."""
    stats, _ = chunk_stats_cached(Y, theta, mu, S)
    return stats


def chunk_stats_cached(Y, theta: GlobalParams, mu, S=None):
    """:func:`chunk_stats` plus, for observed inputs, K_mn (m, b), kept on the worker so the gradient map
    need not recompute it (None for latent inputs)."""
    if S is None:  # observed inputs: in the chunk's namespace and on its device (the sums stay there)
        return observed_stats(Y, theta, mu)
    _require_rbf(theta)
    Y = _as_2d(Y)
    Z, variance, ls = theta.Z, theta.variance, theta.lengthscales
    m = Z.shape[0]
    if mu.shape[0] == 0:
        return SuffStats(0, 0.0, 0.0, np.zeros((m, Y.shape[1])), np.zeros((m, m))), None
    mu, S, Y = np.asarray(mu, float), np.asarray(S, float), np.asarray(Y, float)
    C, D = np.zeros((m, Y.shape[1])), np.zeros((m, m))
    for rows, psi1, _, _, psi2, _ in psi_blocks(mu, S, Z, variance, ls):
        C += psi1.T @ Y[rows]
        D += psi2.sum(axis=0)
    # nothing cached: the gradient needs ψ1's intermediate terms too and recomputes them block by block
    return (SuffStats(mu.shape[0], float(np.sum(Y * Y)), float(mu.shape[0] * variance), C, D,
                      kl_gauss(mu, S)), None)


@dataclass
class BoundGrads:
    """F and its partial derivatives: w.r.t. the statistics (GA, GB scalars, GC (m, p), GD (m, m)
    symmetric; ∂F/∂KL = −1) and the direct ones through K_mm and β (dZ (m, q), dvar, dls (q,), dbeta)."""

    F: float
    GB: float
    GC: np.ndarray
    GD: np.ndarray
    dZ: np.ndarray
    dvar: float
    dls: np.ndarray
    dbeta: float


def bound_and_grads(stats: SuffStats, theta: GlobalParams, grads: bool = True,
                    jitter: float = JITTER) -> BoundGrads | float:
    """Eq. (4.3) from the summed statistics at θ and, with ``grads``, its partial derivatives (see
    :class:`BoundGrads`); O(m³ + m²p) work, independent of n. ``jitter``: added to K_mm's diagonal,
    relative to σ² (0 for comparisons with libraries that add none)."""
    if not theta.noise > 0:
        raise ValueError(f"the noise variance must be > 0, got {theta.noise}")
    Z, variance, beta = theta.Z, theta.variance, theta.beta
    n, p = stats.n, stats.C.shape[1]
    D = stats.D
    xp = array_namespace(D)  # the centre computes where the summed statistics are (numpy, cupy, ...)
    require_float64(D, "the statistics", "the collapsed bound")
    C = into(stats.C, D)
    K0, Kmm = kmm(theta, jitter, ref=None if type(D) is np.ndarray else D)
    Lk = cholesky(Kmm)
    P = Kmm + beta * D
    Lp = cholesky(P)
    logdet_k, logdet_p = 2 * float(xp.sum(xp.log(diagonal(Lk)))), 2 * float(xp.sum(xp.log(diagonal(Lp))))
    PiC = cho_solve(Lp, C)  # P⁻¹C (m, p)
    KiD = cho_solve(Lk, D)
    CPC = float(xp.sum(C * PiC))
    tr_KiD = float(xp.sum(diagonal(KiD)))
    F = float(-0.5 * n * p * math.log(2 * math.pi) + 0.5 * n * p * math.log(beta)
              + 0.5 * p * (logdet_k - logdet_p) - 0.5 * beta * stats.A + 0.5 * beta**2 * CPC
              - 0.5 * beta * p * stats.B + 0.5 * beta * p * tr_KiD - stats.KL)
    if not grads:
        return F
    eye = like(np.eye(len(Z)), D)
    Ki = cho_solve(Lk, eye)
    Pi = cho_solve(Lp, eye)
    PCCP = PiC @ PiC.T
    GC = beta**2 * PiC
    GD = -0.5 * p * beta * Pi - 0.5 * beta**3 * PCCP + 0.5 * beta * p * Ki
    GK = 0.5 * p * Ki - 0.5 * p * Pi - 0.5 * beta**2 * PCCP - 0.5 * beta * p * KiD @ Ki
    GK = 0.5 * (GK + GK.T)
    GD = 0.5 * (GD + GD.T)
    dbeta = (0.5 * n * p / beta - 0.5 * p * float(xp.sum(Pi * D)) - 0.5 * stats.A + beta * CPC
             - 0.5 * beta**2 * float(xp.sum(PiC * (D @ PiC))) - 0.5 * p * stats.B
             + 0.5 * p * tr_KiD)
    GB = -0.5 * beta * p
    dZ, dvar, dls = kmm_backprop(GK, theta, K0, Kmm)
    dvar += GB * stats.B / variance
    return BoundGrads(F, GB, GC, GD, dZ, dvar, dls, float(dbeta))


def collapsed_bound(stats: SuffStats, theta: GlobalParams) -> float:
    """Eq. (4.3): the collapsed lower bound on log p(Y) at θ from the summed statistics (nats)."""
    check_X(theta.Z, "Z", min_rows=1)
    return bound_and_grads(stats, theta, grads=False)


def chunk_global_grad(Y, theta: GlobalParams, g: BoundGrads, mu, S=None, psi1=None) -> np.ndarray:
    """One chunk's contribution to ∂F/∂(Z, σ², l) through its statistics C and D, as one vector
    [dZ.ravel(), dvar, dls] (the central :func:`bound_and_grads` adds the K_mm, B and β parts).
    ``psi1``: observed inputs only, the K_mn (m, b) the stats map cached."""
    if S is None:  # in the chunk's namespace: the vector is summed on the workers, on their devices
        return observed_grad(Y, theta, g.GC, g.GD, mu, psi1)
    _require_rbf(theta)
    Y = _as_2d(Y)
    Z, variance, ls = theta.Z, theta.variance, theta.lengthscales
    if mu.shape[0] == 0:
        return np.zeros(Z.size + 1 + Z.shape[1])
    dZ, dvar, dls, _, _ = latent_grads(np.asarray(Y, float), Z, variance, ls, g.GC, g.GD,
                                        np.asarray(mu, float), np.asarray(S, float))
    return np.concatenate([dZ.ravel(), [dvar], dls])


def chunk_local_grad(Y, theta: GlobalParams, g: BoundGrads, mu, S):
    """∂F/∂(μ, S) (b, q) each, for one chunk's latent rows: through its C and D, minus its KL."""
    _require_rbf(theta)
    _, _, _, dmu, dS = latent_grads(_as_2d(np.asarray(Y, float)), theta.Z, theta.variance,
                                    theta.lengthscales, g.GC, g.GD, mu, S)
    return dmu - mu, dS - 0.5 * (1.0 - 1.0 / S)

