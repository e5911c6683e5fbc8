"""One progress event for every fit (issue 57, item 4): what a ``fit(..., callback=)`` receives after each
step, and what the command line's progress lines and the dashboard read, the same for SGPR, ADVGP, sparse GP
classification and the GPLVM.

``callback(event)`` takes one :class:`FitEvent`. A callback of two parameters is the shape daskgp 0.4 called
(SGPR and the GPLVM ``(step, bound)``, ADVGP ``(record, params)``, GPC ``(record, state)``): it is still
called that way, with a FutureWarning saying so once per fit (:func:`event_callback`).
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FitEvent", "event_callback"]


@dataclass(frozen=True)
class FitEvent:
    """One finished step of a fit.

    method: the method that made it ('sgpr', 'advgp', 'ep', 'sep', 'adf', 'gplvm'); step: steps finished so
    far (L-BFGS-B iterations, server updates, EP iterations, the GPLVM's global iterations and local steps),
    those before a resume included; total: the most steps the fit takes (None when it is not known);
    objective: the value the method optimises after the step, nats (which one: ``objective_name``: 'bound'
    — SGPR's and the GPLVM's collapsed bound, maximised; '-ELBO' — ADVGP's objective, minimised; 'log Z' —
    the EP evidence, maximised); seconds: wall seconds since this fit call started (ADVGP: since its
    server started); values: the step's other numbers by name (ADVGP: 'staleness', the largest of the
    update's contributions, and 'partition'; GPC: 'train_error', 'grad_norm'); record: the family's own
    record of the step (ADVGP's UpdateRecord, GPC's IterationRecord; None elsewhere); model: the current
    parameters or state, for a held-out measure (ADVGP's ADVGPParams, GPC's EPState; None elsewhere) —
    read it during the callback, it changes with the next step."""

    method: str
    step: int
    objective: float
    objective_name: str
    seconds: float
    total: int | None = None
    values: dict = field(default_factory=dict)
    record: Any = None
    model: Any = None


def _positional(callback) -> int:
    """How many positional arguments ``callback`` requires (1 when it cannot be told)."""
    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):
        return 1
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 1
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in positional and p.default is p.empty for p in params)


def event_callback(callback, legacy, what: str):
    """``callback`` as a function of one :class:`FitEvent` (None stays None). A callback requiring two
    positional arguments is daskgp 0.4's shape: it is called with ``legacy(event)`` (a pair), and a
    FutureWarning naming ``what`` (the estimator) says so."""
    if callback is None:
        return None
    if _positional(callback) >= 2:
        warnings.warn(f"{what}.fit: a callback of two arguments is daskgp 0.4's shape and will be removed; "
                      "take one daskgp.FitEvent (event.step, event.objective, event.record, event.model)",
                      FutureWarning, stacklevel=3)
        return lambda event: callback(*legacy(event))
    return callback
