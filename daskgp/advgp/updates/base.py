"""The protocol of an ADVGP server update (Peng, Zhe & Qi 2017, section 4): what the parameter server
(:class:`daskgp.advgp.server.ParameterServer`), the estimator and ``daskgp advgp --optimizer`` need of the
rule that turns the partitions' summed gradients into the next θ — so that none of them asks its name.

θ = (kernel part: Z, log σ², log l, log σ²_n; q(w): μ, U). An update owns its optimiser state (plain data in
the server's checkpoint under the update's name), says whether the partitions send q(w)'s natural parameters
instead of its gradient (``natural_tasks``), and what a plateau of the objective does: halve its step sizes
(``halves_on_plateau``) or end the fit.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ...inference.method import Method
from ...inference.registry import Registry

__all__ = ["ADVGPUpdate", "ADVGP_UPDATES", "ENTRY_POINT_GROUP", "register", "unregister", "get_update",
           "update_names"]


class ADVGPUpdate(Method):
    """A server update: the 'advgp' family's :class:`daskgp.inference.Method`. Class attributes: ``name``
    (``ADVGPRegressor(optimizer=…)``, ``daskgp advgp --optimizer``; also the key of its state in a
    checkpoint), ``label`` (one line for ``--help``), ``settings`` (its frozen settings dataclass),
    ``natural_tasks`` (the partitions send q(w)'s natural parameters:
    :func:`daskgp.advgp.model.partition_objective` with ``natural=True``), ``halves_on_plateau`` (a
    plateau of the objective halves the step sizes until the server's last plateau; False: the first
    plateau ends the fit).

    The methods take the server (its θ, the parameters' template, the step scale) and the update's checked
    settings ``s``."""

    family: ClassVar[str] = "advgp"
    natural_tasks: ClassVar[bool] = False
    halves_on_plateau: ClassVar[bool] = False

    def new_state(self, server, s):
        """The optimiser's state at the start of a fit."""
        raise NotImplementedError

    def state_from_dict(self, d: dict, server, s):
        """The optimiser's state from a checkpoint's plain data (its ``to_dict``)."""
        raise NotImplementedError

    def apply(self, server, s, grad: np.ndarray, shrink: float) -> np.ndarray:
        """θ after one update along the partitions' summed ``grad`` (θ's shape), every step times ``shrink``
        (1 / (1 + the gradients' mean delay)); the optimiser state (``server.ada``) advances in place."""
        raise NotImplementedError

    def rescale(self, server, s) -> None:
        """After a plateau halved ``server.step_scale``: carry it into the optimiser's step sizes."""


ENTRY_POINT_GROUP = "daskgp.advgp_updates"
# the family's registry in the one registry of every family's methods (daskgp.inference.registry)
ADVGP_UPDATES = Registry("advgp", ADVGPUpdate, ENTRY_POINT_GROUP, "server update")


def register(update: ADVGPUpdate, *, replace: bool = False) -> ADVGPUpdate:
    """Make ``update`` available under its ``name`` to the server, the estimator and ``daskgp advgp``; a
    name already taken raises ValueError unless ``replace``."""
    return ADVGP_UPDATES.register(update, replace=replace)


def unregister(name: str) -> None:
    """Forget the update ``name`` (a no-op where there is none)."""
    ADVGP_UPDATES.unregister(name)


def get_update(name: str) -> ADVGPUpdate:
    """The registered update ``name``; ValueError naming the registered ones otherwise."""
    return ADVGP_UPDATES.get(name)


def update_names() -> tuple[str, ...]:
    """The registered updates' names, in registration order (the default first)."""
    return ADVGP_UPDATES.names()
