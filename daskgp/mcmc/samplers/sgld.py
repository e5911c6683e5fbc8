"""Preconditioned SGLD with the step-size freeze rule of Filippone & Engler (2015, section 3.3, eq. 9 and
the freeze criterion after it) — the paper's sampler (``method='sgld'``).

SGLD (Welling & Teh 2011):
    φ' = φ + (α_t/2)·M·ĝ(φ) + η_t,   η_t ~ N(0, α_t·M),
with ĝ an unbiased estimate of ∇ log p(φ | y) (ULISSE gradients, section 3.2). The step size follows
α_t = a(b + t)^(−γ) from its start to its end value and is frozen once the injected noise dominates the
gradient noise: every ``batch`` iterations, ratio = λ_max((α_t/4)·M^{1/2} V_s M^{1/2}) with V_s the sample
covariance of the batch's stochastic gradients; the first batch with ratio < ``freeze_threshold`` freezes α.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...core.plaindata import expect_array, expect_int, expect_keys, expect_number
from ...core.random import rng_from_state
from ...inference.settings import setting
from .base import Sampler, check_spd, check_start, checked_gradient, expect_stopped, solver_records

__all__ = ["StepSchedule", "SGLD", "SGLDState", "SGLDResult", "sgld", "SGLDSampler", "SGLDSettings"]


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
class SGLDState:
    """Where an SGLD chain is: φ (p,), the next iteration t, the frozen step (None before freezing), the
    current batch of stochastic gradients (batch, p) and the noise generator. ``stopped`` holds a
    divergence message once the chain has stopped."""

    phi: np.ndarray
    t: int
    alpha_frozen: float | None
    grads: np.ndarray
    rng: np.random.Generator
    stopped: str | None = None

    @classmethod
    def initial(cls, phi0, batch: int, rng=None, frozen_step: float | None = None) -> SGLDState:
        """The state before iteration 0 (``frozen_step``: start already frozen at that step size)."""
        phi = check_start(phi0)
        return cls(phi, 0, frozen_step, np.zeros((batch, phi.size)), np.random.default_rng(rng))

    def to_dict(self) -> dict:
        """Plain data: arrays, numbers, the bit generator's state dict."""
        return {"phi": self.phi, "t": self.t, "alpha_frozen": self.alpha_frozen, "grads": self.grads,
                "rng": self.rng.bit_generator.state, "stopped": self.stopped}

    @classmethod
    def from_dict(cls, d: dict, p: int, batch: int) -> SGLDState:
        """The state ``to_dict`` wrote, checked for p parameters and a gradient batch of ``batch`` (copies
        its arrays). Raises ValueError naming the first malformed field."""
        expect_keys(d, ("phi", "t", "alpha_frozen", "grads", "rng", "stopped"), "SGLD state")
        return cls(expect_array(d["phi"], (p,), "phi"), expect_int(d["t"], "t"),
                   expect_number(d["alpha_frozen"], "alpha_frozen", positive=True, optional=True),
                   expect_array(d["grads"], (batch, p), "grads"), rng_from_state(d["rng"]),
                   expect_stopped(d["stopped"]))


@dataclass
class SGLDResult:
    """draws (n, p) φ after each step; records per iteration: step (n,), frozen (n,) bool, ratio (n,) freeze
    ratio of the batch that ended there (NaN elsewhere), seconds (n,) wall time, plus whatever the gradient
    function reported in ``info`` (arrays of its dicts' values); ``stopped`` holds the divergence message if
    the chain stopped early (draws are then shorter); ``state`` continues the chain."""

    draws: np.ndarray
    step: np.ndarray
    frozen: np.ndarray
    ratio: np.ndarray
    seconds: np.ndarray
    info: dict = field(default_factory=dict)
    stopped: str | None = None
    state: SGLDState | None = None

class SGLD:
    """Preconditioned SGLD with a decreasing, then frozen, step size.

    grad_fn(φ, t) -> ĝ (p,) or (ĝ, info dict): unbiased gradient of the log posterior at φ, iteration t.
    M (p, p) SPD preconditioner (default I); schedule: the decreasing step sizes over the whole run; a
    non-finite gradient or |φ| > ``max_abs_phi`` stops the chain with a message, keeping the draws so far.
    """

    def __init__(self, grad_fn, p: int, *, M=None, schedule: StepSchedule, batch: int = 100,
                 freeze_threshold: float = 0.01, max_abs_phi: float = 30.0):
        if batch < 2:
            raise ValueError(f"batch must be >= 2 iterations, got {batch}")
        if not freeze_threshold > 0:
            raise ValueError(f"freeze_threshold must be > 0, got {freeze_threshold}")
        self.grad_fn, self.p = grad_fn, p
        self.M = check_spd(M, p)
        self.schedule, self.batch = schedule, batch
        self.freeze_threshold, self.max_abs_phi = freeze_threshold, max_abs_phi
        self._chol_M = np.linalg.cholesky(self.M)
        w, U = np.linalg.eigh(self.M)
        self._sqrt_M = (U * np.sqrt(w)) @ U.T

    def init(self, phi0, rng=None, frozen_step: float | None = None) -> SGLDState:
        """The state before iteration 0 (``frozen_step``: start already frozen at that step size)."""
        state = SGLDState.initial(phi0, self.batch, rng, frozen_step)
        if state.phi.size != self.p:
            raise ValueError(f"phi0 has {state.phi.size} entries, expected {self.p}")
        return state

    def run(self, state: SGLDState, n_iter: int, callback=None) -> SGLDResult:
        """Advance ``state`` (in place) by up to n_iter iterations. ``callback(t, φ, record)`` after each."""
        p = self.p
        draws = np.empty((n_iter, p))
        step, ratio = np.empty(n_iter), np.full(n_iter, np.nan)
        frozen, seconds = np.zeros(n_iter, dtype=bool), np.empty(n_iter)
        info: dict = {}
        done = 0
        while done < n_iter and state.stopped is None:
            t, phi = state.t, state.phi
            t0 = time.perf_counter()
            got = checked_gradient(self.grad_fn, phi, t, p, state)
            if got is None:
                break
            g, extra = got
            alpha = state.alpha_frozen if state.alpha_frozen is not None else float(self.schedule(t))
            state.grads[t % self.batch] = g
            if state.alpha_frozen is None and t % self.batch == self.batch - 1:
                Vs = np.cov(state.grads, rowvar=False).reshape(p, p)
                r = float(np.linalg.eigvalsh(alpha / 4.0 * self._sqrt_M @ Vs @ self._sqrt_M).max())
                ratio[done] = r
                if r < self.freeze_threshold:
                    state.alpha_frozen = alpha
            noise = np.sqrt(alpha) * (self._chol_M @ state.rng.standard_normal(p))
            new = phi + 0.5 * alpha * (self.M @ g) + noise
            if not np.all(np.isfinite(new)) or np.abs(new).max() > self.max_abs_phi:
                state.stopped = (f"divergence at iteration {t}: parameter left |φ| <= {self.max_abs_phi} "
                                 f"(φ={new.tolist()}); lower the step size")
                break
            state.phi, state.t = new, t + 1
            draws[done], step[done], frozen[done] = new, alpha, state.alpha_frozen is not None
            for k, v in extra.items():
                info.setdefault(k, []).append(v)
            seconds[done] = time.perf_counter() - t0
            if callback is not None:
                callback(t, new, {"step": alpha, "frozen": frozen[done], "ratio": ratio[done],
                                  "seconds": seconds[done]})
            done += 1
        sl = slice(0, done)
        info = {k: np.asarray(v) for k, v in info.items()}
        return SGLDResult(draws[sl], step[sl], frozen[sl], ratio[sl], seconds[sl], info, state.stopped, state)


def sgld(grad_fn, phi0, n_iter: int, *, M=None, schedule: StepSchedule | None = None, batch: int = 100,
         freeze_threshold: float = 0.01, rng=None, max_abs_phi: float = 30.0,
         frozen_step: float | None = None, callback=None) -> SGLDResult:
    """Run one SGLD chain of n_iter iterations from phi0 (p,); see :class:`SGLD` (default schedule
    1e-2 → 1e-4; rng: Generator or seed)."""
    phi = check_start(phi0)
    sampler = SGLD(grad_fn, phi.size, M=M, schedule=schedule or StepSchedule(1e-2, 1e-4, n_iter),
                   batch=batch, freeze_threshold=freeze_threshold, max_abs_phi=max_abs_phi)
    return sampler.run(sampler.init(phi, rng, frozen_step), n_iter, callback)


@dataclass(frozen=True)
class SGLDSettings:
    """SGLD's own settings (``SamplerConfig.options`` of a run with ``method='sgld'``): the step schedule
    α_t from ``step_start`` to ``step_end`` over ``step_iter`` iterations with exponent ``step_gamma``
    (whitened units of the start's metric), and the freeze rule's ``batch`` and ``freeze_threshold``."""

    step_start: float = setting(0.1, "step size at the first iteration", low=0)
    step_end: float = setting(1e-3, "step size at the end of the schedule", low=0)
    step_gamma: float = setting(0.55, "exponent γ of the schedule α_t = a(b + t)^(−γ)", low=0, high=1,
                                high_open=False)
    step_iter: int | None = setting(None, "iterations the schedule spans (default: the run's length; 2,000 "
                                    "with a target ESS)", low=0)
    batch: int = setting(100, "gradients per judgement of the freeze rule", low=0)
    freeze_threshold: float = setting(0.01, "freeze the step once the noise ratio of a batch falls below it",
                                      low=0)

    def check(self) -> None:
        if self.step_start < self.step_end:
            raise ValueError(f"step_start ({self.step_start}) must be >= step_end ({self.step_end})")


class SGLDSampler(Sampler):
    """``method='sgld'``: the paper's SGLD through ULISSE gradients (4 probes, rank-100 preconditioner).
    SGLD has no adaptation of its own (its step freezes by the paper's rule): its ``n_adapt`` only says where
    the warmup's draws end, by default the first fifth of its step schedule (``step_iter`` iterations: the
    run's length, or 2,000 in target-ESS mode)."""

    name = "sgld"
    label = "SGLD (the paper's)"
    settings = SGLDSettings
    records = {"step": float, "frozen": bool, "ratio": float, "cg_iterations": float, "n_products": float,
               "seconds": float, "warmup": bool}
    monitor = {"step": ("step size", True), "ratio": ("SGLD freeze ratio", True)}

    def resolve(self, cfg) -> None:
        if cfg.options.get("step_iter") is None:
            span = min(2000, cfg.n_iter) if cfg.target_ess is not None else cfg.n_iter
            cfg.options = {**cfg.options, "step_iter": span}

    def adaptation_for_target(self, cfg) -> int:
        return cfg.settings.step_iter // 5

    def validate(self, cfg) -> None:
        if cfg.n_iter < cfg.settings.batch:
            raise ValueError(f"SGLD needs n_iter >= batch ({cfg.settings.batch}) to judge the freeze rule")

    def initial(self, phi0, cfg, M, rng, target) -> SGLDState:
        return SGLDState.initial(phi0, cfg.settings.batch, rng)

    def state_from_dict(self, d: dict, cfg, p: int) -> SGLDState:
        return SGLDState.from_dict(d, p, cfg.settings.batch)

    def run(self, target, cfg, M, state: SGLDState, n: int) -> dict:
        s = cfg.settings
        sampler = SGLD(target.grad, len(state.phi), M=M,
                       schedule=StepSchedule(s.step_start, s.step_end, s.step_iter, s.step_gamma),
                       batch=s.batch, freeze_threshold=s.freeze_threshold, max_abs_phi=cfg.max_abs_phi)
        res = sampler.run(state, n)  # a failing gradient stops the chain with a message, draws kept
        return {"phi": res.draws, "step": res.step, **solver_records(res.info, len(res.draws)),
                "seconds": res.seconds, "frozen": res.frozen, "ratio": res.ratio, "warmup": ~res.frozen}
