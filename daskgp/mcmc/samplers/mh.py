"""Adaptive random-walk Metropolis–Hastings on the exact GP log posterior — the reference method of
Filippone & Engler (2015, section 4: their "MH" against which SGLD is compared), for data small enough for a
dense Cholesky per iteration.

Gaussian proposals N(φ, s²·C); over the first ``n_adapt`` iterations s is tuned towards an acceptance rate
in ``target_accept`` and C to the adaptation draws' covariance; afterwards the kernel is fixed, so the kept
draws are a valid Markov chain. :class:`MHSampler` is the driver's entry for it (``method='mh'``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ...core.plaindata import expect_array, expect_int, expect_keys, expect_number
from ...core.random import rng_from_state
from .base import Sampler, check_spd, check_start, expect_stopped

__all__ = ["MHState", "MHResult", "RandomWalkMH", "random_walk_mh", "MHSampler"]


@dataclass
class MHState:
    """Where an MH chain is: φ (p,), its log target, the next iteration t, proposal scale s and Cholesky
    factor L of the proposal shape, the adaptation-phase history (draws and acceptances) and the generator."""

    phi: np.ndarray
    logp: float
    t: int
    scale: float
    chol: np.ndarray
    adapt_draws: np.ndarray
    adapt_accepted: np.ndarray
    rng: np.random.Generator
    stopped: str | None = None

    def to_dict(self) -> dict:
        """Plain data: arrays, numbers, the bit generator's state dict."""
        return {"phi": self.phi, "logp": self.logp, "t": self.t, "scale": self.scale, "chol": self.chol,
                "adapt_draws": self.adapt_draws, "adapt_accepted": self.adapt_accepted,
                "rng": self.rng.bit_generator.state, "stopped": self.stopped}

    @classmethod
    def from_dict(cls, d: dict, p: int, n_adapt: int) -> MHState:
        """The state ``to_dict`` wrote, checked for p parameters and ``n_adapt`` adaptation iterations
        (copies its arrays). Raises ValueError naming the first malformed field."""
        expect_keys(d, ("phi", "logp", "t", "scale", "chol", "adapt_draws", "adapt_accepted", "rng",
                        "stopped"), "MH state")
        return cls(expect_array(d["phi"], (p,), "phi"), expect_number(d["logp"], "logp"),
                   expect_int(d["t"], "t"), expect_number(d["scale"], "scale", positive=True),
                   expect_array(d["chol"], (p, p), "chol"),
                   expect_array(d["adapt_draws"], (n_adapt, p), "adapt_draws"),
                   expect_array(d["adapt_accepted"], (n_adapt,), "adapt_accepted", kind="b"),
                   rng_from_state(d["rng"]), expect_stopped(d["stopped"]))


@dataclass
class MHResult:
    """draws (n, p); accepted (n,) bool; logp (n,) log target at the draw; scale (n,) the proposal scale in
    use; seconds (n,); ``state`` continues the chain."""

    draws: np.ndarray
    accepted: np.ndarray
    logp: np.ndarray
    scale: np.ndarray
    seconds: np.ndarray
    state: MHState | None = None


class RandomWalkMH:
    """Random-walk Metropolis–Hastings on log p(φ) with Gaussian proposals N(φ, s²·C).

    During the first ``n_adapt`` iterations the scale s is tuned every 50 steps towards an acceptance rate in
    ``target_accept`` (and C to the sample covariance of the adaptation draws once there are enough); after
    that the kernel is fixed, so the remaining draws are a valid MCMC chain.
    """

    def __init__(self, logp_fn, p: int, *, proposal_cov=None, n_adapt: int = 0,
                 target_accept: tuple[float, float] = (0.2, 0.35)):
        if n_adapt < 0:
            raise ValueError(f"n_adapt must be >= 0, got {n_adapt}")
        self.logp_fn, self.p, self.n_adapt, self.target_accept = logp_fn, p, n_adapt, target_accept
        self.C = np.eye(p) * 0.01 if proposal_cov is None else check_spd(proposal_cov, p)

    def init(self, phi0, rng=None) -> MHState:
        phi = check_start(phi0)
        lp = float(self.logp_fn(phi))
        if not np.isfinite(lp):
            raise ValueError(f"log target is not finite at the start φ={phi.tolist()}")
        return MHState(phi, lp, 0, 2.38 / np.sqrt(self.p), np.linalg.cholesky(self.C),
                       np.zeros((self.n_adapt, self.p)), np.zeros(self.n_adapt, dtype=bool),
                       np.random.default_rng(rng))

    def run(self, state: MHState, n_iter: int) -> MHResult:
        """Advance ``state`` (in place) by n_iter iterations."""
        p = self.p
        draws, acc = np.empty((n_iter, p)), np.zeros(n_iter, dtype=bool)
        logp, scale, seconds = np.empty(n_iter), np.empty(n_iter), np.empty(n_iter)
        for i in range(n_iter):
            t = state.t
            t0 = time.perf_counter()
            prop = state.phi + state.scale * (state.chol @ state.rng.standard_normal(p))
            lq = float(self.logp_fn(prop))
            if np.isfinite(lq) and np.log(state.rng.uniform()) < lq - state.logp:
                state.phi, state.logp, acc[i] = prop, lq, True
            draws[i], logp[i], scale[i] = state.phi, state.logp, state.scale
            state.t = t + 1
            if t < self.n_adapt:
                state.adapt_draws[t], state.adapt_accepted[t] = state.phi, acc[i]
                self._adapt(state, t)
            seconds[i] = time.perf_counter() - t0
        return MHResult(draws, acc, logp, scale, seconds, state)

    def _adapt(self, state: MHState, t: int) -> None:
        if t % 50 != 49:
            return
        rate = state.adapt_accepted[t - 49:t + 1].mean()
        if rate < self.target_accept[0]:
            state.scale *= 0.7
        elif rate > self.target_accept[1]:
            state.scale *= 1.3
        if t >= 499 and t % 250 == 249:  # enough adaptation draws for a proposal shape
            emp = np.cov(state.adapt_draws[t // 2:t + 1], rowvar=False).reshape(self.p, self.p)
            try:
                state.chol = scipy.linalg.cholesky(emp + 1e-10 * np.eye(self.p), lower=True)
            except np.linalg.LinAlgError:
                pass


def random_walk_mh(logp_fn, phi0, n_iter: int, *, proposal_cov=None, n_adapt: int = 0,
                   target_accept: tuple[float, float] = (0.2, 0.35), rng=None) -> MHResult:
    """Run one MH chain of n_iter iterations from phi0 (p,); see :class:`RandomWalkMH`."""
    phi = check_start(phi0)
    sampler = RandomWalkMH(logp_fn, phi.size, proposal_cov=proposal_cov, n_adapt=n_adapt,
                           target_accept=target_accept)
    return sampler.run(sampler.init(phi, rng), n_iter)


class MHSampler(Sampler):
    """``method='mh'``: :class:`RandomWalkMH` on the exact Cholesky log posterior, adapting over the run's
    first ``n_adapt`` iterations (default a fifth; 1,000 in target-ESS mode)."""

    name = "mh"
    label = "MH (exact Cholesky, small n)"
    uses_gradient = False
    records = {"accepted": bool, "logp": float, "scale": float, "seconds": float, "warmup": bool}
    monitor = {"scale": ("MH proposal scale", True)}

    def adaptation_for_target(self, cfg) -> int:
        return 1000

    def check_size(self, cfg, n: int, memory_bytes: float | None) -> None:
        from ...exact.marginal import max_exact_n

        limit = max_exact_n(memory_bytes)
        if n > limit:
            raise MemoryError(f"MH uses the exact Cholesky: n={n} needs {2 * 8 * n * n / 2**30:.1f} GiB, "
                              f"more than this machine can spare (n <= {limit}); use method='sghmc'")

    def initial(self, phi0, cfg, M, rng, target) -> MHState:
        return RandomWalkMH(target.log_density, len(phi0), proposal_cov=M, n_adapt=cfg.adapt).init(phi0, rng)

    def state_from_dict(self, d: dict, cfg, p: int) -> MHState:
        return MHState.from_dict(d, p, cfg.adapt)

    def run(self, target, cfg, M, state: MHState, n: int) -> dict:
        t_start = state.t
        res = RandomWalkMH(target.log_density, len(state.phi), n_adapt=cfg.adapt).run(state, n)
        return {"phi": res.draws, "accepted": res.accepted, "logp": res.logp, "scale": res.scale,
                "seconds": res.seconds, "warmup": t_start + np.arange(n) < cfg.adapt}
