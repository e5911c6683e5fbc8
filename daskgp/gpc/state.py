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
    NaN without one) — above ``SITE_TOL`` the gradient was taken short of EP's fixed point — and the rows of
    its gradient pass (the minibatch's, or n; 0: not recorded, in older checkpoints)."""

    iteration: int
    evidence: float
    train_error: float
    grad_norm: float
    site_passes: int = 0
    site_change: float = float("nan")
    rows: int = 0


@dataclass
class EPState:
    """What a fit carries between iterations: the hyperparameters, the factor (EP, ADF: q's; SEP: the global
    t̃_g), the per-chunk EP site futures, and the optimiser; ``best``: (iteration, params, factor) of the
    highest evidence after :data:`daskgp.gpc.fit.SETTLE_ITERATIONS` — the q that evidence was computed for
    (None before); ``last``: (params, factor) of the q the last record's evidence was computed for (None
    before an iteration of this process). ``params`` and ``factor`` are one Adam step past ``last``: the
    step comes after the iteration's last pass, and a factor kept in k-space stands for another q at the
    stepped parameters — with crowded inducing inputs a very different one (breast cancer's two features,
    m = 30: evidence −51.7 nats for ``last``, −194.8 for the stepped parameters with its factor; test NLL
    0.152 against 0.489). So a fit returns, and a held-out score reads, :meth:`judged` — not the pair it
    carries on."""

    params: GPCParams
    factor: Factor
    adam: Adam
    sites: list | None = None
    records: list = field(default_factory=list)
    best: tuple | None = None
    last: tuple | None = None

    def posterior(self) -> Posterior:
        return Posterior(self.params, self.factor)

    def judged(self) -> tuple:
        """(params, factor) of the q the last record's evidence belongs to (``last``); the carried pair
        before any iteration of this process."""
        return self.last if self.last is not None else (self.params, self.factor)
