"""The GP log marginal likelihood log p(y|θ) = −½ log|K| − ½ yᵀK⁻¹y − (n/2) log 2π and its gradient
with respect to the log-parameters θ = [kernel log-params..., log noise].

* :func:`exact_log_marginal` — value and gradient by a dense Cholesky factorisation (small n only).
* :func:`log_marginal_gradient` — the unbiased stochastic gradient of Filippone & Engler (2015):

      ∂_j log p = −½ tr(K⁻¹ ∂_jK) + ½ yᵀK⁻¹ ∂_jK K⁻¹y
               ≈ −½ (1/N_r) Σ_i (K⁻¹r_i)ᵀ(∂_jK r_i) + ½ ŝ_Aᵀ ∂_jK ŝ_B,

  with Rademacher probes r_i (Hutchinson), every K⁻¹ by ULISSE (or CG), and ŝ_A, ŝ_B two independent
  unbiased estimates of K⁻¹y so that the quadratic form stays unbiased. Optionally a pivoted-Cholesky
  preconditioner P serves both the solves and, as a control variate, the trace:
  tr(K⁻¹∂K) = tr(P⁻¹∂K) [exact, Woodbury] + E[rᵀ(K⁻¹ − P⁻¹)∂K r].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..compute.backend import check_columns, like, namespace, require_float64, to_host
from ..compute.operator import KernelOperator, dense_covariance, single_threaded_blas
from ..compute.precision import rows_dtype_for
from ..compute.solvers import PivotedCholesky, cg, ulisse
from ..core.random import rademacher
from ..core.validation import check_positive, check_X, check_y
from ..model.kernels import Kernel

__all__ = ["exact_log_marginal", "log_marginal_gradient", "GradientEstimate", "rademacher",
           "max_exact_n", "SOLVERS", "single_precision_ok"]

SOLVERS = ("ulisse", "cg", "cg-ulisse")


def single_precision_ok(n: int, variance: float, noise: float) -> bool:
    """Whether a gradient of n rows at this signal variance and noise variance may be computed in single
    precision (``exact_log_marginal(single=True)``): n within the dense gradient's rows, and float32's
    rounding against K's smallest eigenvalue within the bound the float32 kernel-row cache keeps to,
    ε₃₂·n·variance/noise ≤ :data:`daskgp.compute.precision.FLOAT32_MAX_BOUND` (0.1). A float32 Cholesky and
    inverse are backward stable: the gradient's relative error is of order that bound, at most 0.1 and in
    practice far less (1e-4 to 1e-3 of the largest component on concrete, where the bound is 0.0015)."""
    dtype, _ = rows_dtype_for(n, math.log(variance), math.log(noise))  # the cache's rule, the same bound
    return n <= _DENSE_GRADIENT_MAX_N and dtype == "float32"


def max_exact_n(memory_bytes: float | None = None) -> int:
    """Largest n whose exact path fits: two n×n float64 matrices in half the available memory."""
    if memory_bytes is None:
        import psutil

        memory_bytes = psutil.virtual_memory().available
    return int(math.sqrt(0.5 * memory_bytes / (2 * 8)))


def exact_log_marginal(X, y, kernel: Kernel, noise: float, *, gradient: bool = True,
                       block_rows: int = 1024, max_n: int | None = None, single: bool = False):
    """Exact log p(y|θ) and, if ``gradient``, its gradient w.r.t. log θ (p,), by dense Cholesky.

    Memory: two n×n float64 matrices at a time (K and its factor, then L⁻¹ and K⁻¹); refused with a
    MemoryError above ``max_n`` (default: what fits in half the available memory). Time O(n³); above
    n = 8192 the LAPACK calls run on one thread (multithreaded OpenBLAS potrf segfaulted at n = 22,784).
    ``single``: K, its factor and inverse in float32 — 0.56-0.65x the time of a gradient at 1,000-2,000
    rows, relative errors of order 2⁻²⁴·n·variance/noise (:func:`single_precision_ok`; a LinAlgError where
    the float32 factorisation fails); for a gradient of n <= 4,096 rows only (HMC's inner force).
    Returns value (float) or (value, grad).
    """
    X = check_X(X)
    y = check_y(y, X.shape[0])
    noise = check_positive("noise", noise)
    kernel.check_dims(X.shape[1])
    n = X.shape[0]
    if single:
        if not gradient or n > _DENSE_GRADIENT_MAX_N:
            raise ValueError(f"single precision is for the gradient of n <= {_DENSE_GRADIENT_MAX_N} rows "
                             f"(got gradient={gradient}, n={n})")
        return _exact_dense(X, y, kernel, noise, np.float32)
    limit = max_n if max_n is not None else (n if n <= 4096 else max_exact_n())  # n ≤ 4096: < 300 MB
    if n > limit:
        raise MemoryError(f"exact Cholesky path refused for n={n}: it needs two {n}x{n} float64 matrices "
                          f"({2 * 8 * n * n / 2**30:.1f} GiB); the limit here is n={limit}. "
                          "Use log_marginal_gradient (iterative) instead.")
    # Multithreaded OpenBLAS potrf segfaulted here at n = 22,784 (numpy's and scipy's alike) and ran fine
    # on one thread: large factorisations run single-threaded.
    if n <= _SAFE_THREADED_N:
        return _exact(X, y, kernel, noise, gradient, block_rows)
    with single_threaded_blas():
        return _exact(X, y, kernel, noise, gradient, block_rows)


_SAFE_THREADED_N = 8192


def _exact(X, y, kernel, noise, gradient, block_rows):
    if X.shape[0] <= _DENSE_GRADIENT_MAX_N:
        return _exact_dense(X, y, kernel, noise, np.float64, gradient)
    return _exact_blocked(X, y, kernel, noise, gradient, block_rows)


# Up to this n the gradient is computed from whole n×n arrays (three of them: 400 MB at 4,096 rows), with the
# traces reduced to products of K⁻¹ with one derivative block: on concrete's 1,030 rows 4x faster than the
# blocked form, whose per-block kernel derivatives and mirrored inverse cost more than the factorisation.
_DENSE_GRADIENT_MAX_N = 4096


def _exact_dense(X, y, kernel, noise, dtype=np.float64, gradient=True):
    """(log p(y|θ), ∇ w.r.t. log θ) from whole n×n arrays of ``dtype`` (the value alone without
    ``gradient``: K and its factor, no inverse). With W = ααᵀ − K⁻¹ (α = K⁻¹y) and ∂_jK the
    derivative blocks, ∂_j log p = ½ Σ W ⊙ ∂_jK, and:

    * noise: ∂K = σ²I, so ½σ²·tr W = ½σ²(αᵀα − tr K⁻¹);
    * variance: ∂K = K − σ²I, so ½(tr WK − σ² tr W) = ½(yᵀα − n) − the noise's;
    * lengthscale j: ∂K = G ⊙ Δz_j² (G the kernel's derivative profile, Δz_j the scaled differences;
      isotropic: Σ_j Δz_j² = r²). The ααᵀ part is (α⊙z)ᵀG(α⊙z)-type products: for P = ααᵀ ⊙ G,
      Σ P ⊙ Δz_j² = 2 Σ_i z_ij² (P1)_i − 2 z_jᵀPz_j, with P1 = α ⊙ Gα and z_jᵀPz_j = (α⊙z_j)ᵀG(α⊙z_j). The
      K⁻¹ part reads only the lower triangle LAPACK's potri leaves (the upper one stays zero), so the
      inverse is never mirrored.

    K's factor and inverse in K's own memory (a symmetric C-ordered array is its own Fortran-ordered
    transpose: LAPACK works on it in place)."""
    n = X.shape[0]
    Z = np.ascontiguousarray(kernel.scale(X), dtype=np.float64)
    r2 = kernel.sqdist(Z, Z)  # in float64 either way: the distances' cancellation, not the profiles'
    if dtype != np.float64:
        r2, Z = r2.astype(dtype), Z.astype(dtype)
    f, g = kernel._profiles(np, r2, gradient)
    s2 = kernel.variance
    if gradient:
        G = f.copy() if g is f else g
        G *= s2
    K = f
    K *= s2
    K[np.diag_indices(n)] += noise
    Kf = K.T  # Fortran order, same memory
    potrf, potrs, potri = scipy.linalg.lapack.get_lapack_funcs(("potrf", "potrs", "potri"), (Kf,))
    L, info = potrf(Kf, lower=1, clean=1, overwrite_a=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"K is not positive definite at noise={noise:g}")
    a, info = potrs(L, y.astype(dtype), lower=1)  # α in K's precision for the n×n products below
    alpha = a.astype(np.float64)  # and in float64 for the vectors' sums
    logdet = float(np.log(np.diag(L).astype(np.float64)).sum())
    value = -0.5 * float(y @ alpha) - logdet - 0.5 * n * math.log(2 * math.pi)
    if not gradient:
        return value
    Kinv, info = potri(L, lower=1, overwrite_c=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"the inverse of K failed (info={info})")
    # Kinv (Fortran order) holds K⁻¹ in its lower triangle and zeros above: as a C-ordered array (its
    # transpose) the same numbers sit in the upper triangle; either way Σ_ij B_ij A_ij over it counts each
    # off-diagonal pair of the symmetric K⁻¹ once
    B = Kinv
    tr_inv = float(np.trace(B))
    g_noise = 0.5 * noise * (float(alpha @ alpha) - tr_inv)
    g_var = 0.5 * (float(y @ alpha) - n) - g_noise
    if not kernel.ard:
        GR = G
        GR *= r2  # G ⊙ r², in G's memory
        # Σ K⁻¹ ⊙ G r² = 2 Σ_triangle (G r² is 0 on the diagonal)
        # (row sums of n terms in K's precision, their total in float64)
        inv_part = 2.0 * float(np.einsum("ij,ij->i", B, GR).sum(dtype=np.float64))
        return value, np.array([g_var, 0.5 * (float(alpha @ (GR @ a)) - inv_part), g_noise])
    del r2
    d = Z.shape[1]
    AZ = a[:, None] * np.hstack([np.ones((n, 1), dtype=dtype), Z])  # [α, α⊙z_1, …, α⊙z_d]
    GAZ = G @ AZ
    rows_a = alpha * GAZ[:, 0]
    quad_a = np.einsum("ij,ij->j", AZ[:, 1:], GAZ[:, 1:])
    Pl = B
    Pl *= G  # (K⁻¹ ⊙ G) on one triangle, zeros on the other
    diag = np.diag(Pl).copy()
    rows_b = Pl.sum(axis=0) + Pl.sum(axis=1) - diag
    PZ = Pl @ Z
    quad_b = 2.0 * np.einsum("ij,ij->j", Z, PZ) - (Z**2).T @ diag
    rows, quad = rows_a - rows_b, quad_a - quad_b
    g_ell = [float((Z[:, j] ** 2) @ rows - quad[j]) for j in range(d)]
    return value, np.array([g_var, *g_ell, g_noise])


def _exact_blocked(X, y, kernel, noise, gradient, block_rows):
    n = X.shape[0]
    K = dense_covariance(X, kernel, noise)
    try:
        L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(f"K is not positive definite at noise={noise:g}") from None
    del K
    alpha = scipy.linalg.solve_triangular(L, y, lower=True)
    value = -0.5 * float(alpha @ alpha) - float(np.log(np.diag(L)).sum()) - 0.5 * n * math.log(2 * math.pi)
    if not gradient:
        return value
    alpha = scipy.linalg.solve_triangular(L, alpha, lower=True, trans="T")
    # K⁻¹ = L⁻ᵀ L⁻¹: triangular inverse in place, then a symmetric rank-n product (n³/3 flops each)
    Linv, info = scipy.linalg.lapack.dtrtri(L, lower=1, overwrite_c=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"triangular inverse failed (info={info})")
    del L
    Kinv = scipy.linalg.blas.dsyrk(1.0, Linv, trans=1, lower=1)  # lower triangle of Linvᵀ Linv
    del Linv
    for i0 in range(0, n, block_rows):  # mirror the lower triangle in place (no n×n temporaries)
        i1 = min(i0 + block_rows, n)
        Kinv[i0:i1, i1:] = Kinv[i1:, i0:i1].T
        D = np.tril(Kinv[i0:i1, i0:i1])
        Kinv[i0:i1, i0:i1] = D + np.tril(D, -1).T
    grad = np.zeros(kernel.n_params + 1)
    for i0 in range(0, n, block_rows):
        i1 = min(i0 + block_rows, n)
        W = np.outer(alpha[i0:i1], alpha) - Kinv[i0:i1]  # rows of ααᵀ − K⁻¹
        dK = np.asarray(kernel.gradients(X[i0:i1], X))
        grad[:-1] += 0.5 * np.einsum("pij,ij->p", dK, W)
        grad[-1] += 0.5 * noise * float(np.trace(W[:, i0:i1]))
    return value, grad


def target_like(y, op):
    """The targets y (n,) (or (n, 1)) as a float64 vector in the operator's namespace, finite."""
    if type(op.X) is np.ndarray:
        return check_y(to_host(y), op.n)
    if type(y) is np.ndarray or not hasattr(y, "shape"):
        return like(check_y(y, op.n), op.X)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != op.n:
        raise ValueError(f"y must have shape ({op.n},), got {tuple(y.shape)}")
    y, _ = check_columns(y, op.n, op.X, "y")
    return y[:, 0]


@dataclass
class GradientEstimate:
    """grad (p,) estimate of ∂ log p(y|θ)/∂ log θ; probes (n, N_r); warm_start (n, 1+N_r) CG iterates for
    [y, probes...] to pass as ``x0`` next time; cg_iterations (1+N_r,); n_products operator passes;
    trace_terms (p,) the estimates of tr(K⁻¹∂_jK); quad_terms (p,) of yᵀK⁻¹∂_jK K⁻¹y; trace_samples
    (p, N_r) the per-probe trace estimates whose mean is ``trace_terms``; converged: every column reached
    the solver's tolerance (ULISSE: its early-stop threshold) within ``max_iter`` — False means the estimate
    is the truncated iterate's, biased. Every numerical array is in the operator's namespace and on its
    device; the counters (cg_iterations) are numpy."""

    grad: np.ndarray
    param_names: list[str]
    probes: np.ndarray
    warm_start: np.ndarray
    cg_iterations: np.ndarray
    n_products: int
    trace_terms: np.ndarray
    quad_terms: np.ndarray
    trace_samples: np.ndarray | None = None
    converged: bool = True

    @property
    def noise_cov(self) -> np.ndarray | None:
        """(p, p) unbiased estimate, from this one gradient's probes, of the covariance of ``grad`` over
        the probes: ¼·Cov(per-probe trace terms)/N_r (the trace term carries the probe noise; None with
        fewer than 2 probes). What a sampler subtracts from its injected noise (Ahn et al. 2012)."""
        if self.trace_samples is None or self.trace_samples.shape[1] < 2:
            return None
        t = self.trace_samples
        if type(t) is np.ndarray:
            return 0.25 * np.atleast_2d(np.cov(t)) / t.shape[1]
        xp = namespace(t)
        tc = t - xp.mean(t, axis=1, keepdims=True)
        return 0.25 * (tc @ tc.T) / ((t.shape[1] - 1) * t.shape[1])


def log_marginal_gradient(op: KernelOperator, y, *, n_probes: int = 4, solver: str = "ulisse",
                          probes=None, x0=None, rng=None, es_tol: float = 1e-2, tol: float = 1e-6,
                          mean_tol: float | None = None, beta: float = 1.0, max_iter: int | None = None,
                          precond=None, precond_rank: int = 100, control_variate: bool = False,
                          roulette: str = "increment", callback=None) -> GradientEstimate:
    """Unbiased stochastic gradient of log p(y|θ) w.r.t. log θ at the operator's current θ.

    Parameters
    ----------
    op : the kernel operator (θ = ``op.log_params``); y (n,) targets.
    n_probes : N_r Hutchinson probes (ignored when ``probes`` (n, N_r) is given — keep them fixed for R
        iterations as in the paper); x0 (n, 1+N_r) warm start for [y, probes] (``.warm_start``).
    solver : 'ulisse' (unbiased early stop, es_tol / beta / roulette, see :func:`daskgp.ulisse`), 'cg'
        (run to ``tol``) or 'cg-ulisse' (K⁻¹y by CG to ``tol``, the probes by ULISSE: the early stop where
        its noise is small beside the probes', see the module).
    mean_tol : with 'cg' and 'cg-ulisse', K⁻¹y's own relative residual (None: ``tol``). The quadratic
        form's error is then a deterministic bias of order mean_tol: measured on house_8L at its mode and
        half a posterior sd away, at 1e-4 at most 0.9 % of the gradient's 32-probe noise sd on 8,192 rows
        and 0.4 % on 22,784 (a shift of at most 0.003 posterior sd in whitened units), at 1e-3 up to 7 %.
    precond : None, 'pivchol' (rank ``precond_rank``) or a :class:`PivotedCholesky` built for this θ.
    control_variate : use the preconditioner's exact tr(P⁻¹∂P) as a control variate for the trace
        (Nyström derivative with the pivots fixed; needs precond).
    callback : called with the solver's iteration count after each iteration (a heartbeat).

    Notes
    -----

    Namespaces: the operator's X decides (numpy, cupy, array_api_strict, float64 only); y, probes and x0 of
    another namespace are converted to it once, and every array of the result is in it. Probes drawn here
    come from the numpy generator ``rng`` and are uploaded, so a seed gives the same probes on any device.
    """
    require_float64(op.X, "X", "the stochastic gradient")
    y = target_like(y, op)
    xp = namespace(op.X)
    rng = np.random.default_rng(rng)
    if probes is None:
        if n_probes < 1:
            raise ValueError(f"n_probes must be >= 1, got {n_probes}")
        probes = like(rademacher(op.n, n_probes, rng), op.X)
    else:
        if getattr(probes, "ndim", np.ndim(probes)) != 2:
            raise ValueError(f"probes must have shape ({op.n}, N_r), got {np.shape(to_host(probes))}")
        probes, _ = check_columns(probes, op.n, op.X, "probes")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if precond == "pivchol":
        precond = PivotedCholesky(op, rank=precond_rank)
    elif precond is not None and not isinstance(precond, PivotedCholesky):
        raise ValueError("precond must be None, 'pivchol' or a PivotedCholesky")
    if control_variate and precond is None:
        raise ValueError("control_variate=True needs a preconditioner (precond='pivchol')")
    nr = probes.shape[1]
    B = xp.concat([y[:, None], probes], axis=1)
    if x0 is not None:
        x0, _ = check_columns(x0, op.n, op.X, "x0")

    if solver == "ulisse":
        n_est = np.ones(1 + nr, dtype=np.int64)
        n_est[0] = 2
        res = ulisse(op, B, x0, es_tol=es_tol, tol=tol, beta=beta, n_estimates=n_est, rng=rng,
                     max_iter=max_iter, precond=precond, roulette=roulette, callback=callback)
        s_a, s_b = res.estimates[0, :, 0], res.estimates[1, :, 0]
        Kinv_r = res.estimates[0, :, 1:]
        converged = bool(np.all(res.es_iteration >= 0))
    elif solver == "cg-ulisse":
        # K⁻¹y by CG to tol (deterministic: one solve serves both sides of the quadratic form, unbiased to
        # the tolerance), the probes' solves by ULISSE: the early stop only truncates the trace term, whose
        # error the roulette keeps unbiased, while the quadratic form (no probe noise to hide a bias in)
        # stays exact
        es = np.full(1 + nr, float(es_tol))
        es[0] = np.inf
        res = ulisse(op, B, x0, es_tol=es, tol=_column_tols(tol, mean_tol, nr), beta=beta, n_estimates=1,
                     rng=rng, max_iter=max_iter, precond=precond, roulette=roulette, callback=callback)
        s_a = s_b = res.estimates[0, :, 0]
        Kinv_r = res.estimates[0, :, 1:]
        converged = bool(res.converged[0] and np.all(res.es_iteration[1:] >= 0))
    else:
        res = cg(op, B, x0, tol=_column_tols(tol, mean_tol, nr), max_iter=max_iter, precond=precond,
                 callback=callback)
        s_a = s_b = res.x[:, 0]
        Kinv_r = res.x[:, 1:]
        converged = bool(np.all(res.converged))

    _, dKV = op.matmul_grads(xp.concat([s_b[:, None], probes], axis=1))  # (p, n, 1 + N_r)
    quad = dKV[:, :, 0] @ s_a
    if type(dKV) is np.ndarray:
        samples = np.einsum("ik,pik->pk", Kinv_r, dKV[:, :, 1:])  # one trace estimate per probe (p, N_r)
    else:
        samples = xp.sum(Kinv_r[None, :, :] * dKV[:, :, 1:], axis=1)
    if control_variate:
        # tr(K⁻¹∂K) = tr(P⁻¹∂P) + E[rᵀ(K⁻¹∂K − P⁻¹∂P)r]: exact first term, Hutchinson on a small residual
        cv = precond.derivative_control(op)
        samples = samples + cv.traces[:, None] - cv.quad(probes)
    trace = xp.mean(samples, axis=1)
    grad = -0.5 * trace + 0.5 * quad
    if not bool(xp.all(xp.isfinite(grad))):
        raise FloatingPointError(f"non-finite gradient {to_host(grad).tolist()} "
                                 f"at θ={op.log_params.tolist()}")
    return GradientEstimate(grad=grad, param_names=op.param_names, probes=probes, warm_start=res.x,
                            cg_iterations=res.iterations, n_products=res.n_products + 1,
                            trace_terms=trace, quad_terms=quad, trace_samples=samples, converged=converged)


def _column_tols(tol: float, mean_tol: float | None, n_probes: int) -> np.ndarray:
    """(1 + N_r,) relative residuals for [y, probes]: K⁻¹y's ``mean_tol`` (or ``tol``), then the probes'."""
    tols = np.full(1 + n_probes, float(tol))
    if mean_tol is not None:
        tols[0] = check_positive("mean_tol", mean_tol)
    return tols
