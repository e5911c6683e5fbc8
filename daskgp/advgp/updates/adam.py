"""ADVGP's default update: Adam on the kernel part (one step size for the inducing inputs Z, another for
log σ², log l, log σ²_n) and a natural-gradient step on q(w) from the partitions' summed natural parameters
(:func:`daskgp.advgp.model.natural_step`; Hoffman et al. 2013's step for a conjugate q). Every step is
divided by 1 + the gradients' mean delay (Agarwal & Duchi 2011; see the server's ``_apply``), and a plateau
of the objective halves the step sizes (a constant-step method on stale or minibatch gradients circles its
optimum at a distance proportional to the step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.optim import Adam
from ...inference.settings import setting
from ..model import appended_statistics, natural_step
from .base import ADVGPUpdate

__all__ = ["AdamSettings", "AdamUpdate"]


@dataclass(frozen=True)
class AdamSettings:
    learning_rate: float = setting(0.02, "Adam's step size for log σ², log l and log σ²_n (0: kept fixed)",
                                   low=0.0, low_open=False, high=1.0)
    inducing_rate: float = setting(0.02, "Adam's step size for the inducing inputs Z (0: kept fixed)",
                                   low=0.0, low_open=False, high=1.0, unit="standardised x units")
    q_step: float = setting(0.5, "the natural-gradient step on q(w) (1: the partitions' optimum)", low=0.0,
                            high=1.0, high_open=False)


class AdamUpdate(ADVGPUpdate):
    name = "adam"
    label = "Adam per parameter group and natural steps on q(w) (the default)"
    settings = AdamSettings
    natural_tasks = True
    halves_on_plateau = True

    @staticmethod
    def rates(server, s: AdamSettings) -> np.ndarray:
        """Adam's step per kernel coordinate: Z (standardised x units) apart from log σ², log l, log σ²_n;
        times the step scale the plateaus have set."""
        lr = np.full(server.params.n_kernel, float(s.learning_rate))
        lr[:server.params.Z.size] = float(s.inducing_rate)
        return lr * server.step_scale

    def new_state(self, server, s):
        return Adam(server.params.n_kernel, self.rates(server, s))

    def state_from_dict(self, d, server, s):
        return Adam.from_dict(d, self.rates(server, s))

    def apply(self, server, s, grad, shrink):
        o, k = server.params.n_kernel, server.params.k
        # the tasks sent q(w)'s natural parameters: q(w) first, with the W and β the newest statistics were
        # made at (τ = 0: all of them), then the kernel part along its gradient
        C, D = appended_statistics(grad, server.params)
        theta = server.theta.copy()
        mu, U = natural_step(server.params.with_vector(theta), C, D,
                             float(s.q_step) * server.step_scale * shrink)
        theta[o:o + k], theta[o + k:] = mu, U[np.triu_indices(k)]
        theta[:o] -= server.ada.step(grad[:o]) * shrink
        return theta

    def rescale(self, server, s):
        server.ada.lr = self.rates(server, s)
