"""The weight-space variational GP of ADVGP (Peng, Zhe & Qi 2017, "Asynchronous Distributed Variational
Gaussian Processes for Regression", sections 3–5), with its gradients.

The GP is approximated by f(x) = φ(x)ᵀw, w ~ N(0, I), with a feature map built on m inducing inputs Z:

* eq. (11), ``"cholesky"``: φ(x) = Lᵀ k_m(x) with K_mm⁻¹ = L Lᵀ (L = R⁻ᵀ for the Cholesky factor R of K_mm);
* eq. (21), ``"nystrom"``: φ(x) = diag(λ)^−½ Qᵀ k_m(x), K_mm = Q diag(λ) Qᵀ (scaled Nyström eigenfunctions);
* eq. (22), ``"ensemble"``: the sum over g groups of inducing inputs of g^−½ times the group's eq. (21) map.

Each is φ(x) = Wᵀ k_m(x) for an (m, k) matrix W(K_mm) (k = m, or m/g for the ensemble). With q(w) = N(μ, Σ),
Σ = UᵀU (U upper triangular, k × k), the negative ELBO splits into per-point terms and a convex regulariser
(eqs. 14, 15, 23):

    −L = Σ_i g_i + h,   h = ½(−ln|Σ| − k + tr Σ + μᵀμ),
    g_i = ½ ln 2π − ½ ln β + β/2 (y_i² − 2 y_i φ_iᵀμ + φ_iᵀ(μμᵀ + Σ − I)φ_i + k_ii).

Summed over a partition, the g_i depend on its rows only through the statistics of the collapsed bound of
:mod:`daskgp.inducing.stats` (A = Σ y², B = Σ k_ii, C = K_mn y, D = K_mn K_nm): with M = μμᵀ + Σ − I,

    G = n/2 ln 2π − n/2 ln β + β/2 (A − 2 μᵀWᵀC + tr(M WᵀDW) + B).

So a partition's gradient w.r.t. (Z, σ², l) has two parts: through its statistics (∂G/∂C = −βWμ,
∂G/∂D = β/2 W M Wᵀ, back-propagated over its rows by :func:`daskgp.inducing.stats.observed_grad`) and
through W(K_mm) (∂G/∂W = −β C μᵀ + β D W M, back-propagated through the Cholesky or eigen-decomposition and
the kernel). μ and U get eqs. (16)–(17) summed: ∂G/∂μ = β(WᵀDWμ − WᵀC), ∂G/∂U = β triu(U WᵀDW).

Everything is in the standardised units of the caller (the estimator standardises). Parameters are carried as
one flat vector (:class:`ADVGPParams`): Z, log σ², log l, log σ²_n (the noise variance; the kernel part,
stepped by ADADELTA), then μ and the upper triangle of U (stepped and then moved by the proximal operator of
h, eqs. 18–20).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..inducing.features import GlobalParams, global_blocks, kmm, kmm_backprop
from ..inducing.stats import SuffStats, observed_grad, observed_stats
from ..model.params import Block, Parameters, Structure

__all__ = ["FEATURE_MAPS", "ADVGPParams", "weight_map", "partition_objective", "collapsed_objective",
           "regulariser", "prox_h", "appended_statistics", "natural_step", "optimal_q", "negative_elbo",
           "stats_objective"]

FEATURE_MAPS = ("cholesky", "nystrom", "ensemble")


@dataclass
class ADVGPParams(Parameters):
    """Z (m, q) inducing inputs; variance σ², lengthscales (q,), noise (the noise variance σ²_n; the
    objective is written in its precision :attr:`beta`) of the GP with the stationary ARD kernel named
    ``kernel`` ('rbf', 'matern32', 'matern52'); mu (k,) and U (k, k) upper
    triangular of q(w) = N(μ, UᵀU). ``groups``: the ensemble map's g (1 else)."""

    Z: np.ndarray
    variance: float
    lengthscales: np.ndarray
    noise: float
    mu: np.ndarray
    U: np.ndarray
    feature_map: str = "cholesky"
    groups: int = 1
    kernel: str = "rbf"

    def __post_init__(self):
        self.Z = np.asarray(self.Z, dtype=float)
        self.lengthscales = np.broadcast_to(np.asarray(self.lengthscales, float), (self.Z.shape[1],)).copy()
        self.mu = np.asarray(self.mu, dtype=float)
        self.U = np.triu(np.asarray(self.U, dtype=float))
        if self.feature_map not in FEATURE_MAPS:
            raise ValueError(f"feature_map must be one of {FEATURE_MAPS}, got {self.feature_map!r}")
        if self.feature_map != "ensemble" and self.groups != 1:
            raise ValueError("groups > 1 needs feature_map='ensemble'")
        if self.Z.shape[0] % self.groups:
            raise ValueError(f"m = {self.Z.shape[0]} inducing inputs do not split into {self.groups} groups")
        if self.mu.shape != (self.k,) or self.U.shape != (self.k, self.k):
            raise ValueError(f"mu must be ({self.k},) and U ({self.k}, {self.k}), got {self.mu.shape} and "
                             f"{self.U.shape}")

    @property
    def m(self) -> int:
        return self.Z.shape[0]

    @property
    def beta(self) -> float:
        """The noise precision 1/σ²_n."""
        return 1.0 / self.noise

    @property
    def k(self) -> int:
        """The dimension of φ(x) and w."""
        return self.Z.shape[0] // self.groups

    @property
    def inducing(self) -> GlobalParams:
        """The kernel part as the sparse families' shared parameters."""
        return GlobalParams(self.Z, self.variance, self.lengthscales, noise=self.noise, kernel=self.kernel)

    @property
    def n_kernel(self) -> int:
        """Length of the kernel part of the vector: Z, log σ², log l, log σ²_n."""
        return self.Z.size + self.Z.shape[1] + 2

    def structure(self) -> Structure:
        """The kernel part's blocks (:func:`daskgp.inducing.features.global_blocks`), then μ (k,) and U's
        upper triangle (k(k+1)/2, row-major)."""
        k = self.k
        return Structure(global_blocks(*self.Z.shape) + (Block("mu", (k,)), Block("U", (k, k), "triu")))


def weight_map(p: ADVGPParams):
    """(W (m, k), Kmm-jittered, back(W̄) → K̄_mm): φ(x) = Wᵀ k_m(x) and the back-propagation of ∂/∂W to
    ∂/∂K_mm (symmetric) for the map of ``p.feature_map``."""
    K0, Kmm = kmm(p.inducing)
    if p.feature_map == "cholesky":
        R = np.linalg.cholesky(Kmm)
        W = scipy.linalg.solve_triangular(R, np.eye(p.m), lower=True).T  # R⁻ᵀ

        def back(Wbar):
            # W = R⁻ᵀ: R̄ = −R⁻ᵀ W̄ᵀ R⁻ᵀ (lower part); then the Cholesky's adjoint (Murray 2016)
            Rinv = W.T
            Rbar = np.tril(-W @ Wbar.T @ W)
            P = np.tril(R.T @ Rbar)
            P[np.diag_indices_from(P)] *= 0.5
            Kbar = Rinv.T @ P @ Rinv
            return 0.5 * (Kbar + Kbar.T)
        return W, K0, Kmm, back
    g, k = p.groups, p.k
    blocks = []
    for j in range(g):
        sl = slice(j * k, (j + 1) * k)
        lam, Q = np.linalg.eigh(Kmm[sl, sl])
        Q = Q * np.where(Q[np.argmax(np.abs(Q), axis=0), np.arange(k)] < 0, -1.0, 1.0)  # a fixed sign
        blocks.append((sl, lam, Q))
    W = np.zeros((p.m, k))
    for sl, lam, Q in blocks:
        W[sl] = Q / np.sqrt(lam) / math.sqrt(g)

    def back(Wbar):
        Kbar = np.zeros((p.m, p.m))
        for sl, lam, Q in blocks:
            Wb = Wbar[sl] / math.sqrt(g)
            Qbar = Wb / np.sqrt(lam)
            lambar = -0.5 * np.sum(Q * Wb, axis=0) * lam**-1.5
            diff = lam[None, :] - lam[:, None]
            F = np.divide(1.0, diff, out=np.zeros_like(diff), where=~np.eye(k, dtype=bool))
            inner = np.diag(lambar) + F * (Q.T @ Qbar)
            Kb = Q @ inner @ Q.T
            Kbar[sl, sl] = 0.5 * (Kb + Kb.T)
        return Kbar
    return W, K0, Kmm, back


def regulariser(mu, U) -> float:
    """h = ½(−ln|Σ| − k + tr Σ + μᵀμ) with Σ = UᵀU (eq. 15): KL(N(μ, Σ) ‖ N(0, I)) (nats)."""
    d = np.diag(U)
    return 0.5 * (-2 * np.sum(np.log(np.abs(d))) - len(mu) + float(np.sum(U * U)) + float(mu @ mu))


def prox_h(mu, U, gamma):
    """argmin over (μ*, U*) of h(μ*, U*) + ‖(μ*, U*) − (μ, U)‖² / (2γ) (eqs. 18–20); ``gamma`` a scalar or a
    pair of per-coordinate steps shaped as μ and U (h is separable: each coordinate has a closed form)."""
    g_mu, g_U = (gamma, gamma) if np.isscalar(gamma) else gamma
    mu_new = mu / (1.0 + g_mu)
    U_new = np.triu(U / (1.0 + g_U))
    d, gd = np.diag(U), np.diag(np.broadcast_to(g_U, U.shape))
    np.fill_diagonal(U_new, (d + np.sqrt(d * d + 4 * (1 + gd) * gd)) / (2 * (1 + gd)))
    return mu_new, U_new


def _data_terms(stats: SuffStats, p: ADVGPParams, W):
    """(G, M, WᵀC (k,), WᵀDW (k, k)) of the summed statistics."""
    Sigma = p.U.T @ p.U
    M = np.outer(p.mu, p.mu) + Sigma - np.eye(p.k)
    WC = W.T @ stats.C[:, 0]
    WDW = W.T @ stats.D @ W
    quad = stats.A - 2 * p.mu @ WC + float(np.sum(M * WDW)) + stats.B
    G = 0.5 * stats.n * (math.log(2 * math.pi) - math.log(p.beta)) + 0.5 * p.beta * quad
    return G, M, WC, WDW, quad


def partition_objective(X, y, p: ADVGPParams, grad: bool = True, natural: bool = False):
    """G_k = Σ_{i in the partition} g_i (nats) of rows X (b, q), y (b,) and, with ``grad``, its gradient as a
    vector in the order of :meth:`ADVGPParams.to_vector` (log-parameters for σ², l, β). The worker's task.

    ``natural``: the q(w) part of the vector is left at zero and the partition's statistics C (m,) and the
    upper triangle of D (m, m) are appended (:func:`appended_statistics` reads them back): what a
    natural-gradient step of q(w) sums (:func:`natural_step`). They do not depend on W, β or q, so
    partitions computed at different versions add up to a likelihood the server maps into w-space with its
    own current W and β."""
    X = np.asarray(X, dtype=float)
    y2 = np.asarray(y, dtype=float).reshape(-1, 1)
    stats, psi1 = observed_stats(y2, p.inducing, X)
    return _objective(X, y2, stats, psi1, p, grad, natural)


def collapsed_objective(X, y, p: ADVGPParams) -> tuple[float, np.ndarray]:
    """(−F, ∂(−F)/∂ kernel part): the negative ELBO of rows X (b, q), y (b,) at the q(w) that minimises it
    for the kernel of ``p`` (:func:`optimal_q`), which is Titsias' (2009) collapsed bound F (the objective
    of :mod:`daskgp.sparse.bound`, eq. 4.3 of Gal et al.). Its gradient w.r.t. the kernel part (Z, log σ²,
    log l, log σ²_n; the first :attr:`ADVGPParams.n_kernel` entries of the vector) is the partial gradient
    of −L at that q: ∂(−L)/∂q vanishes there (the envelope theorem), so no derivative of q* is needed.
    What :func:`daskgp.advgp.start.subset_start` minimises on a sample of the rows."""
    X = np.asarray(X, dtype=float)
    y2 = np.asarray(y, dtype=float).reshape(-1, 1)
    stats, psi1 = observed_stats(y2, p.inducing, X)
    mu, U = optimal_q(stats, p)
    q = ADVGPParams(p.Z, p.variance, p.lengthscales, p.noise, mu, U, p.feature_map, p.groups, p.kernel)
    G, g = _objective(X, y2, stats, psi1, q, True, False)
    return G + regulariser(mu, U), g[:p.n_kernel]


def _objective(X, y2, stats: SuffStats, psi1, p: ADVGPParams, grad: bool, natural: bool):
    """:func:`partition_objective` from the rows' statistics (and their K_nm, ``psi1``)."""
    W, K0, Kmm, back = weight_map(p)
    G, M, WC, WDW, quad = _data_terms(stats, p, W)
    if not grad:
        return G
    beta = p.beta
    # through the statistics C, D (and B = n σ² for every stationary kernel)
    GC = (-beta * (W @ p.mu))[:, None]
    GD = 0.5 * beta * (W @ M @ W.T)
    rows = observed_grad(y2, p.inducing, GC, GD, X, psi1)
    m, q = p.Z.shape
    dZ, dvar, dls = rows[:m * q].reshape(m, q), rows[m * q], rows[m * q + 1:]
    dvar += 0.5 * beta * stats.n  # ∂G/∂B · ∂B/∂σ²
    # through W(K_mm)
    Wbar = -beta * np.outer(stats.C[:, 0], p.mu) + beta * stats.D @ W @ M
    kZ, kvar, kls = kmm_backprop(back(Wbar), p.inducing, K0, Kmm)
    dZ, dvar, dls = dZ + kZ, dvar + kvar, dls + kls
    dbeta = -0.5 * stats.n / beta + 0.5 * quad
    iu = np.triu_indices(p.k)
    kernel = [dZ.ravel(), [dvar * p.variance], dls * p.lengthscales, [-dbeta * beta]]  # ∂/∂log σ²_n
    if natural:
        return G, np.concatenate([*kernel, np.zeros(p.k + len(iu[0])), stats.C[:, 0],
                                  stats.D[np.triu_indices(m)]])
    dmu = beta * (WDW @ p.mu - WC)
    dU = np.triu(beta * p.U @ WDW)  # ∂/∂U of β/2 tr(UᵀU S) = β U S (S symmetric), upper part
    return G, np.concatenate([*kernel, dmu, dU[iu]])


def appended_statistics(g, p: ADVGPParams) -> tuple[np.ndarray, np.ndarray]:
    """(C (m,), D (m, m) symmetric): the statistics that :func:`partition_objective` with ``natural``
    appends after the parameter vector of ``p`` in its gradient ``g`` (or in a sum of such gradients)."""
    size, m = p.to_vector().size, p.m
    D = np.zeros((m, m))
    D[np.triu_indices(m)] = g[size + m:]
    return np.asarray(g[size:size + m]), D + np.triu(D, 1).T


def natural_step(p: ADVGPParams, C, D, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """A natural-gradient step of size ρ ∈ (0, 1] on q(w) = N(μ, UᵀU) of ``p`` for the negative ELBO −L
    (Hensman, Fusi & Lawrence 2013, eq. 9; Salimbeni, Eleftheriadis & Hensman 2018), from the data's summed
    statistics C (m,) and D (m, m): in natural parameters (Λ = Σ⁻¹, b = Σ⁻¹μ), with W and β of ``p``,

        Λ ← (1 − ρ) Λ + ρ (I + β WᵀDW),   b ← (1 − ρ) b + ρ β WᵀC,

    ρ = 1 being the closed-form optimum (:func:`optimal_q`). It is also a proximal step: the mirror-descent
    step on −L with the KL divergence as the proximity term (Khan & Lin 2017), so the convex regulariser h
    is treated exactly, as the paper's Euclidean prox (eqs. 18–20) treats it in its geometry. Returns
    (μ, U), U upper triangular."""
    k, mu, U = p.k, p.mu, p.U
    W, _, _, _ = weight_map(p)
    L = np.linalg.cholesky(U.T @ U)  # Σ = L Lᵀ
    Sigma_inv = scipy.linalg.cho_solve((L, True), np.eye(k))
    b = Sigma_inv @ mu
    WDW = W.T @ (0.5 * (D + D.T)) @ W
    Lam = (1 - rho) * Sigma_inv + rho * (np.eye(k) + p.beta * WDW)
    b = (1 - rho) * b + rho * p.beta * (W.T @ C)
    C = np.linalg.cholesky(Lam)
    mu = scipy.linalg.cho_solve((C, True), b)
    Cinv = scipy.linalg.solve_triangular(C, np.eye(k), lower=True)
    Sigma = Cinv.T @ Cinv  # Λ⁻¹; its own Cholesky factor gives the upper-triangular U the model carries
    return mu, np.linalg.cholesky(0.5 * (Sigma + Sigma.T)).T


def negative_elbo(X, y, p: ADVGPParams) -> float:
    """−L = Σ_i g_i + h over all rows (nats): the objective ADVGP minimises."""
    return partition_objective(X, y, p, grad=False) + regulariser(p.mu, p.U)


def stats_objective(stats: SuffStats, p: ADVGPParams) -> float:
    """−L = Σ_i g_i + h (nats) from the rows' summed statistics (:func:`daskgp.inducing.stats.summed_stats`)
    instead of the rows: at :func:`optimal_q`'s q(w) it is minus Titsias' collapsed bound."""
    W, _, _, _ = weight_map(p)
    return float(_data_terms(stats, p, W)[0]) + regulariser(p.mu, p.U)


def optimal_q(stats: SuffStats, p: ADVGPParams) -> tuple[np.ndarray, np.ndarray]:
    """The q(w) minimising −L for fixed kernel parameters: Σ* = (I + β WᵀDW)⁻¹, μ* = β Σ* WᵀC; returned as
    (μ*, U*) with U* upper triangular, Σ* = U*ᵀU*."""
    W, _, _, _ = weight_map(p)
    WDW = W.T @ stats.D @ W
    A = np.eye(p.k) + p.beta * WDW
    Sigma = np.linalg.inv(A)
    Sigma = 0.5 * (Sigma + Sigma.T)
    mu = p.beta * Sigma @ (W.T @ stats.C[:, 0])
    U = np.linalg.cholesky(Sigma).T  # Σ = L Lᵀ = UᵀU with U = Lᵀ
    return mu, U
