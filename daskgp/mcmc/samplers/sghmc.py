"""Stochastic-gradient Hamiltonian Monte Carlo on the ULISSE / CG gradients of Filippone & Engler (2015,
section 3.2) — daskgp's default sampler (``method='sghmc'``).

Underdamped Langevin dynamics by the BAOAB splitting (Leimkuhler & Matthews 2013) with the gradient noise
subtracted from the momentum refresh (Chen, Fox & Guestrin 2014, the B̂ term). The correction is exact for a
Gaussian target at any step (the gains of :func:`_baoab_noise_gains`), so the step is limited by stability
and the noise budget rather than by SGLD's 0.01 freeze ratio, and the momentum makes the chain move
ballistically instead of by a random walk.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ...inference.settings import setting
from .base import Sampler, check_spd, checked_gradient, solver_records
from .sghmc_state import SGHMCResult, SGHMCState

__all__ = ["SGHMC", "SGHMCState", "SGHMCResult", "whitened_hessian", "SGHMCSampler", "SGHMCSettings",
           "SGHMC_PROBES", "SGHMC_PRECOND_RANK", "LARGE_N", "SGHMC_PRECOND_RANK_LARGE", "SGHMC_WINDOW",
           "MIN_PROBES"]

# SGHMC's probes: on concrete the whitened gradient-noise eigenvalue λ falls 19 → 3.2 from N_r = 4 to 32 for
# 2.6× the cost of an iteration, and the step the noise allows grows as 1/λ (benchmarks/sgld_concrete.py)
SGHMC_PROBES = 32
# the fewest probes a warmup's noise measurement may cut them to (SGHMCSampler.probes_from_noise): the noise
# correction estimates the gradient's covariance from the probes' spread, which with fewer than 8 is too
# rough to subtract
MIN_PROBES = 8
# the share of κ the probes chosen from a warmup's noise take at the mode (probes_from_noise), the margin for
# the noise along the chains: on house_8L at most 1.24× the reading; the correction fails at 2.7× (guide)
PROBE_NOISE_SHARE = 0.75
# and its preconditioner's rank: on concrete 300 instead of 100 cut CG from 29 to 9 iterations per gradient
# (0.071 → 0.033 s with 32 probes) at the same gradient noise. A larger rank is not simply better: 515 cut CG
# to 7 but the ULISSE gradients' noise grew so much that the adapted step fell from 0.55 to 0.09 (the demo
# took 7.6 min instead of 1.9).
SGHMC_PRECOND_RANK = 300
# Beyond LARGE_N rows SGHMC solves by CG to 1e-6 with a rank-2,000 preconditioner instead. Single-threaded,
# 32 probes, house_8L: on 8,000 rows ULISSE + 300 took 48 CG iterations and 6.3 s a gradient at whitened
# noise λ 1.65, ULISSE + 2,000 6.8 and 1.7 s but λ 9.5, CG + 2,000 11.6 and 2.7 s at λ 1.38 (s × λ, what a
# sampler's step costs: 10.4 / 15.9 / 3.7); on all 22,784 rows ULISSE + 300 took 110 CG and 105 s, CG + 2,000
# 65 CG and 73 s, both at λ ≈ 0.45. On concrete (1,030 rows) the two are level (s × λ 0.11 vs 0.13).
# Beyond LARGE_N the probes' solves stop early by ULISSE while K⁻¹y runs to its own tolerance ('cg-ulisse',
# mean_tol; 1e-6 when this was measured): on 8,192 house_8L rows the probes stop after 12.5 CG iterations
# instead of 20, the gradient's noise variance within 0.1 % of CG's, 1.3 s a gradient instead of 2.1 (six
# probe sets, benchmarks/exact_roofline.py).
LARGE_N = 5000
SGHMC_PRECOND_RANK_LARGE = 2000


# the metric's update per adaptation window: the regression's Hessian is shrunk towards the current metric
# with this many pseudo-draws, against one per ``_DRAWS_PER_SAMPLE`` of the window (the draws of a window are
# autocorrelated), and no whitened eigenvalue moves by more than ``_MAX_METRIC_CHANGE`` per window (a sd
# changes by at most its square root), so that one noisy window cannot throw the metric far off
_PRIOR_DRAWS, _DRAWS_PER_SAMPLE, _MAX_METRIC_CHANGE = 5.0, 5.0, 25.0
# the step's stability bound h·ω_max ≤ _STABLE_H_OMEGA: half BAOAB's limit (2), a margin for the error of
# the measured curvature and for a non-Gaussian target
_STABLE_H_OMEGA = 1.0
# the adaptation's window (iterations): each ends with a metric update and a new step
SGHMC_WINDOW = 50
# A target run's adaptation from the gradient noise λ (largest whitened eigenvalue per gradient) that its
# warmup measured near the mode (issue 33, item 3). The windows regress the whitened Hessian (unit curvature
# in a good metric) on k pairs worth k/_DRAWS_PER_SAMPLE independent ones, so an entry's standard error is
# about √(λ·_DRAWS_PER_SAMPLE/k), and k = _DRAWS_PER_SAMPLE·λ/_ADAPT_PRECISION² pairs pin it to a relative
# _ADAPT_PRECISION (sds to about half that). The first window (its pairs are dropped once a second exists)
# and the last (it only measures the step in the final metric) come on top, and never more windows than the
# fixed rule's. λ 3.2 (concrete's, 32 probes): 8 windows, the fixed 400 iterations; λ ≈ 0.45 (all of
# house_8L, CG and rank 2,000): 3 windows, 150.
_ADAPT_PRECISION = 0.25
# during the adaptation, a whitened momentum with |v|²/p above this (in equilibrium |v|²/p ≈ χ²_p/p: beyond 25
# is impossible by chance) means the step is unstable: it is cut by 4 and the chain goes back one step
_UNSTABLE_KINETIC = 25.0



def whitened_hessian(window: np.ndarray, L: np.ndarray) -> np.ndarray | None:
    """The whitened Hessian A = Lᵀ(−∇²log p)L (p, p) of a near-Gaussian target by regressing the chain's
    stochastic gradients on its positions: window (k, 2p) [φ, ĝ] pairs of the adaptation so far, L (p, p)
    the Cholesky factor of the metric. With u = L⁻¹(φ − φ̄) and g_w = Lᵀĝ, g_w ≈ −A u + noise, so
    A = −Cov(g_w, u) Cov(u)⁻¹, symmetrised; it is right whether or not the window has equilibrated (the
    gradient, not the spread, carries the curvature). None when the window is too short or did not move."""
    p = L.shape[0]
    k = window.shape[0]
    if k < 2 * p + 2:
        return None
    P, G = window[:, :p], window[:, p:]
    U = scipy.linalg.solve_triangular(L, (P - P.mean(axis=0)).T, lower=True).T
    Gw = (G - G.mean(axis=0)) @ L
    Sxx = U.T @ U / k
    w = np.linalg.eigvalsh(Sxx)
    if not np.all(np.isfinite(w)) or w.min() <= 1e-12 * max(w.max(), 1e-300):
        return None
    A = -np.linalg.solve(Sxx, U.T @ Gw / k).T  # −Sgx Sxx⁻¹ (Sxx symmetric)
    return 0.5 * (A + A.T)


class SGHMC:
    """Stochastic-gradient Hamiltonian Monte Carlo: underdamped Langevin dynamics in the metric M,

        dφ = M^½ v dt,   dv = M^½ᵀ∇log p(φ) dt − γ v dt + √(2γ) dW   (whitened momentum v),

    integrated by the BAOAB splitting (Leimkuhler & Matthews 2013: exact configurational sampling of a
    Gaussian target at any stable step, h·ω < 2 for whitened curvature ω²), with one stochastic gradient per
    step. The gradient noise V that the kicks add to the momentum (h²·M^½ᵀ V M^½ per step, to first order)
    is subtracted from the friction's refresh, which then injects N(0, (1 − e^{−2γh}) I − h² M^½ᵀ V̂ M^½) —
    the noise-estimate correction of Chen, Fox & Guestrin (2014, the B̂ term) and Ahn, Korattikara & Welling
    (2012). V̂ is a running mean of the gradient's own within-iteration estimate (``info['noise_cov']`` of
    ``grad_fn``; 0 without one).

    Adaptation, over the first ``n_adapt`` iterations in windows of ``batch``: every window's [φ, ĝ] pairs
    and those of the windows before it but the first give the whitened Hessian A by regression
    (:func:`whitened_hessian`; the Hessian does not depend on the metric, so the windows pool). Its
    largest eigenvalue ω²_max — the curvature measured, not assumed — bounds the step, h·ω_max ≤ 1; and,
    while ``adapt_metric`` and more than one window remains, the metric becomes M ← L A⁻¹ Lᵀ (shrunk
    towards the current one, each eigenvalue moved by at most 25× a window), so a metric that was too wide
    or too narrow (a noisy Laplace estimate) is corrected from the chain's own gradients. The last window
    only measures (the curvature and the noise in the final metric) and sets the step. A step so unstable
    that the whitened momentum explodes (|v|²/p > 25) before a window ends is cut by 4 on the spot, the
    chain going back one step (adaptation draws are discarded anyway). Within the bound, h is the largest
    ≤ ``h_max`` whose gradient noise takes at most ``kappa`` of the refresh (h²λ_max ≤ κ(1 − e^{−2γh}),
    λ_max the largest whitened noise eigenvalue, the median over the window's batches so far of its batch
    means).
    After ``n_adapt`` the metric and h are fixed and the draws are a (stochastic-gradient) Markov chain.
    ``gamma``: friction in whitened time units. A non-finite gradient or |φ| > ``max_abs_phi`` stops the
    chain with a message, keeping the draws so far.
    """

    def __init__(self, grad_fn, p: int, *, M=None, h: float = 0.5, gamma: float = 1.5, n_adapt: int = 0,
                 batch: int = SGHMC_WINDOW, kappa: float = 0.5, h_max: float = 1.0, noise_weight: float = 0.1,
                 correct: bool = True, max_abs_phi: float = 30.0, adapt_metric: bool = True):
        if not (0 < h <= h_max):
            raise ValueError(f"need 0 < h <= h_max, got h={h}, h_max={h_max}")
        if not gamma > 0 or not 0 < kappa < 1 or not 0 < noise_weight <= 1:
            raise ValueError("need gamma > 0, 0 < kappa < 1 and 0 < noise_weight <= 1")
        if n_adapt < 0 or batch < 1:
            raise ValueError(f"need n_adapt >= 0 and batch >= 1, got {n_adapt}, {batch}")
        self.grad_fn, self.p = grad_fn, p
        self.M = check_spd(M, p)
        self.h0, self.gamma, self.n_adapt, self.batch = float(h), float(gamma), int(n_adapt), int(batch)
        self.kappa, self.h_max, self.noise_weight = kappa, h_max, noise_weight
        self.correct, self.max_abs_phi, self.adapt_metric = correct, max_abs_phi, adapt_metric

    def init(self, phi0, rng=None) -> SGHMCState:
        state = SGHMCState.initial(phi0, self.h0, rng)
        if state.phi.size != self.p:
            raise ValueError(f"phi0 has {state.phi.size} entries, expected {self.p}")
        return state

    def _gradient(self, state: SGHMCState, phi, t):
        """(g, extra) with the running noise estimate updated, or None after stopping the chain."""
        got = checked_gradient(self.grad_fn, phi, t, self.p, state)
        if got is None:
            return None
        g, extra = got
        V = extra.get("noise_cov")
        if V is not None:  # a running mean: one iteration's estimate from a few probes is itself noisy
            w = 1.0 if not state.noise.any() else self.noise_weight
            state.noise = (1 - w) * state.noise + w * np.asarray(V, dtype=float)
        return g, extra

    def _noise_step(self, lam: float) -> float:
        """The largest h ≤ h_max whose gradient noise takes at most κ of the refresh: b(h, γ)·λ ≤ κ with b
        the kick-noise gain of :func:`_baoab_noise_gains` (increasing in h), by bisection."""
        def ok(h):
            return _baoab_noise_gains(h, self.gamma)[1] * lam <= self.kappa
        if lam <= 0 or ok(self.h_max):
            return self.h_max
        lo, hi = 0.0, self.h_max
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        return max(lo, 1e-6)

    def _adapted_step(self, lam: float, curvature: float = 0.0) -> float:
        """The noise's step (:meth:`_noise_step`) within the stability bound h·ω_max ≤ 1 (ω²_max =
        ``curvature``, the largest measured whitened curvature; 0: not measured yet)."""
        h = self._noise_step(lam)
        if curvature > 0:
            h = min(h, _STABLE_H_OMEGA / np.sqrt(curvature))
        return max(h, 1e-6)

    def _end_window(self, state: SGHMCState, L: np.ndarray, last: bool) -> np.ndarray:
        """An adaptation window ends: measure the whitened Hessian, move the metric (unless ``last``), set
        the step; returns the (new) Cholesky factor of the metric."""
        rows = state.window
        if rows is not None and rows.shape[0] >= 2 * self.batch:
            rows = rows[self.batch:]  # the first window may have started far out, or with an unstable step
        A = whitened_hessian(rows, L) if rows is not None else None
        if A is not None:
            w, Q = np.linalg.eigh(A)
            state.curvature = float(max(w.max(), 0.0))
            if self.adapt_metric and not last:
                k = rows.shape[0] / _DRAWS_PER_SAMPLE
                shrunk = (k * w + _PRIOR_DRAWS) / (k + _PRIOR_DRAWS)
                shrunk = np.clip(shrunk, 1 / _MAX_METRIC_CHANGE, _MAX_METRIC_CHANGE)
                # M' = L A_s⁻¹ Lᵀ; the curvature in the new metric, for the step: L'ᵀ H L' with H = L⁻ᵀ A L⁻¹
                B = L @ (Q / np.sqrt(shrunk))
                metric = B @ B.T
                metric = 0.5 * (metric + metric.T)
                L_new = np.linalg.cholesky(metric)
                T = scipy.linalg.solve_triangular(L, L_new, lower=True)  # L⁻¹L'
                state.curvature = float(max(np.linalg.eigvalsh(T.T @ A @ T).max(), 0.0))
                state.metric, L = metric, L_new
                state.lam = np.zeros(0)  # the noise eigenvalues were whitened by the old metric
        lam = 0.0
        if state.noise.any():
            lam = float(np.linalg.eigvalsh(L.T @ state.noise @ L).max())
        if len(state.lam):
            k = max(1, len(state.lam) // self.batch)
            lam = float(np.median([b.mean() for b in np.array_split(state.lam, k)]))
        state.h = self._adapted_step(lam, state.curvature)
        return L

    def run(self, state: SGHMCState, n_iter: int) -> SGHMCResult:
        """Advance ``state`` (in place) by up to n_iter iterations."""
        p = self.p
        L = np.linalg.cholesky(self.M if state.metric is None else state.metric)
        draws, step, frac = np.empty((n_iter, p)), np.empty(n_iter), np.empty(n_iter)
        grads, kinetic, stability = np.empty((n_iter, p)), np.empty(n_iter), np.empty(n_iter)
        adapting, seconds = np.zeros(n_iter, dtype=bool), np.empty(n_iter)
        info: dict = {}
        done = 0
        while done < n_iter and state.stopped is None:
            t, t0 = state.t, time.perf_counter()
            if state.grad is None:  # the first iteration: a gradient at the start
                got = self._gradient(state, state.phi, t)
                if got is None:
                    break
                state.grad = got[0]
            h = state.h
            c = np.exp(-self.gamma * h)
            a, b = _baoab_noise_gains(h, self.gamma)
            Vw = L.T @ state.noise @ L  # the gradient noise in whitened coordinates
            lam = float(np.linalg.eigvalsh(Vw).max()) if state.noise.any() else 0.0
            v = state.v + 0.5 * h * (L.T @ state.grad)  # B
            phi = state.phi + 0.5 * h * (L @ v)  # A
            # the refresh that, with the kicks' noise, leaves a Gaussian target exact: (I − b·V_w)/a
            w, U = np.linalg.eigh((np.eye(p) - (b * Vw if self.correct else 0.0)) / a)
            v = c * v + U @ (np.sqrt(np.clip(w, 0.0, None)) * state.rng.standard_normal(p))  # O, corrected
            phi = phi + 0.5 * h * (L @ v)  # A
            if not np.all(np.isfinite(phi)) or np.abs(phi).max() > self.max_abs_phi:
                state.stopped = (f"divergence at iteration {t}: parameter left |φ| <= {self.max_abs_phi} "
                                 f"(φ={phi.tolist()}); lower the step size")
                break
            got = self._gradient(state, phi, t)
            if got is None:
                break
            g, extra = got
            v = v + 0.5 * h * (L.T @ g)  # B
            if t < self.n_adapt and float(v @ v) > _UNSTABLE_KINETIC * p:
                # an unstable step (a metric far too wide for the curvature) blows the momentum up within
                # a few steps, before any window can measure the curvature: back off, from the last point
                state.h = h = h / 4
                phi, g, v = state.phi, state.grad, state.rng.standard_normal(p)
            state.phi, state.v, state.grad, state.t = phi, v, g, t + 1
            draws[done], step[done], frac[done], grads[done] = phi, h, b * lam, g
            kinetic[done] = float(v @ v) / p
            stability[done] = h * np.sqrt(state.curvature)
            adapting[done] = t < self.n_adapt
            if t < self.n_adapt:
                state.lam = np.append(state.lam, lam)
                pair = np.concatenate([phi, g])[None, :]
                state.window = pair if state.window is None else np.vstack([state.window, pair])
                if (t + 1) % self.batch == 0 or t == self.n_adapt - 1:
                    L = self._end_window(state, L, last=t + self.batch >= self.n_adapt)
                if t == self.n_adapt - 1:
                    state.window = None  # every window's pairs were pooled (H does not depend on the metric)
            for k, val in extra.items():
                if np.ndim(val) == 0:
                    info.setdefault(k, []).append(val)
            seconds[done] = time.perf_counter() - t0
            done += 1
        sl = slice(0, done)
        info = {k: np.asarray(val) for k, val in info.items()}
        return SGHMCResult(draws[sl], step[sl], frac[sl], adapting[sl], seconds[sl], info, state.stopped,
                           state, grads[sl], kinetic[sl], stability[sl])


@functools.lru_cache(maxsize=256)
def _baoab_noise_gains(h: float, gamma: float) -> tuple[float, float]:
    """(a, b): the stationary position variance of BAOAB on a unit Gaussian is a·s + b·λ for refresh noise
    variance s and kick noise variance λ per gradient (the two half kicks at a point share its gradient, so
    they add as one kick h·ε). From the discrete Lyapunov equation of the linear recursion of
    (position, momentum before the kick): the correction that keeps a Gaussian target exact at any step.
    a = 1/(1 − e^{−2γh}): without kick noise BAOAB samples the Gaussian exactly."""
    c = np.exp(-gamma * h)
    A = np.array([[1 - (1 + c) * h * h / 2, (1 + c) * h / 2], [-c * h, c]])
    Be = np.array([(1 + c) * h * h / 2, c * h])
    Bx = np.array([h / 2, 1.0])
    a = scipy.linalg.solve_discrete_lyapunov(A, np.outer(Bx, Bx))[0, 0]
    b = scipy.linalg.solve_discrete_lyapunov(A, np.outer(Be, Be))[0, 0]
    return float(a), float(b)


@dataclass(frozen=True)
class SGHMCSettings:
    """SGHMC's own settings (``SamplerConfig.options`` of a run with ``method='sghmc'``), in the whitened
    units of the warmup's Laplace covariance."""

    friction: float = setting(1.5, "friction γ of the Langevin dynamics", low=0, unit="1/time")
    h_max: float = setting(0.7, "largest step; below 2, BAOAB's stability limit", low=0, high=2, unit="time")
    noise_budget: float = setting(0.5, "most of the momentum refresh the gradient noise may take (κ)", low=0,
                                  high=1)
    batch: int = setting(100, "iterations per adaptation batch: a run to a target ESS adapts over 4", low=0)


class SGHMCSampler(Sampler):
    """``method='sghmc'``: :class:`SGHMC` with 32 probes redrawn at every iteration (its noise correction
    assumes independent gradient noise), ULISSE and a rank-300 preconditioner up to :data:`LARGE_N` rows,
    K⁻¹y by CG and the probes by ULISSE ('cg-ulisse') with rank 2,000 beyond; its first step a quarter of
    ``h_max`` (the adaptation grows it from the noise), adapting over 4 batches in target-ESS mode, or fewer
    after a stochastic warmup whose noise at the mode needs fewer (:meth:`adaptation_from_noise`). Its
    records keep the stochastic gradient at every draw."""

    name = "sghmc"
    label = "SGHMC (momentum, noise-corrected)"
    settings = SGHMCSettings
    default_probes = SGHMC_PROBES
    records = {"step": float, "noise_fraction": float, "cg_iterations": float, "n_products": float,
               "seconds": float, "warmup": bool, "kinetic": float, "stability": float}
    gradient_records = True
    monitor = {"step": ("step size", True), "noise_fraction": ("SGHMC: gradient noise / refresh", False)}

    adapts_from_noise = True
    default_max_n = math.inf  # the default wherever no other sampler's crossover covers n

    def adaptation_for_target(self, cfg) -> int:
        return 4 * cfg.settings.batch

    def adaptation_from_noise(self, cfg, noise: float) -> int | None:
        """Whole windows of :data:`SGHMC_WINDOW`: 2 + ⌈k/window⌉ for the k = 5λ/0.25² regression pairs that
        the noise λ calls for (see :data:`_ADAPT_PRECISION`), at most :meth:`adaptation_for_target`'s."""
        if not (np.isfinite(noise) and noise > 0):
            return None
        pairs = _DRAWS_PER_SAMPLE * noise / _ADAPT_PRECISION**2
        windows = 2 + int(np.ceil(pairs / SGHMC_WINDOW))
        return int(min(windows * SGHMC_WINDOW, self.adaptation_for_target(cfg)))

    def probes_from_noise(self, cfg, noise: float) -> int | None:
        """The fewest probes (at least :data:`MIN_PROBES`, at most ``cfg.n_probes``) whose gradient noise
        takes at most :data:`PROBE_NOISE_SHARE` of what the step ``h_max`` tolerates (b(h_max, γ)·λ ≤ ¾κ;
        Hutchinson's variance falls as 1/N_r: λ(N) = λ·cfg.n_probes/N). Concrete's noise already caps the
        step: its 32 stay; house_8L's (λ ≈ 0.45–0.56 with 32) is far below: 12–14, fewer product columns."""
        if not (np.isfinite(noise) and noise > 0):
            return None
        s = cfg.settings
        cap = s.noise_budget / _baoab_noise_gains(s.h_max, s.friction)[1]
        want = int(np.ceil(noise * cfg.n_probes / (PROBE_NOISE_SHARE * cap)))
        return int(min(cfg.n_probes, max(MIN_PROBES, want)))

    def solver_for(self, cfg, n: int) -> str:
        return cfg.solver or ("cg-ulisse" if n > LARGE_N else "ulisse")

    def precond_rank_for(self, cfg, n: int) -> int:
        if cfg.precond_rank is not None:
            return int(cfg.precond_rank)
        return SGHMC_PRECOND_RANK_LARGE if n > LARGE_N else SGHMC_PRECOND_RANK

    def redraw_every(self, cfg) -> int:
        return 1

    def initial(self, phi0, cfg, M, rng, target) -> SGHMCState:
        return SGHMCState.initial(phi0, 0.25 * cfg.settings.h_max, rng)

    def state_from_dict(self, d: dict, cfg, p: int) -> SGHMCState:
        return SGHMCState.from_dict(d, p)

    def run(self, target, cfg, M, state: SGHMCState, n: int) -> dict:
        t_start, s = state.t, cfg.settings
        sampler = SGHMC(target.grad, len(state.phi), M=M, h=state.h, gamma=s.friction, n_adapt=cfg.adapt,
                        kappa=s.noise_budget, h_max=s.h_max, max_abs_phi=cfg.max_abs_phi)
        res = sampler.run(state, n)  # a failing gradient stops the chain with a message, draws kept
        k = len(res.draws)
        return {"phi": res.draws, "step": res.step, **solver_records(res.info, k), "seconds": res.seconds,
                "noise_fraction": res.noise_fraction, "warmup": t_start + np.arange(k) < cfg.adapt,
                "kinetic": res.kinetic, "stability": res.stability, "grads": res.grads}
