"""Iterative solvers for K S = B with many right-hand sides sharing every operator pass.

* :func:`cg` — batched (preconditioned) conjugate gradients: each column has its own step sizes and stops on
  its own relative residual ‖b − K s‖ / ‖b‖ ≤ tol; only the still-active columns are sent to the operator.
* :func:`ulisse` — the Unbiased LInear System SolvEr of Filippone & Engler (2015). CG is run to an early-stop
  threshold ``es_tol``; every further increment δ_i (i = 1, 2, … after the threshold) is kept with
  probability p_i = exp(−β·i) and, if kept, reweighted by 1 / (p_1···p_i); the first rejection stops that
  estimate. Its expectation is the full CG solution (to ``tol``). Several estimates per column share one CG
  run and differ only in their uniform draws, which makes them independent given the right-hand side.
* :class:`PivotedCholesky` — the rank-r preconditioner P = L Lᵀ + σ² I from a greedy pivoted Cholesky of the
  kernel, applied with the Woodbury identity in O(n r).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from ..core.validation import check_positive, check_rhs

__all__ = ["CGResult", "UlisseResult", "cg", "ulisse", "PivotedCholesky", "NystromDerivative"]


@dataclass
class CGResult:
    """x (n, k) solutions; iterations (k,) CG steps per column; converged (k,) reached ``tol``;
    residuals (iterations+1, k) relative residual per step (NaN once a column has stopped);
    n_products: operator passes used."""

    x: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    residuals: np.ndarray
    n_products: int


@dataclass
class UlisseResult(CGResult):
    """Adds estimates (E, n, k): E unbiased estimates of the CG solution per column (columns with fewer
    estimates repeat NaN beyond their count); es_iteration (k,) the step at which ``es_tol`` was reached
    (-1 if never); ``x`` is the plain CG iterate where the column stopped (a good warm start)."""

    estimates: np.ndarray = field(default=None)
    es_iteration: np.ndarray = field(default=None)


def _as_operator(A):
    if hasattr(A, "matmul"):
        return A.matmul, A.shape[0]
    A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix or an operator with .matmul, got shape {A.shape}")
    return (lambda V: A @ V), A.shape[0]


def cg(A, B, x0=None, *, tol: float = 1e-8, max_iter: int | None = None, precond=None) -> CGResult:
    """Solve A X = B for symmetric positive definite A (an operator with ``.matmul`` or a dense matrix).

    B (n,) or (n, k); x0 warm start of the same shape; precond: an object with ``.solve(R)`` ≈ A⁻¹R.
    Returns a :class:`CGResult` whose ``x`` has B's shape.
    """
    return _pcg(A, B, x0, tol=tol, max_iter=max_iter, precond=precond, es_tol=None, beta=None,
                n_estimates=None, rng=None)


def ulisse(A, B, x0=None, *, es_tol: float = 1e-2, tol: float = 1e-6, beta: float = 1.0,
           n_estimates=1, rng=None, max_iter: int | None = None, precond=None) -> UlisseResult:
    """ULISSE: unbiased estimates of the CG solution of A X = B from an early-stopped CG run.

    es_tol : early-stop relative residual; tol : the full CG tolerance whose solution is estimated;
    beta : decay of the continuation probability p_i = exp(−β i); n_estimates : estimates per column
    (int or (k,) ints, e.g. 2 for the column whose quadratic form needs two independent estimates);
    rng : numpy Generator or seed (the uniform draws).
    """
    if not (es_tol > tol > 0):
        raise ValueError(f"need es_tol > tol > 0, got es_tol={es_tol}, tol={tol}")
    check_positive("beta", beta)
    return _pcg(A, B, x0, tol=tol, max_iter=max_iter, precond=precond, es_tol=es_tol, beta=beta,
                n_estimates=n_estimates, rng=np.random.default_rng(rng))


def _pcg(A, B, x0, *, tol, max_iter, precond, es_tol, beta, n_estimates, rng):
    matmul, n = _as_operator(A)
    B2, was_1d = check_rhs(B, n, "B")
    B2 = B2.astype(np.float64)
    k = B2.shape[1]
    check_positive("tol", tol)
    max_iter = int(max_iter) if max_iter is not None else 10 * n
    if x0 is None:
        x = np.zeros_like(B2)
        r = B2.copy()
        n_products = 0
    else:
        x, _ = check_rhs(x0, n, "x0")
        x = np.array(x, dtype=np.float64)
        if x.shape != B2.shape:
            raise ValueError(f"x0 has shape {x.shape}, B has {B2.shape}")
        r = B2 - matmul(x)
        n_products = 1
    bnorm = np.linalg.norm(B2, axis=0)
    zero = bnorm == 0  # b = 0: the solution is 0, whatever the warm start
    x[:, zero], r[:, zero], bnorm[zero] = 0.0, 0.0, 1.0
    res = np.linalg.norm(r, axis=0) / bnorm
    history = [res.copy()]
    iterations = np.zeros(k, dtype=np.int64)
    converged = res <= tol
    active = ~converged

    use_ulisse = es_tol is not None
    if use_ulisse:
        n_est = np.broadcast_to(np.asarray(n_estimates, dtype=np.int64), (k,)).copy()
        if np.any(n_est < 1):
            raise ValueError("n_estimates must be >= 1")
        E = int(n_est.max())
        est = np.full((E, n, k), np.nan)
        weight = np.ones((E, k))
        alive = np.zeros((E, k), dtype=bool)
        started = np.zeros(k, dtype=bool)
        since = np.zeros(k, dtype=np.int64)  # steps taken after the early-stop threshold
        es_iteration = np.full(k, -1, dtype=np.int64)

        def start(cols):
            for c in cols:
                est[: n_est[c], :, c] = x[:, c]
                alive[: n_est[c], c] = True
                started[c] = True
                es_iteration[c] = iterations[c]

        start(np.flatnonzero(res <= es_tol))
        active &= ~started

    z = precond.solve(r) if precond is not None else r
    p = z.copy()
    rz = np.einsum("ij,ij->j", r, z)
    it = 0
    while np.any(active) and it < max_iter:
        it += 1
        cols = np.flatnonzero(active)
        Ap = matmul(p[:, cols])
        n_products += 1
        pAp = np.einsum("ij,ij->j", p[:, cols], Ap)
        if np.any(pAp <= 0) or not np.all(np.isfinite(pAp)):
            raise FloatingPointError("CG breakdown: the operator is not positive definite in floating point "
                                     f"(pᵀAp = {pAp.min():.3g}); increase the noise variance or use float64")
        alpha = rz[cols] / pAp
        delta = p[:, cols] * alpha
        x[:, cols] += delta
        r[:, cols] -= Ap * alpha
        iterations[cols] += 1
        res_c = np.linalg.norm(r[:, cols], axis=0) / bnorm[cols]
        res[cols] = res_c
        newly_converged = res_c <= tol
        if use_ulisse:
            pre = ~started[cols]
            on = cols[~pre]  # columns already past the threshold: Russian roulette on this increment
            if on.size:
                since[on] += 1
                prob = np.exp(-beta * since[on])
                u = rng.uniform(size=(E, on.size))
                keep = alive[:, on] & (u < prob)
                weight[:, on] = np.where(keep, weight[:, on] / prob, weight[:, on])
                alive[:, on] = keep
                d_on = delta[:, ~pre]
                for e in range(E):
                    kc = np.flatnonzero(keep[e])
                    if kc.size:
                        est[e][:, on[kc]] += d_on[:, kc] * weight[e, on[kc]]
            start(cols[pre & (res_c <= es_tol)])
            done = newly_converged | (started[cols] & ~alive[:, cols].any(axis=0))
        else:
            done = newly_converged
        converged[cols] |= newly_converged
        active[cols[done]] = False
        hist = np.full(k, np.nan)
        hist[cols] = res_c
        history.append(hist)
        if not np.any(active):
            break
        zc = precond.solve(r[:, cols]) if precond is not None else r[:, cols]
        rz_new = np.einsum("ij,ij->j", r[:, cols], zc)
        p[:, cols] = zc + p[:, cols] * (rz_new / rz[cols])
        rz[cols] = rz_new

    residuals = np.vstack(history)
    if use_ulisse:
        # columns that hit max_iter before the threshold: the CG iterate is the (deterministic) answer
        for c in np.flatnonzero(~started):
            est[: n_est[c], :, c] = x[:, c]
            es_iteration[c] = -1
        out = UlisseResult(x=x[:, 0] if was_1d else x, iterations=iterations, converged=converged,
                           residuals=residuals, n_products=n_products,
                           estimates=est[:, :, 0] if was_1d else est, es_iteration=es_iteration)
        return out
    return CGResult(x=x[:, 0] if was_1d else x, iterations=iterations, converged=converged,
                    residuals=residuals, n_products=n_products)


def _pivot_cholesky_factor(kernel, Xs) -> np.ndarray:
    """Lower Cholesky factor of k(X_S, X_S), with a 1e-10·s2 jitter against round-off."""
    Kss = np.asarray(kernel(Xs, Xs)) + 1e-10 * kernel.variance * np.eye(Xs.shape[0])
    return np.linalg.cholesky(Kss)


class PivotedCholesky:
    """Preconditioner P = L Lᵀ + σ² I, L (n, r) from a greedy pivoted Cholesky of k(X, X) (Harbrecht et al.
    2012; the preconditioner of Gardner et al. 2018), applied with the Woodbury identity:
    P⁻¹R = (R − L C Lᵀ R) / σ², C = (σ² I_r + LᵀL)⁻¹.

    Pivots are taken ``block`` at a time (the largest residual diagonals, then LAPACK's pivoted Cholesky on
    that block drops near-duplicates), so the O(n r²) work is matrix-matrix products rather than r
    matrix-vector products.

    op : a :class:`daskgp.compute.operator.KernelOperator` (its kernel, X and noise);
    rank : r (capped at n/2);
    rel_tol : stop when the largest remaining diagonal falls below rel_tol · s2.
    """

    def __init__(self, op, rank: int = 1000, rel_tol: float = 1e-8, block: int = 64):
        if rank < 1:
            raise ValueError(f"rank must be >= 1, got {rank}")
        X, kernel = op.X, op.kernel
        n = X.shape[0]
        rank = max(1, min(rank, n // 2))
        d = np.asarray(kernel.diag(X), dtype=np.float64).copy()
        stop = rel_tol * d.max()
        Lt = np.zeros((rank, n))  # Lᵀ, so that the growing factor is a contiguous block of rows
        pivots: list[int] = []
        m = 0
        while m < rank and d.max() > stop:
            b = min(block, rank - m, int(np.count_nonzero(d > stop)))
            S = np.argpartition(-d, b - 1)[:b]
            G = op.kernel_rows(S)
            G -= Lt[:m, S].T @ Lt[:m]  # residual rows (b, n)
            c, piv, rk, info = scipy.linalg.lapack.dpstrf(G[:, S], tol=stop, lower=1)
            if rk == 0:
                break
            piv = piv[:rk] - 1
            new = scipy.linalg.solve_triangular(np.tril(c[:rk, :rk]), G[piv], lower=True)  # (rk, n)
            Lt[m:m + rk] = new
            d -= np.einsum("ij,ij->j", new, new)
            d[S[piv]] = 0.0
            np.maximum(d, 0.0, out=d)
            pivots.extend(S[piv].tolist())
            m += rk
        self._set(op, np.asarray(pivots, dtype=np.intp), Lt[:m].T, float(d.sum()))

    def _set(self, op, pivots, L, residual_trace):
        self.pivots, self.L, self.noise, self.rank = pivots, L, op.noise, L.shape[1]
        inner = self.noise * np.eye(self.rank) + L.T @ L
        self._chol = scipy.linalg.cho_factor(inner, lower=True)
        self.residual_trace = residual_trace  # tr(k(X,X) − L Lᵀ): how much the low rank misses

    @classmethod
    def from_pivots(cls, op, pivots) -> PivotedCholesky:
        """The same preconditioner at the operator's current θ for a given pivot set (the Nyström
        approximation K_nS K_SS⁻¹ K_Sn + σ²I): O(n m²) matrix products, no pivot search. A sampler keeps the
        pivots for several iterations and refreshes L when θ moves."""
        X, kernel = op.X, op.kernel
        pivots = np.asarray(pivots, dtype=np.intp)
        Ls = _pivot_cholesky_factor(kernel, X[pivots])
        # L = K_nS Ls⁻ᵀ in place: K_Sn (C order) is K_nS in Fortran order, what dtrsm works on
        L = scipy.linalg.blas.dtrsm(1.0, Ls, op.kernel_rows(pivots).T, side=1, lower=1, trans_a=1,
                                    overwrite_b=1)
        self = cls.__new__(cls)
        resid = float(np.sum(np.asarray(kernel.diag(X))) - np.einsum("ij,ij->", L, L))
        self._set(op, pivots, L, max(resid, 0.0))
        return self

    def solve(self, R) -> np.ndarray:
        """P⁻¹ R for R (n,) or (n, k)."""
        return (R - self.L @ scipy.linalg.cho_solve(self._chol, self.L.T @ R)) / self.noise

    def logdet(self) -> float:
        """log |P| = log|σ² I_r + LᵀL| + (n − r) log σ²."""
        n = self.L.shape[0]
        return 2.0 * float(np.log(np.diag(self._chol[0])).sum()) + (n - self.rank) * math.log(self.noise)

    def derivative_control(self, op) -> NystromDerivative:
        """∂P/∂log θ_j for the operator's θ with the pivots held fixed (see :class:`NystromDerivative`)."""
        return NystromDerivative(self, op)


class NystromDerivative:
    """Derivatives of the preconditioner P(θ) = Q + σ²I, Q = K_nS K_SS⁻¹ K_Sn (the pivoted Cholesky with
    pivot set S is this Nyström approximation), with S held fixed:

        ∂_jQ = Ã_j Lᵀ + L Ã_jᵀ − L B̃_j Lᵀ,  Ã_j = ∂_jK_nS L_S⁻ᵀ,  B̃_j = L_S⁻¹ ∂_jK_SS L_S⁻ᵀ,  K_SS = L_S L_Sᵀ.

    ``traces`` (p,) holds tr(P⁻¹ ∂_jP) exactly, by Woodbury in O(n m²); ``quad(R)`` gives (P⁻¹R)ᵀ ∂_jP R per
    column in O(n m k). Together they make a control variate for the Hutchinson trace of K⁻¹∂_jK.
    """

    def __init__(self, pc: PivotedCholesky, op):
        X, kernel, S = op.X, op.kernel, pc.pivots
        L, s2n = pc.L, pc.noise
        Ls = _pivot_cholesky_factor(kernel, X[S])
        A = np.asarray(kernel.gradients(X, X[S]))  # (p_k, n, m)
        B = np.asarray(kernel.gradients(X[S], X[S]))  # (p_k, m, m)
        self.At = np.stack([scipy.linalg.solve_triangular(Ls, a.T, lower=True).T for a in A])
        self.Bt = np.stack([scipy.linalg.solve_triangular(
            Ls, scipy.linalg.solve_triangular(Ls, b, lower=True).T, lower=True) for b in B])
        self.pc = pc
        G = L.T @ L
        MG = scipy.linalg.cho_solve(pc._chol, G)  # M G, M = (σ²I + LᵀL)⁻¹
        traces = []
        for At, Bt in zip(self.At, self.Bt, strict=True):
            H = L.T @ At
            MH = scipy.linalg.cho_solve(pc._chol, H)
            # tr(P⁻¹(ÃLᵀ + LÃᵀ)) = 2σ⁻²[tr H − tr(M H G)];  tr(P⁻¹ L B̃ Lᵀ) = σ⁻²[tr(G B̃) − tr(M G B̃ G)]
            t_a = 2.0 * (np.trace(H) - np.sum(MH * G.T)) / s2n
            GB = G @ Bt
            t_b = (np.trace(GB) - np.sum(MG * GB.T)) / s2n
            traces.append(t_a - t_b)
        traces.append(float(op.n - np.trace(MG)))  # noise: ∂P = σ²I, tr(P⁻¹)σ² = n − tr(M G)
        self.traces = np.asarray(traces)

    def quad(self, R) -> np.ndarray:
        """(p, k): column-wise (P⁻¹R)ᵀ(∂_jP R) for R (n, k)."""
        L, pc = self.pc.L, self.pc
        PR = pc.solve(R)
        LtR = L.T @ R
        out = []
        for At, Bt in zip(self.At, self.Bt, strict=True):
            dQR = At @ LtR + L @ (At.T @ R) - L @ (Bt @ LtR)
            out.append(np.einsum("ik,ik->k", PR, dQR))
        out.append(pc.noise * np.einsum("ik,ik->k", PR, R))
        return np.asarray(out)
