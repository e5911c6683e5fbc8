"""Hamiltonian Monte Carlo with the exact gradient and an accept step (``method='hmc'``): the small-n path of
issue 55, for data where a dense Cholesky gradient costs less than the iterative one of Filippone & Engler
(2015) — on concrete's 1,030 rows an exact gradient takes about 10 ms against about 0.75 s for SGHMC's
32-probe ULISSE one.

The dynamics are leapfrog steps (Duane et al. 1987; Neal 2011, section 5.3) in the whitened coordinates
q = L⁻¹φ of a dense metric M = LLᵀ, with the Metropolis accept step that makes the chain exact for any step.
The sampler's trajectories integrate the gradient in single precision between their ends where its error
is small (the ends and the accept step read the exact one: exact for any force that depends on the position
only; :class:`HMC`).
The trajectory's length is drawn at every iteration from U(0.8, 1.2)·π/2 whitened time units — a quarter of
the oscillation period of a Gaussian whose covariance is M, after which its position is independent of where
it started; the draw avoids the resonances of a fixed length (Neal 2011, section 5.4.2.2).

Adaptation over the run's first ``n_adapt`` iterations (Stan's scheme, Hoffman & Gelman 2014, section 3.2;
Stan reference manual, "HMC algorithm parameters"): the step ε by dual averaging towards an acceptance
probability of :data:`TARGET_ACCEPT`; the metric at the end of each of three expanding windows
(:func:`metric_windows`), from the covariance of that window's draws shrunk towards the metric in use (first
the warmup's: the exact Laplace covariance at the exact MAP), after each of which the step's adaptation
restarts; an adaptation shorter than :data:`METRIC_WINDOWS_MIN_ADAPT` tunes the step only. From ``n_adapt``
on both are fixed: the kept draws are a valid Markov chain.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ...core.plaindata import expect_array, expect_int, expect_keys, expect_number
from ...core.random import rng_from_state
from .base import Sampler, check_spd, check_start, expect_stopped

__all__ = ["HMC", "HMCState", "HMCSampler", "TARGET_ACCEPT", "MAX_LEAPFROG", "metric_windows",
           "METRIC_WINDOWS_MIN_ADAPT"]

TARGET_ACCEPT = 0.8  # Stan's default δ
# The shortest adaptation that re-estimates the metric; a shorter one tunes the step only and keeps the
# start's (the exact Laplace covariance at the exact MAP). Its windows would hold a dozen draws or so, and a
# covariance from k draws has sds off by about 1/√(2k), 20 % at k = 12 — worse than the exact Laplace
# covariance where the posterior is near Gaussian. Measured (benchmarks/hmc_adaptation.py, results/
# hmc_adaptation.json and hmc_adaptation_steponly.json; ESS 400 and R-hat < 1.01, 4 chains, 3 paired seeds):
# 50 iterations with windows ([6, 10), [10, 19), [19, 37)) were 2.1x and 1.2x slower than 150 in one seed of
# each of concrete and 1,000 power_plant rows (R-hat above 1.01 for hundreds of draws); 50 of the step only
# were faster than 150 with windows in all six, 0.57-0.60x and 0.37-0.59x.
METRIC_WINDOWS_MIN_ADAPT = 100
MAX_LEAPFROG = 256  # steps per trajectory at most: an adapted step far below π/2 / 256 means a bad metric
_DIVERGENCE = 1000.0  # an energy error above this (nats) ends the trajectory as divergent (Stan's threshold)
# dual averaging's constants (Hoffman & Gelman 2014, section 3.2.1)
_GAMMA, _T0, _KAPPA = 0.05, 10.0, 0.75
_PRIOR_DRAWS = 5.0  # pseudo-draws of the current metric in each window's re-estimate


@dataclass
class HMCState:
    """Where an HMC chain is: φ (p,), its log density and gradient, the next iteration t, the step ε, the
    dual averaging's (mu, log ε̄, H̄, its iteration count m), the Cholesky factor L of the metric M = LLᵀ,
    the adaptation draws kept for the metric's re-estimate (k, p) and the generator."""

    phi: np.ndarray
    logp: float
    grad: np.ndarray
    t: int
    eps: float
    mu: float
    log_eps_bar: float
    h_bar: float
    m: int
    chol: np.ndarray
    window: np.ndarray
    rng: np.random.Generator
    stopped: str | None = None

    def to_dict(self) -> dict:
        """Plain data: arrays, numbers, the bit generator's state dict."""
        return {"phi": self.phi, "logp": self.logp, "grad": self.grad, "t": self.t, "eps": self.eps,
                "mu": self.mu, "log_eps_bar": self.log_eps_bar, "h_bar": self.h_bar, "m": self.m,
                "chol": self.chol, "window": self.window, "rng": self.rng.bit_generator.state,
                "stopped": self.stopped}

    @classmethod
    def from_dict(cls, d: dict, p: int) -> HMCState:
        """The state ``to_dict`` wrote, checked for p parameters (copies its arrays); ValueError naming the
        first malformed field."""
        expect_keys(d, ("phi", "logp", "grad", "t", "eps", "mu", "log_eps_bar", "h_bar", "m", "chol",
                        "window", "rng", "stopped"), "HMC state")
        chol = expect_array(d["chol"], (p, p), "chol")
        check_spd(chol @ chol.T, p)
        w = d["window"]
        k = w.shape[0] if isinstance(w, np.ndarray) and w.ndim == 2 else -1
        return cls(expect_array(d["phi"], (p,), "phi"), expect_number(d["logp"], "logp"),
                   expect_array(d["grad"], (p,), "grad"), expect_int(d["t"], "t"),
                   expect_number(d["eps"], "eps", positive=True), expect_number(d["mu"], "mu"),
                   expect_number(d["log_eps_bar"], "log_eps_bar"), expect_number(d["h_bar"], "h_bar"),
                   expect_int(d["m"], "m"), chol, expect_array(w, (k, p), "window"), rng_from_state(d["rng"]),
                   expect_stopped(d["stopped"]))


class HMC:
    """HMC on a log density with its exact gradient, ``logp_grad(φ) -> (log p, ∇log p)`` (−inf where it
    cannot be evaluated), in the metric ``M`` (p, p); adapting over the first ``n_adapt`` iterations (see the
    module). ``accept`` False skips the accept step — biased, kept only as the tests' known-wrong variant;
    ``tick(t)``, when given, is called as iteration t begins (progress).

    ``force(φ) -> (p,)``, when given, is what a trajectory's inner steps integrate instead of ∇log p — any
    deterministic function of φ (non-finite where it cannot be evaluated), e.g. the gradient in single
    precision; its half steps at both ends, and the accept step, read ``logp_grad``. The chain stays exact:
    each kick by a force that depends on the position only is a volume-preserving shear, and the leapfrog's
    sequence of kicks and drifts is symmetric (the same forces at the same positions backwards), so the
    trajectory is reversible and the accept step on the exact energy keeps the posterior invariant (Neal
    2011, section 5.5.1.2; Rasmussen 2003 integrates a GP surrogate's gradient so). A worse force costs
    acceptance, never correctness."""

    def __init__(self, logp_grad, p: int, *, n_adapt: int = 0, target_accept: float = TARGET_ACCEPT,
                 accept: bool = True, tick=None, force=None):
        if n_adapt < 0:
            raise ValueError(f"n_adapt must be >= 0, got {n_adapt}")
        if not 0 < target_accept < 1:
            raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
        self.logp_grad, self.p, self.n_adapt, self.force = logp_grad, p, n_adapt, force
        self._windows = metric_windows(n_adapt)
        self.delta, self.accept, self.tick = target_accept, accept, tick

    def init(self, phi0, M, rng=None) -> HMCState:
        """The state before iteration 0 at φ₀ in the metric M, its first step chosen as Hoffman & Gelman's
        (2014, algorithm 4) heuristic: halved or doubled from 1 until one leapfrog step's acceptance crosses
        ½."""
        phi = check_start(phi0)
        L = np.linalg.cholesky(check_spd(M, self.p))
        lp, g = self._eval(phi)
        if not np.isfinite(lp):
            raise ValueError(f"log target is not finite at the start φ={phi.tolist()}")
        rng = np.random.default_rng(rng)
        eps = self._first_step(phi, lp, g, L, rng)
        return HMCState(phi, lp, g, 0, eps, math.log(10 * eps), 0.0, 0.0, 0, L, np.zeros((0, self.p)), rng)

    def _eval(self, phi):
        lp, g = self.logp_grad(phi)
        g = np.asarray(g, dtype=float)
        if not np.isfinite(lp) or not np.all(np.isfinite(g)):
            return -np.inf, np.zeros(self.p)
        return float(lp), g

    def _inner(self, phi):
        """The force of an inner step: ``force`` where given (None where it is not finite), else ∇log p
        (None where log p is not)."""
        if self.force is None:
            lp, g = self._eval(phi)
            return g if np.isfinite(lp) else None
        g = np.asarray(self.force(phi), dtype=float)
        return g if np.all(np.isfinite(g)) else None

    def _first_step(self, phi, lp, g, L, rng) -> float:
        eps = 1.0
        r = rng.standard_normal(self.p)

        def log_ratio(e):
            _, lq, _, rq = self._leapfrog(phi, g, r, L, e, 1)
            return lq - 0.5 * rq @ rq - (lp - 0.5 * r @ r)

        a = 1.0 if log_ratio(eps) > math.log(0.5) else -1.0
        for _ in range(50):
            lr = log_ratio(eps)
            if not (a * lr > -a * math.log(2.0)) or not np.isfinite(lr):
                break
            eps *= 2.0**a
        return float(np.clip(eps, 1e-4, 2.0))

    def _leapfrog(self, phi, g, r, L, eps, steps):
        """``steps`` leapfrog steps of size ε in whitened coordinates from (φ, r), g = ∇log p(φ); returns
        (φ', log p(φ'), ∇log p(φ'), r'). The full kicks between the ends by the inner force (the class's
        docstring). Stops at the first non-finite log density or force (log p = −inf)."""
        q = np.zeros(self.p)  # the whitened displacement from φ: φ' = φ + L q
        r = r + 0.5 * eps * (L.T @ g)
        for _ in range(steps - 1):
            q = q + eps * r
            g = self._inner(phi + L @ q)
            if g is None:
                return phi + L @ q, -np.inf, np.zeros(self.p), r
            r = r + eps * (L.T @ g)
        q = q + eps * r
        lp, g = self._eval(phi + L @ q)
        if not np.isfinite(lp):
            return phi + L @ q, -np.inf, g, r
        return phi + L @ q, lp, g, r + 0.5 * eps * (L.T @ g)

    def run(self, state: HMCState, n_iter: int) -> dict:
        """Advance ``state`` in place by n_iter iterations; the records: 'phi' (n, p), 'accepted', 'logp',
        'step', 'n_leapfrog', 'accept_prob', 'divergent', 'seconds' (n,)."""
        p = self.p
        out = {"phi": np.empty((n_iter, p)), "accepted": np.zeros(n_iter, dtype=bool),
               "logp": np.empty(n_iter), "step": np.empty(n_iter), "n_leapfrog": np.empty(n_iter),
               "accept_prob": np.empty(n_iter), "divergent": np.zeros(n_iter, dtype=bool),
               "seconds": np.empty(n_iter)}
        for i in range(n_iter):
            t0 = time.perf_counter()
            t, rng, L = state.t, state.rng, state.chol
            if self.tick is not None:
                self.tick(t)
            length = rng.uniform(0.8, 1.2) * math.pi / 2
            steps = int(min(MAX_LEAPFROG, max(1, math.ceil(length / state.eps))))
            r = rng.standard_normal(p)
            phi1, lp1, g1, r1 = self._leapfrog(state.phi, state.grad, r, L, state.eps, steps)
            h0 = -state.logp + 0.5 * r @ r
            h1 = -lp1 + 0.5 * r1 @ r1 if np.isfinite(lp1) else np.inf
            divergent = not np.isfinite(h1) or h1 - h0 > _DIVERGENCE
            prob = 0.0 if divergent else float(min(1.0, math.exp(min(0.0, h0 - h1))))
            u = rng.uniform()
            if not divergent and (not self.accept or u < prob):
                state.phi, state.logp, state.grad = phi1, lp1, g1
                out["accepted"][i] = True
            out["phi"][i], out["logp"][i], out["step"][i] = state.phi, state.logp, state.eps
            out["n_leapfrog"][i], out["accept_prob"][i], out["divergent"][i] = steps, prob, divergent
            state.t = t + 1
            if t < self.n_adapt:
                self._adapt(state, t, prob)
            out["seconds"][i] = time.perf_counter() - t0
        return out

    def _adapt(self, state: HMCState, t: int, prob: float) -> None:
        """Dual averaging of log ε towards acceptance δ; the metric re-estimated at the end of each of
        :func:`metric_windows` from its draws; ε̄ fixed at the adaptation's end."""
        state.m += 1
        m = state.m
        state.h_bar = (1 - 1 / (m + _T0)) * state.h_bar + (self.delta - prob) / (m + _T0)
        log_eps = state.mu - math.sqrt(m) / _GAMMA * state.h_bar
        w = m ** -_KAPPA
        state.log_eps_bar = w * log_eps + (1 - w) * state.log_eps_bar
        state.eps = float(math.exp(log_eps))
        window = next(((a, b) for a, b in self._windows if a <= t < b), None)
        if window is not None:
            state.window = np.vstack([state.window, state.phi])
        if window is not None and t == window[1] - 1 and len(state.window) >= 2 * self.p + 2:
            k = len(state.window)
            S = np.cov(state.window, rowvar=False).reshape(self.p, self.p)
            M = (k * S + _PRIOR_DRAWS * (state.chol @ state.chol.T)) / (k + _PRIOR_DRAWS)
            try:
                L_new = np.linalg.cholesky(M)
            except np.linalg.LinAlgError:  # a degenerate window (a stuck chain): keep the metric
                L_new = state.chol
            # ε in the new whitened units is about the old one's: restart the averaging from it
            state.chol, state.window = L_new, np.zeros((0, self.p))
            state.mu, state.h_bar, state.m, state.log_eps_bar = math.log(10 * state.eps), 0.0, 0, 0.0
        if t == self.n_adapt - 1 and state.m > 0:
            state.eps = float(math.exp(state.log_eps_bar))


def metric_windows(n_adapt: int) -> list[tuple[int, int]]:
    """The adaptation's metric windows [a, b), iterations: Stan's expanding windows (Stan reference manual,
    "Automatic parameter tuning") scaled to ``n_adapt`` — the first eighth only tunes the step, then windows
    of 1, 2 and 4 units up to three quarters, each ending in a re-estimate of the metric from its own draws
    (in the metric the previous one set), and the last quarter tunes the step in the final metric. One
    re-estimate could not widen a metric far too narrow: its draws, taken in that metric, explore too little
    of the posterior (2,000 power_plant rows: the lengthscale's sd 2.4× the exact Laplace one's). None below
    :data:`METRIC_WINDOWS_MIN_ADAPT` iterations: the step only, in the start's metric."""
    if n_adapt < METRIC_WINDOWS_MIN_ADAPT:
        return []
    start, end = n_adapt // 8, (3 * n_adapt) // 4
    unit = (end - start) / 7
    edges = [start, start + round(unit), start + round(3 * unit), end]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


# The most rows for which method='auto' runs HMC rather than SGHMC, from their wall times to the same target
# (ESS 400 bulk and tail, R-hat < 1.01; 4 chains, 2 workers, both samplers' defaults) measured side by side
# (benchmarks/small_n_crossover.py, results/small_n_crossover.json). First measured crossing at about 1,400
# rows (HMC 1.45x SGHMC's time on 2,000 house_8L rows, one seed, when HMC adapted 150 iterations with metric
# windows). Since its 50-iteration step-only adaptation and single-precision inner steps HMC is ahead in
# every seed on 1,030 and on 2,000 unimodal rows (0.44× SGHMC's time), but on the two-mode 2,000
# power_plant rows it took 2.85×, 5.98× and 1.75× SGHMC's (seeds 0–2, 2026-11-30: its tail ESS of the
# lengthscale, which spans both modes, was the limit). 'auto' cannot tell a two-mode posterior before it
# runs, so the limit is where the worst case crosses, to the nearest hundred rows: 1,362, log-linear between
# concrete's 0.44 and the three seeds' geometric mean 3.10 (the benchmark's crossover_estimate_rows); it was
# 1,300 from seeds 0–1 (1,310), 1,400 from seed 0 alone (1,380).
HMC_DEFAULT_MAX_N = 1400


class HMCSampler(Sampler):
    """``method='hmc'``: :class:`HMC` on the exact Cholesky log posterior and gradient, from the 'map'
    warmup's exact MAP in its exact Laplace covariance, adapting over the run's first ``n_adapt``
    iterations (default a fifth; 50 in target-ESS mode, the step only). The chain computes its own Cholesky
    gradients (O(n³) each, on the worker that runs it): for data small enough for a Cholesky
    (:meth:`check_size`)."""

    name = "hmc"
    label = "HMC (exact Cholesky gradient, accept step; small n)"
    default_max_n = HMC_DEFAULT_MAX_N
    uses_gradient = False
    records = {"accepted": bool, "logp": float, "step": float, "n_leapfrog": float, "accept_prob": float,
               "divergent": bool, "seconds": float, "warmup": bool}
    monitor = {"step": ("HMC step size (whitened)", True), "n_leapfrog": ("HMC leapfrog steps", True)}

    def adaptation_for_target(self, cfg) -> int:
        # The chains start in the exact Laplace covariance at the exact MAP, so the adaptation tunes the step
        # in that metric; it does not learn one from nothing (Stan's 1,000 iterations do, for NUTS from a
        # unit metric). Dual averaging settles within about 50 iterations (Hoffman & Gelman 2014, figure 3).
        # 50 of the step only reached ESS 400 sooner than the former 150 with three metric windows in each of
        # 6 paired runs (METRIC_WINDOWS_MIN_ADAPT): concrete's sampling 91-123 s -> 51-72 s. A posterior the
        # Laplace covariance describes badly (two modes: 2,000 power_plant rows) wants the windows: set
        # n_adapt >= METRIC_WINDOWS_MIN_ADAPT.
        return 50

    def block_for_target(self, cfg) -> int:
        # An HMC draw on concrete is worth about one effective sample (bulk 1.3-1.9, tail 0.85 per draw):
        # blocks of 100 overshot a target of 400 by half (200 kept draws per chain where about 115 met it,
        # 25 % of the run's iterations). A block of 25 costs a commit and an ArviZ ESS check on the client
        # every few seconds of the chains' work, a few per cent.
        return 25

    def check_size(self, cfg, n: int, memory_bytes: float | None) -> None:
        from ...exact.marginal import max_exact_n

        limit = max_exact_n(memory_bytes)
        if n > limit:
            need = 2 * 8 * n * n / 2**30
            raise MemoryError(f"HMC uses the exact Cholesky gradient: n={n} needs {need:.1f} "
                              f"GiB, more than this machine can spare (n <= {limit}); use method='sghmc'")

    @staticmethod
    def _hmc(target, p: int, cfg, tick=None) -> HMC:
        # a trajectory's inner steps integrate the single-precision gradient where its error is small (0.56-
        # 0.65x a double one's time at 1,000-2,000 rows); its ends, the exact double one (HMC's docstring)
        return HMC(target.log_density_and_grad, p, n_adapt=cfg.adapt, tick=tick, force=target.force)

    def initial(self, phi0, cfg, M, rng, target) -> HMCState:
        return self._hmc(target, len(phi0), cfg).init(phi0, M, rng)

    def state_from_dict(self, d: dict, cfg, p: int) -> HMCState:
        return HMCState.from_dict(d, p)

    def run(self, target, cfg, M, state: HMCState, n: int) -> dict:
        t_start = state.t
        res = self._hmc(target, len(state.phi), cfg, tick=getattr(target, "tick", None)).run(state, n)
        res["warmup"] = t_start + np.arange(n) < cfg.adapt
        return res
