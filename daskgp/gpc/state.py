"""What a classifier fit carries between iterations of :func:`daskgp.gpc.fit.run_ep` (:class:`EPState`) and
what it records of each (:class:`IterationRecord`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.optim import Adam
from .ep import Factor, GPCParams, Posterior

__all__ = ["EPState", "IterationRecord"]


@dataclass
class IterationRecord:
    """One iteration: the evidence approximation (nats; an estimate with minibatches), the training error
    rate under q before the iteration's update, the gradient's norm, the site-only passes made before the
    gradient pass and the factor's relative change in the last of them (:func:`daskgp.gpc.fit.factor_change`;
    NaN without one) — above ``SITE_TOL`` the gradient was taken short of EP's fixed point."""

    iteration: int
    evidence: float
    train_error: float
    grad_norm: float
    site_passes: int = 0
    site_change: float = float("nan")


@dataclass
class EPState:
    """What a fit carries between iterations: the hyperparameters, the factor (EP, ADF: q's; SEP: the global
    t̃_g), the per-chunk EP site futures, and the optimiser; ``best``: (iteration, params, factor) of the
    highest evidence after :data:`daskgp.gpc.fit.SETTLE_ITERATIONS` — the q that evidence was computed for
    (None before)."""

    params: GPCParams
    factor: Factor
    adam: Adam
    sites: list | None = None
    records: list = field(default_factory=list)
    best: tuple | None = None

    def posterior(self) -> Posterior:
        return Posterior(self.params, self.factor)
