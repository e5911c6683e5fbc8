"""Sparse GP classification with the FITC-probit model, trained by EP, stochastic EP or ADF (Hernández-Lobato,
Li, Hernández-Lobato, Bui & Turner 2015, "Stochastic Expectation Propagation for Large Scale Gaussian Process
Classification"; the model and the hyperparameter gradient of Hernández-Lobato & Hernández-Lobato 2016).

Model. u = f(Z) for m inducing inputs Z, prior N(u | 0, K) (K = K_mm + 10⁻⁵σ²I, :data:`KMM_JITTER`); under
FITC each label depends on u only through h_i = a_iᵀu, a_i = K⁻¹k_i (k_i = K_mi):

    p(y_i | u) = Φ(y_i a_iᵀu / √(1 + d_i)),   d_i = k_ii − k_iᵀK⁻¹k_i,

the probit with its unit label noise plus FITC's conditional variance
(:class:`daskgp.model.likelihoods.Probit`).

Approximation. Every factor touches u along one direction, so an approximate factor is
t̃_i(u) = exp(−½ τ̃_i h_i² + ν̃_i h_i) with two numbers (τ̃_i, ν̃_i), and the approximate likelihood of any
set of points is exp(−½ uᵀK⁻¹TK⁻¹u + cᵀK⁻¹u) with

    T = Σ_i τ̃_i k_i k_iᵀ (m, m),   c = Σ_i ν̃_i k_i (m,),

sums over data points (per-chunk, tree-reduced). q(u) ∝ N(u | 0, K)·exp(…) has S = K(K + T)⁻¹K, mean
K(K + T)⁻¹c, and the projections σ_i² = k_iᵀ(K + T)⁻¹k_i, μ_i = k_iᵀ(K + T)⁻¹c (:class:`Posterior`).
(T, c) are kept in this k-space form rather than as u-space natural parameters K⁻¹TK⁻¹: the same numbers
then stand for the approximation when K changes with the hyperparameters, and no K⁻¹ is formed.

* **EP** keeps (τ̃_i, ν̃_i) for every point (on the worker holding its rows): the cavity q\\i removes the
  point's own factor (in h: τ_c = 1/σ_i² − τ̃_i, ν_c = μ_i/σ_i² − ν̃_i), the tilted moments give the new
  factor, damped; (T, c) are re-summed. Memory O(n), here two numbers per row.
* **SEP** keeps one global factor (T_g, c_g), standing for the sum of the sites: every point's cavity is
  q\\1 = q / t̃_g^{1/n} (k-space: (1 − 1/n)(T_g, c_g)); the new sites' sum replaces it, optionally damped
  (with minibatches, the batch's sum scaled by n/|B|). Memory O(m²), independent of n.
* **ADF** uses q itself as every cavity, so each point's own site stays in its cavity and q is over-
  confident (the paper's baseline). The paper adds every pass's sites to q, counting the data once more per
  pass; with hyperparameters learnt over hundreds of passes that drove q's variance to zero (2,000 hourly
  weather rows: kernel variance 19, lengthscales ≈ 25, test NLL 35 % above an exact Laplace GPC; on the RAND
  health data worse than the class prior). Here the new sites' sum replaces the factor, as in SEP, so the
  data are counted once and the fixed point is q = p₀ Π_i t̃_i(q).

Evidence (EP): with the unnormalised sites above,

    log Z_EP = log Z(T, c) + Σ_i [log Φ(z_i) + ½ log(1 + τ̃_i σ_ci²) − (σ_ci² ν̃_i² + 2 μ_ci ν̃_i − τ̃_i μ_ci²) /
                                   (2 (1 + τ̃_i σ_ci²))],
    log Z(T, c) = log ∫ N(u | 0, K) e^{−½uᵀK⁻¹TK⁻¹u + cᵀK⁻¹u} du = −½ log|K + T| + ½ log|K| + ½ cᵀ(K + T)⁻¹c,

(σ_ci², μ_ci the cavity's moments of h_i); SEP and ADF report the same form with their cavities. Its gradient
w.r.t. a hyperparameter ξ at EP's fixed point (Seeger 2005; the paper's eq. for ∂ log Z/∂ξ) is

    ∂ log Z/∂ξ = (E_q[uuᵀ] − K) : ½ K⁻¹ (∂K/∂ξ) K⁻¹ + Σ_i ∂ log Z_i/∂ξ |_{cavity fixed},

the second term a sum over data points through a_i and d_i (:func:`chunk_pass`). The paper uses it for SEP
and ADF with their shared cavities; here SEP and ADF take it with per-point cavities q / t̃_i built from
their own sites, which removes most of that formula's bias at their fixed points
(:func:`tied_gradient_pass`). Units: the caller's (the classifier standardises X).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from ..inducing.features import (
    CLASSIFIER_JITTER,
    GlobalParams,
    global_blocks,
    kernel_name,
    kmm,
    kmm_backprop,
    kmn,
    kmn_backprop,
)
from ..inducing.stats import ROW_BLOCK
from ..model.likelihoods import Probit
from ..model.params import Parameters, Structure

# K_mm's jitter relative to the kernel variance, the shared layer's for classifiers (why 10× the regression
# bound's: :data:`daskgp.inducing.features.CLASSIFIER_JITTER`); a module attribute so tests can vary it.
KMM_JITTER = CLASSIFIER_JITTER

__all__ = ["GPCParams", "Factor", "Posterior", "ChunkResult", "chunk_pass", "tied_gradient_pass",
           "assemble_gradient"]



@dataclass
class GPCParams(Parameters):
    """Z (m, q) inducing inputs, kernel variance σ² (latent units²) and ARD lengthscales (q,) of the
    stationary ARD kernel named ``kernel`` ('rbf', 'matern32', 'matern52'). Unconstrained vector
    (:meth:`structure`): Z, log σ², log l — the sparse families' global blocks without the noise."""

    Z: np.ndarray
    variance: float
    lengthscales: np.ndarray
    kernel: str = "rbf"

    def __post_init__(self):
        self.Z = np.asarray(self.Z, dtype=float)
        self.variance = float(self.variance)
        self.lengthscales = np.broadcast_to(np.asarray(self.lengthscales, float), (self.Z.shape[1],)).copy()
        self.kernel = kernel_name(self.kernel)

    def structure(self) -> Structure:
        return Structure(global_blocks(*self.Z.shape, noise=False))

    @property
    def m(self) -> int:
        return self.Z.shape[0]

    @property
    def inducing(self) -> GlobalParams:
        """The kernel part as the sparse families' shared parameters (their noise variance is unused: a
        classifier has no Gaussian noise)."""
        return GlobalParams(self.Z, self.variance, self.lengthscales, noise=1.0, kernel=self.kernel)


@dataclass
class Factor:
    """An approximate likelihood in k-space: T (m, m) symmetric, c (m,) (see the module docstring)."""

    T: np.ndarray
    c: np.ndarray

    @classmethod
    def zero(cls, m: int) -> Factor:
        return cls(np.zeros((m, m)), np.zeros(m))

    def __add__(self, other: Factor) -> Factor:
        return Factor(self.T + other.T, self.c + other.c)

    def scaled(self, a: float) -> Factor:
        return Factor(a * self.T, a * self.c)


class Posterior:
    """q(u) ∝ N(u | 0, K)·exp(−½uᵀK⁻¹TK⁻¹u + cᵀK⁻¹u) at ``params`` for the factor (T, c): the Cholesky
    factors of K and K + T and α = (K + T)⁻¹c; m×m numbers, sent to every chunk."""

    def __init__(self, params: GPCParams, factor: Factor):
        self.params, self.factor = params, factor
        self.K0, self.K = kmm(params.inducing, KMM_JITTER)
        self.LK = np.linalg.cholesky(self.K)
        A = self.K + 0.5 * (factor.T + factor.T.T)
        self.LKT = np.linalg.cholesky(A)
        self.alpha = scipy.linalg.cho_solve((self.LKT, True), factor.c)

    def log_norm(self) -> float:
        """log Z(T, c) = −½ log|K + T| + ½ log|K| + ½ cᵀ(K + T)⁻¹c (nats)."""
        return float(np.sum(np.log(np.diag(self.LK))) - np.sum(np.log(np.diag(self.LKT)))
                     + 0.5 * self.factor.c @ self.alpha)

    def inv_KT(self) -> np.ndarray:
        return scipy.linalg.cho_solve((self.LKT, True), np.eye(len(self.alpha)))

    def inv_K(self) -> np.ndarray:
        return scipy.linalg.cho_solve((self.LK, True), np.eye(len(self.alpha)))

    def mean_cov(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean (m,), covariance (m, m)) of q(u)."""
        V = scipy.linalg.solve_triangular(self.LKT, self.K, lower=True)
        return self.K @ self.alpha, V.T @ V

    def project(self, Kmn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For columns k_i of K_mn (m, b): (μ_i, σ_i², d_i, L_KT⁻¹K_mn, L_K⁻¹K_mn): the moments of h_i = a_iᵀu
        under q, FITC's conditional variance, and the two triangular solves (reused for the gradient)."""
        VK = scipy.linalg.solve_triangular(self.LK, Kmn, lower=True)
        V = scipy.linalg.solve_triangular(self.LKT, Kmn, lower=True)
        d = np.maximum(self.params.variance - np.sum(VK * VK, axis=0), 0.0)
        # σ_i² ≥ a tiny multiple of σ²: a factor that has counted the data many times (ADF) drives it to 0,
        # and 1/σ_i² must stay finite
        s2 = np.maximum(np.sum(V * V, axis=0), 1e-12 * self.params.variance)
        return Kmn.T @ self.alpha, s2, d, V, VK

    def predict_latent(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance (n,) of the latent f(x) = a(x)ᵀu + FITC's conditional part, at rows X (n, q)."""
        p = self.params
        Kmn = kmn(p.inducing, X)
        mu, s2, d, _, _ = self.project(Kmn)
        return mu, s2 + d


@dataclass
class ChunkResult:
    """A chunk's sums for the centre (all additive, so chunks tree-reduce): n rows (in the minibatch), the new
    sites' factor, the evidence terms, and the gradient parts: the K_mn back-propagation to (Z, σ², l) as one
    vector and the sums uA (m,), PB, Ph (m, m) that the centre turns into ∂/∂K_mm."""

    n: int
    factor: Factor
    log_z: float
    grad_kmn: np.ndarray
    uA: np.ndarray
    PB: np.ndarray
    Ph: np.ndarray
    errors: float = 0.0  # misclassified points under q, for progress
    sites_delta: Factor | None = field(default=None)

    def __add__(self, o: ChunkResult) -> ChunkResult:
        sd = None if self.sites_delta is None else self.sites_delta + o.sites_delta
        return ChunkResult(self.n + o.n, self.factor + o.factor, self.log_z + o.log_z,
                           self.grad_kmn + o.grad_kmn, self.uA + o.uA, self.PB + o.PB, self.Ph + o.Ph,
                           self.errors + o.errors, sd)

    def scaled(self, a: float) -> ChunkResult:
        """Every sum times a (a minibatch standing for the whole data)."""
        sd = None if self.sites_delta is None else self.sites_delta.scaled(a)
        return ChunkResult(self.n, self.factor.scaled(a), a * self.log_z, a * self.grad_kmn, a * self.uA,
                           a * self.PB, a * self.Ph, a * self.errors, sd)


def chunk_pass(X, y, source: Posterior, sites=None, damping: float = 1.0, grad: bool = True,
               gradient_at: Posterior | None = None, Kmn=None):
    """One EP / SEP / ADF pass over rows X (b, q) with labels y (b,) in {−1, +1}.

    ``source``: the distribution the cavities are taken from — q for EP and ADF, SEP's q\\1. ``sites``: EP's
    (b, 2) array of (τ̃_i, ν̃_i), removed from q to form each point's cavity (None: the cavity is ``source``
    itself, as in SEP and ADF). Returns (ChunkResult, new sites (b, 2)): the sites are tilted / cavity, damped
    towards the old ones for EP (``damping`` = 1: no damping); ChunkResult.factor sums the (damped) new sites
    and ChunkResult.sites_delta, for EP, the change from the old ones.

    ``gradient_at`` (SEP and ADF): the evidence terms and the factor come from ``source`` as above, the
    gradient parts from EP's formula at q = ``gradient_at`` with each point's cavity q / t̃_i, t̃_i the site
    this pass made (:func:`tied_gradient_pass`). ``Kmn``: K_mn (m, b) at the parameters, if already formed.

    A chunk of more than :data:`daskgp.inducing.stats.ROW_BLOCK` rows (a Parquet file of 10⁶ rows read as
    one partition) is passed block by block, as SGPR's statistics are: K_mn and its (m, b) companions exist
    for one block at a time (every sum is additive, every site its own row's), so a task's memory is bounded
    whatever its rows; a chunk of up to ROW_BLOCK rows (the classifier's 20,000-row chunks) is one block."""
    if Kmn is None and len(y) > ROW_BLOCK:
        total, new_sites = None, []
        for a in range(0, len(y), ROW_BLOCK):
            e = min(a + ROW_BLOCK, len(y))
            part, s = chunk_pass(X[a:e], y[a:e], source, None if sites is None else sites[a:e], damping,
                                 grad, gradient_at)
            total = part if total is None else total + part
            new_sites.append(s)
        return total, np.concatenate(new_sites)
    if gradient_at is not None:
        return tied_gradient_pass(X, y, source, gradient_at, grad)
    p = source.params
    y = np.asarray(y, dtype=float)
    b = len(y)
    if Kmn is None:
        Kmn = kmn(p.inducing, X)
    mu, s2, d, V, VK = source.project(Kmn)
    if sites is None:
        tau_s = nu_s = np.zeros(b)
    else:
        tau_s, nu_s = sites[:, 0], sites[:, 1]
    tau_c = 1.0 / s2 - tau_s
    ok = tau_c > 1e-10  # a cavity must be a proper Gaussian; else the point keeps its site this pass
    tau_c = np.where(ok, tau_c, 1.0)
    nu_c = np.where(ok, mu / s2 - nu_s, 0.0)
    var_c, mu_c = 1.0 / tau_c, nu_c / tau_c
    t = Probit.tilted(y, mu_c, var_c, 1.0 + d)
    tau_new = np.maximum(1.0 / t.var - tau_c, 0.0)  # ≥ 0: the probit is log-concave
    nu_new = t.mean / t.var - nu_c
    tau_new = np.where(ok, (1 - damping) * tau_s + damping * tau_new, tau_s)
    nu_new = np.where(ok, (1 - damping) * nu_s + damping * nu_new, nu_s)
    # the evidence terms at the current sites (zero sites: SEP's and ADF's cavities)
    one = 1.0 + tau_s * var_c
    log_z = np.where(ok, t.log_z + 0.5 * np.log(one)
                     - (var_c * nu_s**2 + 2 * mu_c * nu_s - tau_s * mu_c**2) / (2 * one), 0.0)
    factor = Factor(Kmn @ (tau_new[:, None] * Kmn.T), Kmn @ nu_new)
    delta = None
    if sites is not None:
        dt, dn = tau_new - tau_s, nu_new - nu_s
        delta = Factor(Kmn @ (dt[:, None] * Kmn.T), Kmn @ dn)
    errors = float(np.sum(y * mu <= 0))
    m, q = p.Z.shape
    if not grad:
        zero = np.zeros((m, m))
        return ChunkResult(b, factor, float(log_z.sum()), np.zeros(m * q + 1 + q), np.zeros(m), zero, zero,
                           errors, delta), np.column_stack([tau_new, nu_new])
    # ∂ log Φ(z_i)/∂(k_i, d_i) with the cavity fixed: g_i = A_i m_c + B_i w_i, h_i (module docstring)
    r, z, s = t.ratio, t.z, t.scale
    A = np.where(ok, r * y / s, 0.0)
    h = np.where(ok, -r * z / (2 * s * s), 0.0)
    one_minus = np.where(ok, s2 * tau_c, 1.0)  # 1 − τ̃σ² = σ²τ_c
    alpha_i = (tau_s * mu - nu_s) / one_minus
    B = np.where(ok, A * alpha_i - r * z / (s * s * one_minus), 0.0)
    KTinvKmn = scipy.linalg.solve_triangular(source.LKT, V, lower=True, trans="T")
    KinvKmn = scipy.linalg.solve_triangular(source.LK, VK, lower=True, trans="T")
    G = np.outer(source.alpha, A) + KTinvKmn * B - 2 * KinvKmn * h  # ∂/∂K_mn (m, b)
    dZ, dvar, dls = kmn_backprop(G.T, np.asarray(X, dtype=float), p.inducing, Kmn.T)
    dvar = float(dvar) + float(np.sum(h))  # k_ii = σ² in d_i
    grad_kmn = np.concatenate([np.asarray(dZ).ravel(), [dvar], np.asarray(dls)])
    res = ChunkResult(b, factor, float(log_z.sum()), grad_kmn, KinvKmn @ A, Kmn @ (B[:, None] * Kmn.T),
                      Kmn @ (h[:, None] * Kmn.T), errors, delta)
    return res, np.column_stack([tau_new, nu_new])


def tied_gradient_pass(X, y, source: Posterior, q: Posterior, grad: bool = True):
    """SEP's and ADF's pass: sites t̃_i from the shared cavity ``source`` (SEP's q\\1, ADF's q) give the new
    factor and the evidence terms; the gradient parts are EP's formula at ``q`` with per-point cavities
    q / t̃_i, as if these sites were EP's (a point whose q / t̃_i is not a proper Gaussian, as ADF's
    over-confident sites can make, adds nothing to the gradient).

    Why not the paper's "gradient exactly as in EP" with the shared cavity: EP's formula is the gradient of
    its evidence because EP's energy is stationary in the sites at EP's fixed point. SEP's fixed point
    averages the sites' natural parameters, so its evidence is not stationary in the global factor and that
    formula is biased: on 2,000 house_8L rows (price in the top quarter, m = 50, σ² = 2, l = 2) it gave
    ∂/∂log σ² = 4.7 and ∂/∂log l₂ = 24.3 where finite differences of the evidence at the converged factor
    give 10.0 and 19.9, and Adam following it drifted to long lengthscales while the evidence fell (−604 →
    −657 nats over 200 iterations; test NLL 0.287 → 0.306) — the road to predicting the class prior. With
    the per-point cavities the same derivatives are 7.4 and 20.6, and the evidence climbs (−562 after 250
    iterations). Returns (ChunkResult, the sites (b, 2))."""
    p = source.params
    Kmn = kmn(p.inducing, X)
    res, sites = chunk_pass(X, y, source, None, 1.0, grad=False, Kmn=Kmn)
    if not grad:
        return res, sites
    # compared by value: scattered to the workers (m ≥ SCATTER_M) the two arrive as separate copies
    r = q.params
    if not (r.variance == p.variance and np.array_equal(r.lengthscales, p.lengthscales)
            and np.array_equal(r.Z, p.Z) and r.kernel == p.kernel):
        Kmn = kmn(r.inducing, X)
    g, _ = chunk_pass(X, y, q, sites, 1.0, grad=True, Kmn=Kmn)
    return ChunkResult(res.n, res.factor, res.log_z, g.grad_kmn, g.uA, g.PB, g.Ph, res.errors), sites


def assemble_gradient(q: Posterior, source: Posterior, total: ChunkResult) -> np.ndarray:
    """∂ log Z / ∂(Z, log σ², log l) from the chunks' summed parts: the prior term
    ½ K⁻¹(E_q[uuᵀ] − K)K⁻¹ = ½((K + T)⁻¹ + ααᵀ − K⁻¹) and the data terms through K_mm (with ``source`` the
    distribution the cavities came from), back-propagated to the parameters, plus the chunks' K_mn part."""
    p = q.params
    Kinv = q.inv_K()
    GK = 0.5 * (q.inv_KT() + np.outer(q.alpha, q.alpha) - Kinv)
    M = (-np.outer(source.alpha, total.uA) - source.inv_KT() @ total.PB @ Kinv + Kinv @ total.Ph @ Kinv)
    GK = GK + 0.5 * (M + M.T)
    dZ, dvar, dls = kmm_backprop(GK, p.inducing, q.K0, q.K)
    m, q_ = p.Z.shape
    g = total.grad_kmn.copy()
    g[:m * q_] += dZ.ravel()
    g[m * q_] += dvar
    g[m * q_ + 1:] += dls
    g[m * q_] *= p.variance  # to log σ²
    g[m * q_ + 1:] *= p.lengthscales  # to log l
    return g
