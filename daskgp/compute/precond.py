"""The pivoted-Cholesky preconditioner of the iterative solvers (:mod:`daskgp.compute.solvers`).

* :class:`PivotedCholesky` — the rank-r preconditioner P = L Lᵀ + σ² I from a greedy pivoted Cholesky of the
  kernel (Harbrecht et al. 2012; Gardner et al. 2018), applied with the Woodbury identity in O(n r).
* :class:`NystromDerivative` — its derivatives with the pivots held fixed: the exact tr(P⁻¹∂P) and the
  quadratic forms of a control variate for the Hutchinson trace.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
from array_api_compat import device

from .backend import (
    cho_solve,
    cholesky,
    col_dots,
    diagonal,
    from_host,
    is_numpy,
    namespace,
    require_float64,
    solve_triangular,
    take_cols,
    to_host,
)

__all__ = ["PivotedCholesky", "NystromDerivative"]


def _pivot_cholesky_factor(kernel, Xs):
    """Lower Cholesky factor of k(X_S, X_S), with a 1e-10·s2 jitter against round-off, in Xs's namespace."""
    xp = namespace(Xs)
    jitter = 1e-10 * kernel.variance * xp.eye(Xs.shape[0], dtype=Xs.dtype, device=device(Xs))
    return cholesky(kernel(Xs, Xs) + jitter)


def _top(d: np.ndarray, b: int, rank: np.ndarray) -> np.ndarray:
    """Indices of the b largest entries of d (n,), ties to the lowest ``rank`` (a fixed pseudo-random
    ordering of the rows): the same set on every namespace and numpy version, spread over the data however
    its rows are ordered (a stationary kernel's diagonal is one value repeated n times, and which of equal
    values argpartition returns is an implementation detail)."""
    n = d.size
    v = np.partition(d, n - b)[n - b]  # the b-th largest value
    above = np.flatnonzero(d > v)
    tied = np.flatnonzero(d == v)
    return np.concatenate([above, tied[np.argsort(rank[tied], kind="stable")[:b - above.size]]])


class PivotedCholesky:
    """Preconditioner P = L Lᵀ + σ² I, L (n, r) from a greedy pivoted Cholesky of k(X, X) (Harbrecht et al.
    2012; the preconditioner of Gardner et al. 2018), applied with the Woodbury identity:
    P⁻¹R = (R − L C Lᵀ R) / σ², C = (σ² I_r + LᵀL)⁻¹.

    Pivots are taken ``block`` at a time (the largest residual diagonals, then LAPACK's pivoted Cholesky on
    that block drops near-duplicates), so the O(n r²) work is matrix-matrix products rather than r
    matrix-vector products. L and every product stay in the operator's namespace and on its device; only the
    block × block pivoted factorisation (64 × 64 by default) runs on the host.

    op : a :class:`daskgp.compute.operator.KernelOperator` (its kernel, X and noise);
    rank : r (capped at n/2);
    rel_tol : stop when the largest remaining diagonal falls below rel_tol · s2;
    apply_dtype : 'float64' or 'float32', the precision of the low-rank correction in :meth:`solve`.
    """

    def __init__(self, op, rank: int = 1000, rel_tol: float = 1e-8, block: int = 64,
                 apply_dtype: str = "float64"):
        if rank < 1:
            raise ValueError(f"rank must be >= 1, got {rank}")
        X, kernel = op.X, op.kernel
        require_float64(X, "X", "the pivoted Cholesky preconditioner")
        xp = namespace(X)
        n = X.shape[0]
        rank = max(1, min(rank, n // 2))
        # the residual diagonal lives on the host: the pivot choice is made there (n numbers per block)
        d = np.array(to_host(kernel.diag(X)), dtype=np.float64)
        stop = rel_tol * d.max()
        tie_rank = np.random.default_rng(0).permutation(n)
        Lt = xp.zeros((rank, n), dtype=X.dtype, device=device(X))  # Lᵀ: the factor grows by row blocks
        pivots: list[int] = []
        m = 0
        while m < rank and d.max() > stop:
            b = min(block, rank - m, int(np.count_nonzero(d > stop)))
            S = _top(d, b, tie_rank)
            G = op.kernel_rows(S)
            if m:
                G = G - take_cols(Lt[:m, :], S).T @ Lt[:m, :]  # residual rows (b, n)
            c, piv, rk, info = scipy.linalg.lapack.dpstrf(to_host(take_cols(G, S)), tol=stop, lower=1)
            if rk == 0:
                break
            piv = piv[:rk] - 1
            Lc = from_host(np.tril(c[:rk, :rk]), xp, dtype=X.dtype, on=X)
            new = solve_triangular(Lc, _take_rows(G, piv), lower=True)  # (rk, n)
            Lt[m:m + rk, :] = new
            d -= to_host(col_dots(new, new))
            d[S[piv]] = 0.0
            np.maximum(d, 0.0, out=d)
            pivots.extend(S[piv].tolist())
            m += rk
        self._set(op, np.asarray(pivots, dtype=np.intp), Lt[:m, :].T, float(d.sum()), apply_dtype)

    def _set(self, op, pivots, L, residual_trace, apply_dtype: str = "float64"):
        if apply_dtype not in ("float64", "float32"):
            raise ValueError(f"apply_dtype must be 'float64' or 'float32', got {apply_dtype!r}")
        self.pivots, self.L, self.noise, self.rank = pivots, L, op.noise, L.shape[1]
        xp = namespace(L)
        inner = self.noise * xp.eye(self.rank, dtype=L.dtype, device=device(L)) + L.T @ L
        self._chol = cholesky(inner)  # lower factor of σ² I_r + LᵀL
        self.residual_trace = residual_trace  # tr(k(X,X) − L Lᵀ): how much the low rank misses
        # W = L C⁻ᵀ (n, r), C the factor above, so that P⁻¹R = (R − W WᵀR)/σ²: two matrix products per
        # apply instead of two products and two triangular solves with r right-hand sides (at rank 2,000 on
        # 8,192 rows those solves took a third of the apply). O(n r²) once per build.
        W = solve_triangular(self._chol, L.T, lower=True).T
        self.apply_dtype = apply_dtype
        if apply_dtype == "float32":
            W = xp.astype(W, xp.float32) if not is_numpy(W) else W.astype(np.float32)
        self._W = W

    @classmethod
    def from_pivots(cls, op, pivots, apply_dtype: str = "float64") -> PivotedCholesky:
        """The same preconditioner at the operator's current θ for a given pivot set (the Nyström
        approximation K_nS K_SS⁻¹ K_Sn + σ²I): O(n m²) matrix products, no pivot search. A sampler keeps the
        pivots for several iterations and refreshes L when θ moves."""
        X, kernel = op.X, op.kernel
        pivots = np.asarray(pivots, dtype=np.intp)
        Ls = _pivot_cholesky_factor(kernel, _take_rows(X, pivots))
        if type(X) is np.ndarray and X.dtype == np.float64:
            # L = K_nS Ls⁻ᵀ in place: K_Sn (C order) is K_nS in Fortran order, what dtrsm works on
            L = scipy.linalg.blas.dtrsm(1.0, Ls, op.kernel_rows(pivots).T, side=1, lower=1, trans_a=1,
                                        overwrite_b=1)
        else:
            L = solve_triangular(Ls, op.kernel_rows(pivots), lower=True).T
        self = cls.__new__(cls)
        xp = namespace(L)
        # Σ L², without an (n, m) temporary on the numpy path (182 MB at house_8L's n and rank 1000)
        LL = float(np.einsum("ij,ij->", L, L)) if type(L) is np.ndarray else float(xp.sum(L * L))
        resid = float(xp.sum(kernel.diag(X))) - LL
        self._set(op, pivots, L, max(resid, 0.0), apply_dtype)
        return self

    def solve(self, R):
        """P⁻¹ R for R (n,) or (n, k), in R's namespace and dtype (with ``apply_dtype`` float32 the low-rank
        correction W WᵀR is computed in float32: any fixed SPD preconditioner leaves CG's answer unchanged,
        and its rounding, ~1e-7 of the correction, is far below the solves' tolerances)."""
        W = self._W
        if W.dtype == R.dtype:
            return (R - W @ (W.T @ R)) / self.noise
        if is_numpy(W, R):
            return (R - (W @ (W.T @ R.astype(W.dtype))).astype(R.dtype)) / self.noise
        xp = namespace(R)
        return (R - xp.astype(W @ (W.T @ xp.astype(R, W.dtype)), R.dtype)) / self.noise

    def logdet(self) -> float:
        """log |P| = log|σ² I_r + LᵀL| + (n − r) log σ²."""
        n = self.L.shape[0]
        xp = namespace(self._chol)
        return 2.0 * float(xp.sum(xp.log(diagonal(self._chol)))) + (n - self.rank) * math.log(self.noise)

    def derivative_control(self, op) -> NystromDerivative:
        """∂P/∂log θ_j for the operator's θ with the pivots held fixed (see :class:`NystromDerivative`)."""
        return NystromDerivative(self, op)


class NystromDerivative:
    """Derivatives of the preconditioner P(θ) = Q + σ²I, Q = K_nS K_SS⁻¹ K_Sn (the pivoted Cholesky with
    pivot set S is this Nyström approximation), with S held fixed:

        ∂_jQ = Ã_j Lᵀ + L Ã_jᵀ − L B̃_j Lᵀ,  Ã_j = ∂_jK_nS L_S⁻ᵀ,  B̃_j = L_S⁻¹ ∂_jK_SS L_S⁻ᵀ,  K_SS = L_S L_Sᵀ.

    ``traces`` (p,) holds tr(P⁻¹ ∂_jP) exactly, by Woodbury in O(n m²); ``quad(R)`` gives (P⁻¹R)ᵀ ∂_jP R per
    column in O(n m k). Together they make a control variate for the Hutchinson trace of K⁻¹∂_jK. Both are
    in the operator's namespace.
    """

    def __init__(self, pc: PivotedCholesky, op):
        X, kernel, S = op.X, op.kernel, pc.pivots
        L, s2n = pc.L, pc.noise
        xp = namespace(L)
        XS = _take_rows(X, S)
        Ls = _pivot_cholesky_factor(kernel, XS)
        A = kernel.gradients(X, XS)  # (p_k, n, m)
        B = kernel.gradients(XS, XS)  # (p_k, m, m)
        self.At = xp.stack([solve_triangular(Ls, A[j, ...].T, lower=True).T for j in range(A.shape[0])])
        self.Bt = xp.stack([solve_triangular(Ls, solve_triangular(Ls, B[j, ...], lower=True).T, lower=True)
                            for j in range(B.shape[0])])
        self.pc = pc
        G = L.T @ L
        MG = cho_solve(pc._chol, G)  # M G, M = (σ²I + LᵀL)⁻¹
        traces = []
        for j in range(self.At.shape[0]):
            At, Bt = self.At[j, ...], self.Bt[j, ...]
            H = L.T @ At
            MH = cho_solve(pc._chol, H)
            # tr(P⁻¹(ÃLᵀ + LÃᵀ)) = 2σ⁻²[tr H − tr(M H G)];  tr(P⁻¹ L B̃ Lᵀ) = σ⁻²[tr(G B̃) − tr(M G B̃ G)]
            t_a = 2.0 * (xp.sum(diagonal(H)) - xp.sum(MH * G.T)) / s2n
            GB = G @ Bt
            t_b = (xp.sum(diagonal(GB)) - xp.sum(MG * GB.T)) / s2n
            traces.append(t_a - t_b)
        traces.append(op.n - xp.sum(diagonal(MG)))  # noise: ∂P = σ²I, tr(P⁻¹)σ² = n − tr(M G)
        self.traces = xp.stack(traces)

    def quad(self, R):
        """(p, k): column-wise (P⁻¹R)ᵀ(∂_jP R) for R (n, k)."""
        L, pc = self.pc.L, self.pc
        xp = namespace(R)
        PR = pc.solve(R)
        LtR = L.T @ R
        out = []
        for j in range(self.At.shape[0]):
            At, Bt = self.At[j, ...], self.Bt[j, ...]
            dQR = At @ LtR + L @ (At.T @ R) - L @ (Bt @ LtR)
            out.append(col_dots(PR, dQR))
        out.append(pc.noise * col_dots(PR, R))
        return xp.stack(out)


def _take_rows(a, idx: np.ndarray):
    """a[idx] for host integer indices, in a's namespace."""
    if type(a) is np.ndarray:
        return a[idx]
    return take_cols(a.T, np.asarray(idx)).T


