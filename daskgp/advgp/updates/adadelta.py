"""The paper's update (Peng, Zhe & Qi 2017, Algorithm 1): ADADELTA (Zeiler 2012) on the whole θ, then the
proximal operator of the KL term on q(w) (eqs. 18–20) with ADADELTA's per-coordinate rate as its γ. It has no
step size to halve: the first plateau of the objective ends the fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.optim import Adadelta
from ...inference.settings import setting
from ..model import prox_h
from .base import ADVGPUpdate

__all__ = ["AdadeltaSettings", "AdadeltaUpdate"]


@dataclass(frozen=True)
class AdadeltaSettings:
    rho: float = setting(0.95, "ADADELTA's decay of its running averages", low=0.0, high=1.0)
    eps: float = setting(1e-6, "ADADELTA's ε (the scale of its first steps)", low=0.0)


class AdadeltaUpdate(ADVGPUpdate):
    name = "adadelta"
    label = "the paper's algorithm: ADADELTA on everything, then the proximal step on q(w)"
    settings = AdadeltaSettings

    def new_state(self, server, s):
        return Adadelta(server.theta.size, s.rho, s.eps)

    def state_from_dict(self, d, server, s):
        return Adadelta.from_dict(d)

    def apply(self, server, s, grad, shrink):
        # the delay's shrink is not applied: ADADELTA's steps are set by its own running averages (the
        # paper's algorithm, as 0.4 ran it)
        o, k = server.params.n_kernel, server.params.k
        delta, rate = server.ada.step(grad)
        theta = server.theta + delta
        stepped = server.params.with_vector(theta)
        iu = np.triu_indices(k)
        rate_U = np.ones((k, k))
        rate_U[iu] = rate[o + k:]
        mu, U = prox_h(stepped.mu, stepped.U, (rate[o:o + k], rate_U))
        theta[o:o + k], theta[o + k:] = mu, U[iu]
        return theta
