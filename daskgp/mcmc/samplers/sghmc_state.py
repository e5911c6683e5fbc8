"""The state of an SGHMC chain (:mod:`daskgp.mcmc.samplers.sghmc`) as a checkpoint stores it, and the
records of a run of iterations: plain data in, every field checked on the way back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...core.plaindata import expect_array, expect_int, expect_keys, expect_number
from ...core.random import rng_from_state
from .base import check_spd, check_start, expect_stopped

__all__ = ["SGHMCState", "SGHMCResult"]


@dataclass
class SGHMCState:
    """Where an SGHMC chain is: φ (p,), whitened momentum v (p,), the next iteration t, the gradient at φ
    (p,) (None before the first), the running estimate of the gradient-noise covariance V (p, p) (natural
    coordinates), the step h (whitened time units) and the generator; ``lam`` holds the whitened noise
    eigenvalues seen so far in the current metric's adaptation window. ``metric`` (p, p) is the chain's own
    metric M (None: the sampler's), ``window`` (k, 2p) the adaptation window's [φ, ĝ] pairs so far, and
    ``curvature`` the largest eigenvalue ω² of the whitened Hessian measured last (0 before any)."""

    phi: np.ndarray
    v: np.ndarray
    t: int
    grad: np.ndarray | None
    noise: np.ndarray
    h: float
    lam: np.ndarray
    rng: np.random.Generator
    stopped: str | None = None
    metric: np.ndarray | None = None
    window: np.ndarray | None = None
    curvature: float = 0.0

    @classmethod
    def initial(cls, phi0, h: float, rng=None) -> SGHMCState:
        """The state before iteration 0: momentum drawn from its stationary N(0, I)."""
        phi = check_start(phi0)
        rng = np.random.default_rng(rng)
        return cls(phi, rng.standard_normal(phi.size), 0, None, np.zeros((phi.size, phi.size)), float(h),
                   np.zeros(0), rng)

    def to_dict(self) -> dict:
        """Plain data: arrays, numbers, the bit generator's state dict."""
        return {"phi": self.phi, "v": self.v, "t": self.t, "grad": self.grad, "noise": self.noise,
                "h": self.h, "lam": self.lam, "rng": self.rng.bit_generator.state, "stopped": self.stopped,
                "metric": self.metric, "window": self.window, "curvature": self.curvature}

    @classmethod
    def from_dict(cls, d: dict, p: int) -> SGHMCState:
        """The state ``to_dict`` wrote, checked for p parameters (copies its arrays); a state written before
        the metric adaptation existed (no 'metric', 'window', 'curvature') reads with the sampler's metric.
        Raises ValueError naming the first malformed field."""
        base = ("phi", "v", "t", "grad", "noise", "h", "lam", "rng", "stopped")
        old = isinstance(d, dict) and not {"metric", "window", "curvature"} & set(d)
        expect_keys(d, base if old else base + ("metric", "window", "curvature"), "SGHMC state")
        lam = d["lam"]
        if not (isinstance(lam, np.ndarray) and lam.ndim == 1):
            raise ValueError("lam must be a 1-D float array")
        window = d.get("window")
        if window is not None and not (isinstance(window, np.ndarray) and window.ndim == 2):
            raise ValueError(f"window must be a (k, {2 * p}) float array")
        metric = expect_array(d.get("metric"), (p, p), "metric", optional=True)
        if metric is not None:
            check_spd(metric, p)
        return cls(expect_array(d["phi"], (p,), "phi"), expect_array(d["v"], (p,), "v"),
                   expect_int(d["t"], "t"), expect_array(d["grad"], (p,), "grad", optional=True),
                   expect_array(d["noise"], (p, p), "noise"), expect_number(d["h"], "h", positive=True),
                   expect_array(lam, lam.shape, "lam"), rng_from_state(d["rng"]),
                   expect_stopped(d["stopped"]), metric,
                   None if window is None else expect_array(window, (window.shape[0], 2 * p), "window"),
                   0.0 if old else float(expect_number(d["curvature"], "curvature")))


@dataclass
class SGHMCResult:
    """draws (n, p) φ after each step; per iteration: step (n,) h, noise_fraction (n,) the share of the
    momentum refresh that the gradient noise takes (b·λ_max with b the kick-noise gain of
    :func:`_baoab_noise_gains`; above 1 the excess heats the chain), adapting (n,) bool, seconds (n,),
    grads (n, p) the stochastic gradient ĝ at each draw (for the Stein check of
    :func:`daskgp.mcmc.fidelity.fidelity`), kinetic (n,) the kinetic temperature |v|²/p of the whitened
    momentum after the step (1 − h²ω²/4 in equilibrium on a Gaussian of whitened curvature ω²; far above 1
    the chain runs hot), stability (n,) h·ω_max, the step against the largest measured whitened curvature
    (BAOAB is unstable from 2), plus the gradient function's numeric ``info``; ``stopped`` holds the
    divergence message if the chain stopped early; ``state`` continues the chain."""

    draws: np.ndarray
    step: np.ndarray
    noise_fraction: np.ndarray
    adapting: np.ndarray
    seconds: np.ndarray
    info: dict = field(default_factory=dict)
    stopped: str | None = None
    state: SGHMCState | None = None
    grads: np.ndarray | None = None
    kinetic: np.ndarray | None = None
    stability: np.ndarray | None = None
