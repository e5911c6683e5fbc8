"""Iterative solvers for K S = B with many right-hand sides sharing every operator pass.

* :func:`cg` — batched (preconditioned) conjugate gradients: each column has its own step sizes and stops on
  its own relative residual ‖b − K s‖ / ‖b‖ ≤ tol; only the still-active columns are sent to the operator.
* :func:`ulisse` — the Unbiased LInear System SolvEr of Filippone & Engler (2015, section 3). CG is run to an
  early-stop threshold ``es_tol``; every further increment δ_i (i = 1, 2, … after the threshold) is kept
  with probability p_i and, if kept, reweighted by 1 / P_i, P_i = p_1···p_i; the first rejection stops that
  estimate (a Russian roulette). Its expectation is the full CG solution (to ``tol``) for any p_i that
  depend only on the CG path, which is deterministic given the right-hand side. Several estimates per column
  share one CG run and differ only in their uniform draws, which makes them independent.
  The roulettes: 'exponential' is the paper's p_i = exp(−β·i), so P_i = exp(−β·i(i+1)/2) falls faster
  than any geometric rate. CG's increments shrink only geometrically, so along a slow CG path the estimate's
  mean is carried by draws of probability far below anything a run samples: unbiased on paper, in practice
  a heavy-tailed estimate whose sample means sit to one side (on 4,096 house_8L rows at the posterior mode
  the noise gradient was off by +0.42 ± 0.02, above in 37 of 40 seeds; ``benchmarks/ulisse_bias.py``).
  'increment' (the default) sets P_i = e^−β·‖δ_i‖/‖δ_1‖ (never increasing): survival follows the size of
  CG's own steps — Rhee & Glynn's (2015) P_i ∝ ‖δ_i‖ for a geometric series — so every kept, reweighted
  increment is at most about e^β‖δ_1‖ and no single rare draw carries the mean. 'residual' uses the
  relative residual before the step instead of ‖δ_i‖ (a little less noise, no such bound). Both are
  functions of the deterministic CG path, which keeps the estimate unbiased.
The preconditioner they take, :class:`PivotedCholesky`, lives in :mod:`daskgp.compute.precond` (re-exported
here).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.validation import check_positive
from .backend import (
    check_finite,
    col_dots,
    from_host,
    is_array,
    namespace,
    norms,
    put_cols,
    require_float64,
    take_cols,
    to_host,
)
from .precond import NystromDerivative, PivotedCholesky

__all__ = ["CGResult", "UlisseResult", "cg", "ulisse", "PivotedCholesky", "NystromDerivative", "ROULETTES"]

ROULETTES = ("increment", "residual", "exponential")


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
    if not is_array(A):
        A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix or an operator with .matmul, got shape {tuple(A.shape)}")
    return (lambda V: A @ V), A.shape[0]


def cg(A, B, x0=None, *, tol: float | np.ndarray = 1e-8, max_iter: int | None = None, precond=None,
       callback=None) -> CGResult:
    """Solve A X = B for symmetric positive definite A (an operator with ``.matmul`` or a dense matrix).

    B (n,) or (n, k), float64, of any array namespace (the solution comes back in it); tol the relative
    residual each column stops at, one for every column or (k,) one per column; x0 warm start of the
    same shape; precond: an object with ``.solve(R)`` ≈ A⁻¹R; callback(i): called after iteration i (1, 2,
    …), e.g. for a heartbeat during a long solve. Returns a :class:`CGResult` whose ``x`` has B's shape and
    namespace (the per-column counters are numpy).
    """
    return _pcg(A, B, x0, tol=tol, max_iter=max_iter, precond=precond, es_tol=None, beta=None,
                n_estimates=None, rng=None, roulette=None, callback=callback)


def ulisse(A, B, x0=None, *, es_tol: float | np.ndarray = 1e-2, tol: float | np.ndarray = 1e-6,
           beta: float = 1.0, n_estimates=1, rng=None, max_iter: int | None = None, precond=None,
           roulette: str = "increment", callback=None) -> UlisseResult:
    """ULISSE: unbiased estimates of the CG solution of A X = B from an early-stopped CG run.

    es_tol : early-stop relative residual, one for every column or (k,) one per column (``inf``: that
    column is solved by plain CG to ``tol``, its estimates all the CG solution); tol : the full CG tolerance
    whose solution is estimated (one, or one per column like ``es_tol``);
    beta : the roulette's scale (the first step past the threshold is kept with probability e^−β);
    roulette : 'increment' (survival P_i = e^−β·‖δ_i‖/‖δ_1‖), 'residual' (P_i = e^−β·r_(i−1)/r_es) or
    'exponential' (the paper's p_i = exp(−β i)), see the module; n_estimates : estimates per column
    (int or (k,) ints, e.g. 2 for the column whose quadratic form needs two independent estimates);
    rng : numpy Generator or seed (the uniform draws, on the host whatever B's namespace: the same seed
    gives the same stopping on CPU and GPU); callback(i) as for :func:`cg`.
    """
    es, tl = np.asarray(es_tol, dtype=np.float64), np.asarray(tol, dtype=np.float64)
    if es.ndim > 1 or tl.ndim > 1 or not (np.all(es > tl) and np.all(tl > 0)):
        raise ValueError(f"need es_tol > tol > 0 (a number, or one per column), got es_tol={es_tol}, "
                         f"tol={tol}")
    check_positive("beta", beta)
    if roulette not in ROULETTES:
        raise ValueError(f"roulette must be one of {ROULETTES}, got {roulette!r}")
    return _pcg(A, B, x0, tol=tol, max_iter=max_iter, precond=precond, es_tol=es_tol, beta=beta,
                n_estimates=n_estimates, rng=np.random.default_rng(rng), roulette=roulette,
                callback=callback)


def _rhs(B, n, name):
    """(B (n, k) float64 in its namespace, was_1d)."""
    if not is_array(B):
        B = np.asarray(B, dtype=np.float64)
    if B.ndim not in (1, 2) or B.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k), got {tuple(B.shape)}")
    if type(B) is np.ndarray and B.dtype != np.float64:
        B = B.astype(np.float64)
    require_float64(B, name, "CG / ULISSE")
    check_finite(B, name)
    xp = namespace(B)
    return (xp.reshape(B, (n, 1)), True) if B.ndim == 1 else (B, False)


def _pcg(A, B, x0, *, tol, max_iter, precond, es_tol, beta, n_estimates, rng, roulette, callback=None):
    """Batched preconditioned CG (and ULISSE's Russian roulette) in B's namespace. The n-sized iterates stay
    in that namespace and on its device; only the per-column numbers (k of them: residual norms, step
    bookkeeping, the roulette's draws and weights) live on the host, as the stopping decisions need them."""
    matmul, n = _as_operator(A)
    B2, was_1d = _rhs(B, n, "B")
    xp = namespace(B2)
    k = B2.shape[1]
    tol = np.asarray(tol, dtype=np.float64)
    if tol.ndim > 1 or not (np.all(tol > 0) and np.all(np.isfinite(tol))):
        raise ValueError(f"tol must be positive and finite, one or one per column, got {tol}")
    tol = np.broadcast_to(tol, (k,))  # ValueError for a length other than k
    max_iter = int(max_iter) if max_iter is not None else 10 * n
    if x0 is None:
        x = xp.zeros_like(B2)
        r = xp.asarray(B2, copy=True)
        n_products = 0
    else:
        x, _ = _rhs(x0, n, "x0")
        if x.shape != B2.shape:
            raise ValueError(f"x0 has shape {tuple(x.shape)}, B has {tuple(B2.shape)}")
        x = xp.asarray(x, copy=True)
        r = xp.asarray(B2, copy=True)
        # only the columns with a warm start cost a product (a sampler keeps K⁻¹y's iterate across steps
        # and starts its fresh probes from zero)
        warm = np.flatnonzero(to_host(norms(x)) > 0)
        n_products = 0
        if warm.size:
            xw = take_cols(x, warm)
            r = put_cols(r, warm, take_cols(B2, warm) - matmul(xw))
            n_products = 1
    bnorm = to_host(norms(B2)).astype(np.float64)
    zero = bnorm == 0  # b = 0: the solution is 0, whatever the warm start
    if zero.any():
        zc = np.flatnonzero(zero)
        x = put_cols(x, zc, xp.zeros_like(take_cols(x, zc)))
        r = put_cols(r, zc, xp.zeros_like(take_cols(r, zc)))
        bnorm[zero] = 1.0
    res = to_host(norms(r)) / bnorm
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
        est = [xp.zeros_like(B2) for _ in range(E)]  # estimate e of every column; NaN where e ≥ n_est
        weight = np.ones((E, k))
        alive = np.zeros((E, k), dtype=bool)
        started = np.zeros(k, dtype=bool)
        since = np.zeros(k, dtype=np.int64)  # steps taken after the early-stop threshold
        es_iteration = np.full(k, -1, dtype=np.int64)
        es = np.broadcast_to(np.asarray(es_tol, dtype=np.float64), (k,))
        es = np.where(np.isfinite(es), es, -1.0)  # inf: a plain CG column, never past the threshold
        first_size = np.ones(k)  # the first step's size past the threshold (increment or residual roulette)
        survive = np.ones(k)  # P_i: probability that an estimate is still alive after step i

        def start(cols):
            if cols.size == 0:
                return
            xc = take_cols(x, cols)
            for e in range(E):
                est[e] = put_cols(est[e], cols, xc)
            for c in cols:
                alive[: n_est[c], c] = True
                started[c] = True
                es_iteration[c] = iterations[c]

        start(np.flatnonzero(res <= es))
        active &= ~started

    z = precond.solve(r) if precond is not None else r
    p = xp.asarray(z, copy=True)
    rz = to_host(col_dots(r, z)).astype(np.float64)
    it = 0
    while np.any(active) and it < max_iter:
        it += 1
        cols = np.flatnonzero(active)
        res_before = res[cols].copy()  # the residual this step's increment is computed from
        pc = take_cols(p, cols)
        Ap = matmul(pc)
        n_products += 1
        pAp = to_host(col_dots(pc, Ap))
        if np.any(pAp <= 0) or not np.all(np.isfinite(pAp)):
            raise FloatingPointError("CG breakdown: the operator is not positive definite in floating point "
                                     f"(pᵀAp = {pAp.min():.3g}); increase the noise variance or use float64")
        alpha_h = rz[cols] / pAp
        alpha = from_host(alpha_h, xp, dtype=B2.dtype, on=B2)
        delta = pc * alpha
        x = put_cols(x, cols, take_cols(x, cols) + delta)
        r = put_cols(r, cols, take_cols(r, cols) - Ap * alpha)
        rc = take_cols(r, cols)  # read back: its memory layout (numpy's fancy indexing) sets the rounding
        iterations[cols] += 1
        res_c = to_host(norms(rc)) / bnorm[cols]
        res[cols] = res_c
        newly_converged = res_c <= tol[cols]
        if use_ulisse:
            pre = ~started[cols]
            on = cols[~pre]  # columns already past the threshold: Russian roulette on this increment
            if on.size:
                since[on] += 1
                d_on = take_cols(delta, np.flatnonzero(~pre))
                if roulette == "exponential":  # the paper's p_i = exp(-β i): P_i = exp(-β i(i+1)/2)
                    prob = np.exp(-beta * since[on])
                else:
                    # P_i from the (deterministic) CG path alone, never increasing, so the estimate stays
                    # unbiased: e^-β times this increment's size (or the residual it came from) relative
                    # to the first one past the threshold
                    size = (to_host(norms(d_on)) if roulette == "increment" else res_before[~pre])
                    first = since[on] == 1
                    first_size[on[first]] = np.maximum(size[first], np.finfo(float).tiny)
                    target = np.minimum(survive[on], np.exp(-beta) * size / first_size[on])
                    prob = target / survive[on]
                    survive[on] = target
                u = rng.uniform(size=(E, on.size))
                keep = alive[:, on] & (u < prob)
                weight[:, on] = np.where(keep, weight[:, on] / prob, weight[:, on])
                alive[:, on] = keep
                for e in range(E):
                    kc = np.flatnonzero(keep[e])
                    if kc.size:
                        w = from_host(weight[e, on[kc]], xp, dtype=B2.dtype, on=B2)
                        est[e] = put_cols(est[e], on[kc], take_cols(est[e], on[kc]) + take_cols(d_on, kc) * w)
            start(cols[pre & (res_c <= es[cols])])
            done = newly_converged | (started[cols] & ~alive[:, cols].any(axis=0))
        else:
            done = newly_converged
        converged[cols] |= newly_converged
        active[cols[done]] = False
        hist = np.full(k, np.nan)
        hist[cols] = res_c
        history.append(hist)
        if callback is not None:
            callback(it)
        if not np.any(active):
            break
        zc = precond.solve(rc) if precond is not None else rc
        rz_new = to_host(col_dots(rc, zc))
        beta_h = from_host(rz_new / rz[cols], xp, dtype=B2.dtype, on=B2)
        p = put_cols(p, cols, zc + pc * beta_h)
        rz[cols] = rz_new

    residuals = np.vstack(history)
    if use_ulisse:
        # columns that hit max_iter before the threshold: the CG iterate is the (deterministic) answer
        late = np.flatnonzero(~started)
        if late.size:
            xl = take_cols(x, late)
            for e in range(E):
                est[e] = put_cols(est[e], late, xl)
            es_iteration[late] = -1
        for e in range(1, E):  # estimates a column does not have are NaN
            short = np.flatnonzero(n_est <= e)
            if short.size:
                est[e] = put_cols(est[e], short, xp.full_like(take_cols(est[e], short), np.nan))
        estimates = xp.stack(est)
        out = UlisseResult(x=x[:, 0] if was_1d else x, iterations=iterations, converged=converged,
                           residuals=residuals, n_products=n_products,
                           estimates=estimates[:, :, 0] if was_1d else estimates, es_iteration=es_iteration)
        return out
    return CGResult(x=x[:, 0] if was_1d else x, iterations=iterations, converged=converged,
                    residuals=residuals, n_products=n_products)
