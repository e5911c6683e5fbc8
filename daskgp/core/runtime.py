"""Where and how a fit runs, apart from what it fits (issue 57, item 4): one :class:`FitRuntime` every
estimator's ``fit(X, y, runtime=…)`` takes — the cluster, the progress callback, the checkpoint and whether to
resume from it, whether to keep it, a wall-time budget — so that a notebook, a batch job and the dashboard
hand every family the same object. Each ``fit`` still takes the same names as keywords (0.4's calls); giving
both is refused, and so is a runtime field the family's fit has no use for, in one line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

__all__ = ["FitRuntime", "fit_runtime"]


@dataclass(frozen=True)
class FitRuntime:
    """``client``: a ``distributed.Client`` or a scheduler address to compute on (None: the estimator's
    ``scheduler``, else this process's client, else a local cluster for the fit); ``callback``: called
    with one :class:`daskgp.FitEvent` per step (a sampled regressor's with its run's status per block);
    ``checkpoint``: a folder the fit commits to after every step, ``resume``: continue from it,
    ``keep_checkpoint``: keep it when the fit ends; ``time_budget``: seconds after which the fit stops
    where it is (the families that have one: ADVGP, GPC)."""

    client: object = None
    callback: Callable | None = None
    checkpoint: object = None
    resume: bool = False
    keep_checkpoint: bool = False
    time_budget: float | None = None

    def __post_init__(self):
        if not isinstance(self.resume, bool) or not isinstance(self.keep_checkpoint, bool):
            raise TypeError("resume and keep_checkpoint must be True or False")
        if self.callback is not None and not callable(self.callback):
            raise TypeError(f"callback must be callable, got {type(self.callback).__name__}")
        if self.time_budget is not None and not (isinstance(self.time_budget, (int, float))
                                                 and not isinstance(self.time_budget, bool)
                                                 and self.time_budget > 0):
            raise ValueError(f"time_budget must be a positive number of seconds, got {self.time_budget!r}")
        if self.resume and self.checkpoint is None:
            raise ValueError("resume=True needs the checkpoint to resume from")


_DEFAULTS = {f.name: f.default for f in fields(FitRuntime)}


def fit_runtime(runtime: FitRuntime | None, owner: str, **given) -> FitRuntime:
    """The runtime of one call of ``owner``'s fit: ``runtime`` when given (then every keyword in ``given``
    must be at its default, and every field of ``runtime`` the fit does not take — not among ``given``'s
    names — at its default), else a runtime of the keywords ``given``. ValueError in one line otherwise."""
    if runtime is None:
        return FitRuntime(**given)
    if not isinstance(runtime, FitRuntime):
        raise TypeError(f"runtime must be a daskgp.FitRuntime, got {type(runtime).__name__}")
    both = [k for k, v in given.items() if v is not _DEFAULTS[k] and v != _DEFAULTS[k]]
    if both:
        raise ValueError(f"{owner}.fit: give {', '.join(both)} in the runtime or as keywords, not both")
    unused = [f.name for f in fields(FitRuntime)
              if f.name not in given and getattr(runtime, f.name) != _DEFAULTS[f.name]]
    if unused:
        raise ValueError(f"{owner}.fit takes no {', '.join(unused)} (its runtime: {', '.join(given)})")
    return runtime
