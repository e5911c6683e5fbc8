"""Inducing-point features for any stationary kernel: K_mm = K(Z, Z), K_mn = K(Z, X) and their adjoints
(reverse-mode derivatives) with respect to the inducing inputs Z, the kernel variance σ² and the ARD
lengthscales l.

Every kernel of :mod:`daskgp.model.kernels` has the form k(x, z) = σ²·f(r²), r² = Σ_j ((x_j − z_j)/l_j)², and
provides the block G = σ²·g(r²) with ∂k/∂log l_j = G·Δ_j², Δ_j = (x_j − z_j)/l_j. Since r² is symmetric in
(x, z) and ∂r²/∂z_j = −2(x_j − z_j)/l_j², the same block gives every derivative this module needs: for an
upstream gradient Ḡ = ∂F/∂K (same shape as K) and W = Ḡ ⊙ G,

    ∂F/∂z_mj = Σ_b W_bm (x_bj − z_mj)/l_j²,   ∂F/∂l_j = Σ_bm W_bm (x_bj − z_mj)²/l_j³,   ∂F/∂σ² = Σ Ḡ ⊙ K/σ².

For the RBF, G = K, and these are the familiar RBF-ARD formulas. The Matérn kernels' G is finite at r = 0
(3σ²e^{−√3 r} for ν = 3/2, (5/3)σ²(1 + √5 r)e^{−√5 r} for ν = 5/2), so inducing inputs may coincide with
data points.

Units: the caller's (the estimators standardise first). Array code follows the arrays' namespace
(``array_api_compat``): K_mn and its adjoint are computed where the chunk lives (numpy or cupy).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from functools import lru_cache

import numpy as np
from array_api_compat import array_namespace

from ..compute.backend import like, to_host
from ..model.kernels import KERNELS, Kernel, ard_kernel, kernel_name
from ..model.params import Block, Parameters, Structure

__all__ = ["JITTER", "CLASSIFIER_JITTER", "GlobalParams", "kernel_name", "kernel_of", "kmm", "kmn",
           "kmm_backprop", "kmn_backprop", "cross_backprop", "vector_bounds",
           "global_blocks"]

# K_mm's jitter, relative to the kernel variance σ², for the regression bound (SGPR, the GPLVM) and ADVGP:
# keeps K_mm's Cholesky stable when inducing inputs cluster, and is small enough to match libraries that add
# none (GPflow's SGPR adds 1e-6 absolute) to their printed digits.
JITTER = 1e-6
# The classifier's (EP / SEP / ADF) jitter: 10× the regression bound's. Inducing inputs crowded in a
# low-dimensional input space make K_mm nearly singular; the evidence gradient through K⁻¹ then reaches the
# hundreds or thousands and Adam's steps on Z go astray. Breast cancer's two features "worst radius" and
# "worst concave points", 250 iterations, 3 splits: at 1e-6 SEP with m = 30 ended at test NLL 0.36 / 0.16 /
# 0.40 against 0.14 / 0.17 / 0.15 with m = 10 (largest gradient norms 453–2,664); at 1e-4 at 0.130 / 0.158 /
# 0.152 against 0.138 / 0.160 / 0.150, EP likewise; at 1e-5 (benchmarks/gpc.py's "crowded" part) SEP at
# 0.130 / 0.158 / 0.153 against 0.138 / 0.163 / 0.160, EP at 0.130 / 0.182 / 0.152 against 0.138 / 0.159 /
# 0.151 (its second split worse at m = 30).
# 1e-4 cost SEP on the hourly weather rows (rain / none, 9 features, kernel variance ≈ 20): test NLL 0.100
# against an exact Laplace classifier's 0.086 (tests/gpc/test_binary_sets.py), where 1e-5 keeps it level;
# the jitter is prior variance added to every u, which a classifier with a large σ² feels. The regression
# bound needs less: its K_mm enters through K_mm + β·D, which the data regularise.
# Later finding (issue 32): most of that derailment came from the K_mm derivative, which read the rows of
# ∂F/∂K_mm while the round-off of a nearly singular K_mm's inverses made it asymmetric. With its symmetric
# part taken (:func:`kmm_backprop`) SEP with m = 30 on the same split ended at test NLL 0.150 / 0.153 / 0.151
# at jitters 1e-6 / 1e-5 / 1e-7, level with m = 10 (0.152–0.158). The jitter stays 1e-5, the value the
# other data sets were measured at.
CLASSIFIER_JITTER = 1e-5


# Box bounds of the unconstrained vector (standardised units): σ² in [1e-6, 1e6], lengthscales in
# [1e-4, 1e13], noise variance σ²_n in [1e-8, 150]. Far outside any sensible fit, they keep a line search on
# degenerate data from overflowing exp() inside a worker. The lengthscales' ceiling is far out because ARD
# switches a GPLVM's unneeded latent dimensions off by sending theirs towards infinity. Z is free.
_LOG_VARIANCE, _LOG_LENGTHSCALE, _LOG_NOISE = (-13.8, 13.8), (-9.2, 30.0), (-18.4, 5.0)


@lru_cache(maxsize=64)
def global_blocks(m: int, q: int, noise: bool = True, scalar_exp: str = "math") -> tuple[Block, ...]:
    """The blocks of an inducing-point model's kernel part, in the order every sparse family stores them:
    Z (m, q), log σ², log l (q,) and, with ``noise``, log σ²_n (a classifier has no Gaussian noise).
    ``scalar_exp``: how σ² and σ²_n are read back (:class:`daskgp.model.params.Block`; SGPR's and the
    GPLVM's :class:`GlobalParams` 'numpy', as since 0.3)."""
    blocks = (Block("Z", (m, q)), Block("variance", (), "log", _LOG_VARIANCE, scalar_exp),
              Block("lengthscales", (q,), "log", _LOG_LENGTHSCALE))
    return blocks + ((Block("noise", (), "log", _LOG_NOISE, scalar_exp),) if noise else ())


@dataclass(frozen=True)
class GlobalParams(Parameters):
    """The global parameters of an inducing-point model: inducing inputs Z (m, q), kernel variance σ²
    (y units²), ARD lengthscales l (q,) (x units; a scalar is broadcast to every input dimension), the noise
    variance σ²_n (y units², keyword-only: the exact GP's and the likelihood's parameter; the bounds are
    written in its precision :attr:`beta` = 1/σ²_n) and the kernel's registry name
    (``daskgp.model.kernels.KERNELS``: 'rbf', 'matern32', 'matern52'). Unconstrained vector
    (:meth:`structure`, :mod:`daskgp.model.params`): Z, log σ², log l, log σ²_n; the kernel's name is
    structure, not a parameter. (daskgp 0.3 held the precision β here, the fourth positional field;
    keyword-only, an old positional call fails instead of changing meaning.)"""

    Z: np.ndarray
    variance: float
    lengthscales: np.ndarray
    _: KW_ONLY
    noise: float
    kernel: str = "rbf"

    def __post_init__(self):
        Z = np.asarray(self.Z, dtype=float)
        if Z.ndim != 2:
            raise ValueError(f"Z must be (m, q), got shape {Z.shape}")
        ls = np.asarray(self.lengthscales, dtype=float)
        if ls.ndim > 1 or ls.size not in (1, Z.shape[1]):
            raise ValueError(f"lengthscales must be a scalar or ({Z.shape[1]},), got shape {ls.shape}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {self.kernel!r}")
        # frozen: the normalised fields are set once, here
        object.__setattr__(self, "Z", Z)
        object.__setattr__(self, "variance", float(self.variance))
        object.__setattr__(self, "lengthscales", np.broadcast_to(ls, (Z.shape[1],)).copy())
        object.__setattr__(self, "noise", float(self.noise))

    def structure(self) -> Structure:
        return Structure(global_blocks(*self.Z.shape, scalar_exp="numpy"))

    @property
    def m(self) -> int:
        return self.Z.shape[0]

    @property
    def beta(self) -> float:
        """The noise precision 1/σ²_n (1/y units²), in which the bounds are written."""
        return 1.0 / self.noise

    @classmethod
    def from_vector(cls, v, m: int, q: int, kernel: str = "rbf") -> GlobalParams:
        return cls(**Structure(global_blocks(m, q, scalar_exp="numpy")).unflatten(v), kernel=kernel)

    def grad_vector(self, dZ, dvar, dls, dbeta) -> np.ndarray:
        """Chain rule to the unconstrained vector from gradients in natural parameters (the noise's as
        ∂/∂β, the precision the bounds are written in: ∂/∂log σ²_n = −β ∂/∂β)."""
        return np.concatenate([np.asarray(dZ).ravel(), [dvar * self.variance],
                               np.asarray(dls) * self.lengthscales, [-dbeta * self.beta]])


def vector_bounds(m: int, q: int) -> np.ndarray:
    """(m·q + q + 2, 2) L-BFGS-B bounds in the order of :meth:`GlobalParams.to_vector` (every family that
    optimises the global parameters by L-BFGS-B: SGPR's and the GPLVM's fits, ADVGP's subset start)."""
    return Structure(global_blocks(m, q)).bounds()


def kernel_of(name: str, variance: float, lengthscales) -> Kernel:
    """The ARD kernel object of registry name ``name`` (see :data:`daskgp.model.kernels.KERNELS`), its
    lengthscales brought to the host first (a cupy array's)."""
    return ard_kernel(name, variance, to_host(lengthscales))


def _kernel(theta) -> Kernel:
    return kernel_of(theta.kernel, theta.variance, theta.lengthscales)


def kmm(theta, jitter: float = JITTER, ref=None) -> tuple[np.ndarray, np.ndarray]:
    """(K(Z, Z), K(Z, Z) + jitter·σ²·I), both (m, m): the inducing covariance without and with the jitter
    (relative to σ²) that every Cholesky of it uses; in the namespace of array ``ref`` when given.
    ``theta``: anything with Z, variance, lengthscales and kernel (:class:`GlobalParams`)."""
    Z = theta.Z if ref is None else like(theta.Z, ref)
    K0 = _kernel(theta)(Z, Z)
    eye = np.eye(theta.Z.shape[0]) if ref is None else like(np.eye(theta.Z.shape[0]), ref)
    return K0, K0 + jitter * theta.variance * eye


def kmn(theta, X):
    """K(Z, X) (m, b) in X's namespace and on its device."""
    return _kernel(theta)(like(to_host(theta.Z), X) if type(X) is not np.ndarray else theta.Z, X)


def cross_backprop(Gbar, X1, X2, theta, K=None):
    """For F depending on K = K(X1, X2) (b1, b2) through Ḡ = ∂F/∂K: (∂F/∂X2 (b2, q), ∂F/∂σ², ∂F/∂l (q,)).
    ∂F/∂X1 is the same call with the arguments swapped. ``K``: the block when the caller has it (for the
    RBF it is G as well, so nothing is evaluated again; the Matérn kernels evaluate G here)."""
    kern = _kernel(theta)
    xp = array_namespace(Gbar, X1)
    ls = like(np.asarray(theta.lengthscales, dtype=np.float64), X1)
    if K is not None and kern.g_is_k:  # the RBF: the cached block is G too (the map's one kernel pass)
        G = K
    else:
        K_, G, _ = kern.blocks_from_scaled(X1 / ls, X2 / ls, need_g=True)
        K = K_ if K is None else K
    W = Gbar * G
    cs = xp.sum(W, axis=0)  # (b2,)
    WX = W.T @ X1  # (b2, q)
    d2 = (WX - cs[:, None] * X2) / ls**2
    dls = (xp.sum(W, axis=1) @ (X1 * X1) - 2 * xp.sum(WX * X2, axis=0) + cs @ (X2 * X2)) / ls**3
    dvar = xp.sum(W if G is K else Gbar * K) / theta.variance  # the RBF's W is already Ḡ ⊙ K
    return d2, dvar, dls


def kmn_backprop(Gbar, X, theta, Knm=None):
    """Given Ḡ = ∂F/∂K_nm (b, m) for K_nm = K(X, Z): (∂F/∂Z (m, q), ∂F/∂σ² (0-d), ∂F/∂l (q,)) in X's
    namespace (summed on the workers, where the chunk lives)."""
    Z = theta.Z if type(X) is np.ndarray else like(to_host(theta.Z), X)
    return cross_backprop(Gbar, X, Z, theta, Knm)


def kmm_backprop(GK, theta, K0=None, Kmm=None,
                 jitter: float = JITTER) -> tuple[np.ndarray, float, np.ndarray]:
    """Given GK = ∂F/∂K_mm (m, m) symmetric, with K_mm = K0 + jitter·σ²·I (:func:`kmm`), the derivatives of F
    through K_mm w.r.t. Z (m, q), σ² and the lengthscales (q,): (dZ, dvar, dls)."""
    numpy = type(GK) is np.ndarray
    if K0 is None or Kmm is None:
        K0, Kmm = kmm(theta, jitter, ref=None if numpy else GK)
    xp = array_namespace(GK)
    Z = theta.Z if numpy else like(theta.Z, GK)
    # K_mm is symmetric, so only GK's symmetric part acts on it; taking it here keeps the round-off of an
    # ill-conditioned K_mm's inverses (which make GK slightly asymmetric) out of the derivative
    GK = 0.5 * (GK + GK.T)
    # both arguments are Z: by the symmetry of GK and k the first argument's share equals the second's; the
    # lengthscale derivative already sums over every pair
    dZ, _, dls = cross_backprop(GK, Z, Z, theta, K0)
    dvar = float(xp.sum(GK * Kmm)) / theta.variance  # K_mm and its jitter are both proportional to σ²
    return 2 * dZ, dvar, dls
