"""Samplers on an unconstrained parameter vector φ (p,): preconditioned SGLD with the paper's step-size
freeze rule, and adaptive random-walk Metropolis–Hastings. Both work on plain callables, so the GP wiring
(gradients through the kernel operator, chains on the cluster, checkpoints) stays outside.

SGLD (Welling & Teh 2011; Filippone & Engler 2015):
    φ' = φ + (α_t/2)·M·ĝ(φ) + η_t,   η_t ~ N(0, α_t·M),
with ĝ an unbiased estimate of ∇ log p(φ | y). The step size follows α_t = a(b + t)^(−γ) from its start to
its end value and is frozen once the injected noise dominates the gradient noise: every ``batch`` iterations,
ratio = λ_max((α_t/4)·M^{1/2} V_s M^{1/2}) with V_s the sample covariance of the batch's stochastic gradients;
the first batch with ratio < ``freeze_threshold`` freezes α.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

__all__ = ["StepSchedule", "SGLDResult", "sgld", "MHResult", "random_walk_mh"]


@dataclass(frozen=True)
class StepSchedule:
    """α_t = a(b + t)^(−γ) with α_0 = start and α_{n_iter−1} = end (start ≥ end > 0, 0 < γ ≤ 1)."""

    start: float
    end: float
    n_iter: int
    gamma: float = 0.55

    def __post_init__(self):
        if not (self.start >= self.end > 0):
            raise ValueError(f"need step start >= end > 0, got start={self.start}, end={self.end}")
        if not (0 < self.gamma <= 1):
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
        if self.n_iter < 1:
            raise ValueError(f"n_iter must be >= 1, got {self.n_iter}")

    def __call__(self, t) -> np.ndarray | float:
        if self.start == self.end or self.n_iter == 1:
            return self.start * np.ones_like(np.asarray(t, dtype=float))
        ratio = (self.start / self.end) ** (1.0 / self.gamma)
        b = (self.n_iter - 1) / (ratio - 1.0)
        a = self.start * b**self.gamma
        return a * (b + np.asarray(t, dtype=float)) ** (-self.gamma)


@dataclass
class SGLDResult:
    """draws (n_iter, p) φ after each step; records per iteration: step (n_iter,), frozen (n_iter,) bool,
    ratio (n_iter,) freeze ratio of the batch that ended there (NaN elsewhere), seconds (n_iter,) wall time,
    plus whatever the gradient function reported in ``info`` (lists of its dicts' values); ``stopped`` holds
    the divergence message if the chain stopped early (draws are then shorter)."""

    draws: np.ndarray
    step: np.ndarray
    frozen: np.ndarray
    ratio: np.ndarray
    seconds: np.ndarray
    info: dict = field(default_factory=dict)
    stopped: str | None = None


def _sqrtm_psd(M: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh(M)
    return (U * np.sqrt(np.clip(w, 0, None))) @ U.T


def sgld(grad_fn, phi0, n_iter: int, *, M=None, schedule: StepSchedule | None = None, batch: int = 100,
         freeze_threshold: float = 0.01, rng=None, max_abs_phi: float = 30.0,
         frozen_step: float | None = None, callback=None) -> SGLDResult:
    """Run one SGLD chain.

    grad_fn(φ, t) -> ĝ (p,) or (ĝ, info dict): unbiased gradient of the log posterior at φ, iteration t.
    phi0 (p,) start; M (p, p) SPD preconditioner (default I); schedule: the decreasing step sizes (default
    1e-2 → 1e-4); frozen_step: start already frozen at this step (a resumed chain); rng: Generator or seed.
    A non-finite gradient or |φ| > ``max_abs_phi`` stops the chain with a message in ``stopped``, keeping the
    draws so far. ``callback(t, φ, record)`` is called after every step (for live views and checkpoints).
    """
    rng = np.random.default_rng(rng)
    phi = np.array(phi0, dtype=float)
    if phi.ndim != 1 or not np.all(np.isfinite(phi)):
        raise ValueError(f"phi0 must be a finite 1-D vector, got {phi0!r}")
    p = phi.size
    M = np.eye(p) if M is None else np.asarray(M, dtype=float)
    if M.shape != (p, p) or not np.allclose(M, M.T) or np.linalg.eigvalsh(M).min() <= 0:
        raise ValueError(f"M must be a symmetric positive definite ({p}, {p}) matrix")
    schedule = schedule or StepSchedule(1e-2, 1e-4, n_iter)
    chol_M = np.linalg.cholesky(M)
    sqrt_M = _sqrtm_psd(M)
    draws = np.empty((n_iter, p))
    step, ratio = np.empty(n_iter), np.full(n_iter, np.nan)
    frozen, seconds = np.zeros(n_iter, dtype=bool), np.empty(n_iter)
    info: dict = {}
    grads = np.empty((batch, p))
    alpha_frozen = frozen_step
    stopped = None
    t_done = 0
    for t in range(n_iter):
        t0 = time.perf_counter()
        out = grad_fn(phi, t)
        g, extra = out if isinstance(out, tuple) else (out, {})
        g = np.asarray(g, dtype=float)
        if g.shape != (p,) or not np.all(np.isfinite(g)):
            stopped = f"divergence at iteration {t}: non-finite gradient {g.tolist()} at φ={phi.tolist()}"
            break
        alpha = alpha_frozen if alpha_frozen is not None else float(schedule(t))
        grads[t % batch] = g
        if alpha_frozen is None and t % batch == batch - 1:
            Vs = np.cov(grads, rowvar=False).reshape(p, p)
            r = float(np.linalg.eigvalsh(alpha / 4.0 * sqrt_M @ Vs @ sqrt_M).max())
            ratio[t] = r
            if r < freeze_threshold:
                alpha_frozen = alpha
        new = phi + 0.5 * alpha * (M @ g) + np.sqrt(alpha) * (chol_M @ rng.standard_normal(p))
        if not np.all(np.isfinite(new)) or np.abs(new).max() > max_abs_phi:
            stopped = (f"divergence at iteration {t}: parameter left |φ| <= {max_abs_phi} "
                       f"(φ={new.tolist()}); lower the step size")
            break
        phi = new
        draws[t], step[t], frozen[t] = phi, alpha, alpha_frozen is not None
        for k, v in extra.items():
            info.setdefault(k, []).append(v)
        seconds[t] = time.perf_counter() - t0
        t_done = t + 1
        if callback is not None:
            callback(t, phi, {"step": alpha, "frozen": frozen[t], "ratio": ratio[t], "seconds": seconds[t]})
    sl = slice(0, t_done)
    return SGLDResult(draws[sl], step[sl], frozen[sl], ratio[sl], seconds[sl], info, stopped)


@dataclass
class MHResult:
    """draws (n_iter, p); accepted (n_iter,) bool; logp (n_iter,) log target at the draw; scale (n_iter,) the
    proposal scale in use; seconds (n_iter,)."""

    draws: np.ndarray
    accepted: np.ndarray
    logp: np.ndarray
    scale: np.ndarray
    seconds: np.ndarray


def random_walk_mh(logp_fn, phi0, n_iter: int, *, proposal_cov=None, n_adapt: int = 0,
                   target_accept: tuple[float, float] = (0.2, 0.35), rng=None) -> MHResult:
    """Random-walk Metropolis–Hastings on log p(φ) with Gaussian proposals N(φ, s²·C).

    During the first ``n_adapt`` iterations the scale s is tuned every 50 steps towards an acceptance rate in
    ``target_accept`` (and C to the sample covariance of the adaptation draws once there are enough); after
    that the kernel is fixed, so the remaining draws are a valid MCMC chain.
    """
    rng = np.random.default_rng(rng)
    phi = np.array(phi0, dtype=float)
    p = phi.size
    C = np.eye(p) * 0.01 if proposal_cov is None else np.asarray(proposal_cov, dtype=float)
    L = np.linalg.cholesky(C)
    s = 2.38 / np.sqrt(p)
    lp = float(logp_fn(phi))
    if not np.isfinite(lp):
        raise ValueError(f"log target is not finite at the start φ={phi.tolist()}")
    draws, acc = np.empty((n_iter, p)), np.zeros(n_iter, dtype=bool)
    logp, scale, seconds = np.empty(n_iter), np.empty(n_iter), np.empty(n_iter)
    for t in range(n_iter):
        t0 = time.perf_counter()
        prop = phi + s * (L @ rng.standard_normal(p))
        lq = float(logp_fn(prop))
        if np.isfinite(lq) and np.log(rng.uniform()) < lq - lp:
            phi, lp, acc[t] = prop, lq, True
        draws[t], logp[t], scale[t] = phi, lp, s
        seconds[t] = time.perf_counter() - t0
        if t < n_adapt and t % 50 == 49:
            rate = acc[t - 49:t + 1].mean()
            if rate < target_accept[0]:
                s *= 0.7
            elif rate > target_accept[1]:
                s *= 1.3
            if t >= 499 and t % 250 == 249:  # enough adaptation draws for a proposal shape
                emp = np.cov(draws[t // 2:t + 1], rowvar=False).reshape(p, p) + 1e-10 * np.eye(p)
                try:
                    L = scipy.linalg.cholesky(emp, lower=True)
                except np.linalg.LinAlgError:
                    pass
    return MHResult(draws, acc, logp, scale, seconds)
