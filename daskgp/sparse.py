"""Sparse variational GP regression and the Bayesian GPLVM in the map-reduce form of Gal, van der Wilk &
Rasmussen (2014): given the inducing inputs Z (m, q), Titsias' collapsed bound is a function of sums over data
points, which every chunk computes on its own:

    A = Σ_i y_iᵀ y_i,   B = Σ_i ⟨K_ii⟩,   C = Σ_i ⟨K_mi⟩ y_iᵀ (m, D),   D = Σ_i ⟨K_mi K_im⟩ (m, m),
    KL = Σ_i KL(q(x_i) ‖ N(0, I)),

with expectations under q(x_i) = N(μ_i, diag S_i) (the psi-statistics of the RBF-ARD kernel, closed form); for
regression the inputs are observed (S_i = 0, KL = 0) and the expectations are plain kernel values. The bound,
eq. (4.3) of the paper, for D output dimensions and noise precision β:

    F = −nD/2·log 2π + nD/2·log β + D/2·log|K_mm| − D/2·log|K_mm + β·D|
        − β/2·A + β²/2·tr(Cᵀ (K_mm + β·D)⁻¹ C) − βD/2·B + βD/2·tr(K_mm⁻¹ D) − KL.

This module holds the per-chunk statistics (:func:`chunk_stats`), their sum over a Dask array's row chunks
with a tree reduction (:func:`distributed_stats`), the bound from the sums (:func:`collapsed_bound`) and the
dense single-process references used to test them (:func:`titsias_bound_dense`). Status: groundwork of issue 5
(gradients, optimisation, the GPLVM's local steps, estimators and CLI are not built yet).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ._validation import check_X

__all__ = ["SuffStats", "rbf_ard", "chunk_stats", "distributed_stats", "collapsed_bound",
           "titsias_bound_dense"]

_JITTER = 1e-8


@dataclass
class SuffStats:
    """The partial sums of one chunk (or of all of them): n rows, A, B, C (m, D), D (m, m), KL."""

    n: int
    A: float
    B: float
    C: np.ndarray
    D: np.ndarray
    KL: float = 0.0

    def __add__(self, other: SuffStats) -> SuffStats:
        return SuffStats(self.n + other.n, self.A + other.A, self.B + other.B, self.C + other.C,
                         self.D + other.D, self.KL + other.KL)


def rbf_ard(X1, X2, variance: float, lengthscales) -> np.ndarray:
    """k(x, x′) = σ²·exp(−½ Σ_q (x_q − x′_q)²/l_q²): (n1, n2)."""
    ls = np.asarray(lengthscales, dtype=float)
    A, B = np.asarray(X1) / ls, np.asarray(X2) / ls
    d2 = (A**2).sum(1)[:, None] + (B**2).sum(1)[None, :] - 2 * A @ B.T
    return variance * np.exp(-0.5 * np.maximum(d2, 0.0))


def chunk_stats(Y, Z, variance: float, lengthscales, mu=None, S=None) -> SuffStats:
    """Statistics of one chunk. Y (b, D) outputs; Z (m, q) inducing inputs; inputs either observed (``mu``
    = X (b, q), S None) or latent with q(x_i) = N(mu_i, diag S_i), S (b, q) variances."""
    Y = np.asarray(Y, dtype=float)
    Y = Y[:, None] if Y.ndim == 1 else Y
    mu = np.asarray(mu, dtype=float)
    b, m = mu.shape[0], Z.shape[0]
    if b == 0:  # an empty chunk adds nothing
        return SuffStats(0, 0.0, 0.0, np.zeros((m, Y.shape[1])), np.zeros((m, m)))
    ls = np.asarray(lengthscales, dtype=float) * np.ones(Z.shape[1])
    A = float(np.sum(Y * Y))
    B = float(b * variance)
    if S is None:
        Kmn = rbf_ard(Z, mu, variance, ls)  # (m, b)
        return SuffStats(b, A, B, Kmn @ Y, Kmn @ Kmn.T)
    S = np.asarray(S, dtype=float)
    l2 = ls**2
    # psi1 (b, m): σ² Π_q (1 + S/l²)^(-½) exp(−½ Σ_q (μ − z)²/(l² + S))
    denom1 = l2[None, :] + S  # (b, q)
    diff = mu[:, None, :] - Z[None, :, :]  # (b, m, q)
    psi1 = variance * np.exp(-0.5 * np.sum(diff**2 / denom1[:, None, :], axis=2)
                             - 0.5 * np.sum(np.log1p(S / l2[None, :]), axis=1)[:, None])
    # psi2 summed over i (m, m): σ⁴ Π_q (1 + 2S/l²)^(-½) exp(−Σ_q (z − z′)²/(4l²) − Σ_q (μ − z̄)²/(l² + 2S))
    zdiff = Z[:, None, :] - Z[None, :, :]
    zbar = 0.5 * (Z[:, None, :] + Z[None, :, :])  # (m, m, q)
    base = -np.sum(zdiff**2 / (4 * l2), axis=2)  # (m, m)
    Dsum = np.zeros((m, m))
    for i in range(b):  # one (m, m, q) temporary per row keeps memory at O(m² q)
        d = mu[i] - zbar
        expo = base - np.sum(d**2 / (l2 + 2 * S[i]), axis=2) - 0.5 * np.sum(np.log1p(2 * S[i] / l2))
        Dsum += variance**2 * np.exp(expo)
    KL = 0.5 * float(np.sum(S + mu**2 - 1.0 - np.log(S)))
    return SuffStats(b, A, B, psi1.T @ Y, Dsum, KL)


def _chunk_stats_task(Yc, Xc, Sc, Z, variance, lengthscales):
    return chunk_stats(Yc, Z, variance, lengthscales, mu=Xc, S=Sc)


def distributed_stats(Y, X, Z, variance: float, lengthscales, S=None, client=None) -> SuffStats:
    """The statistics summed over the row chunks of dask arrays Y (n, D), X (n, q) (and S, latent inputs):
    one task per chunk on the workers, combined with a tree reduction, so the central node receives O(m²)
    numbers whatever n is. Numpy inputs are one chunk."""
    import dask
    import dask.array as da
    from dask import delayed

    X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X, dtype=float), chunks=(len(X), -1))
    Y = Y if isinstance(Y, da.Array) else da.from_array(np.asarray(Y, dtype=float), chunks=(X.chunks[0], -1))
    if Y.ndim == 1:
        Y = Y[:, None]
    Y = Y.rechunk((X.chunks[0], -1))
    xs, ys = X.to_delayed().ravel(), Y.to_delayed().ravel()
    if S is not None:
        S = S if isinstance(S, da.Array) else da.from_array(np.asarray(S, dtype=float), chunks=X.chunks)
        ss = S.rechunk(X.chunks).to_delayed().ravel()
    else:
        ss = [None] * len(xs)
    parts = [delayed(_chunk_stats_task)(yc, xc, sc, Z, variance, lengthscales)
             for yc, xc, sc in zip(ys, xs, ss, strict=True)]
    while len(parts) > 1:  # tree reduction: pairs of partial sums
        parts = [delayed(lambda a, b: a + b)(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    if client is not None:
        return client.compute(parts[0]).result()
    return dask.compute(parts[0])[0]


def collapsed_bound(stats: SuffStats, Z, variance: float, lengthscales, beta: float) -> float:
    """Eq. (4.3): the collapsed lower bound on log p(Y) from the summed statistics."""
    if not beta > 0:
        raise ValueError(f"the noise precision beta must be > 0, got {beta}")
    Z = check_X(Z, "Z", min_rows=1)
    n, Dout = stats.n, stats.C.shape[1]
    Kmm = rbf_ard(Z, Z, variance, lengthscales) + _JITTER * variance * np.eye(len(Z))
    Lk = np.linalg.cholesky(Kmm)
    P = Kmm + beta * stats.D
    Lp = np.linalg.cholesky(P)
    logdet_k, logdet_p = 2 * np.log(np.diag(Lk)).sum(), 2 * np.log(np.diag(Lp)).sum()
    PC = scipy.linalg.solve_triangular(Lp, stats.C, lower=True)
    KinvD = scipy.linalg.cho_solve((Lk, True), stats.D)
    return float(-0.5 * n * Dout * math.log(2 * math.pi) + 0.5 * n * Dout * math.log(beta)
                 + 0.5 * Dout * (logdet_k - logdet_p) - 0.5 * beta * stats.A
                 + 0.5 * beta**2 * np.sum(PC**2) - 0.5 * beta * Dout * stats.B
                 + 0.5 * beta * Dout * np.trace(KinvD) - stats.KL)


def titsias_bound_dense(X, Y, Z, variance: float, lengthscales, beta: float) -> float:
    """Titsias' (2009) collapsed bound, dense and direct:
    Σ_d log N(y_d | 0, Q_nn + β⁻¹I) − β/2·tr(K_nn − Q_nn)·D
    with Q_nn = K_nm K_mm⁻¹ K_mn. The reference the distributed bound is tested against (observed inputs)."""
    X, Z = np.asarray(X, float), np.asarray(Z, float)
    Y = np.asarray(Y, float).reshape(len(X), -1)
    n, Dout = Y.shape
    Kmm = rbf_ard(Z, Z, variance, lengthscales) + _JITTER * variance * np.eye(len(Z))
    Kmn = rbf_ard(Z, X, variance, lengthscales)
    Q = Kmn.T @ np.linalg.solve(Kmm, Kmn)
    cov = Q + np.eye(n) / beta
    L = np.linalg.cholesky(cov)
    alpha = scipy.linalg.solve_triangular(L, Y, lower=True)
    loglik = (-0.5 * np.sum(alpha**2) - Dout * np.log(np.diag(L)).sum()
              - 0.5 * n * Dout * math.log(2 * math.pi))
    return float(loglik - 0.5 * beta * Dout * (n * variance - np.trace(Q)))
