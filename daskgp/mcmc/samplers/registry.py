"""The sampler registry: name → :class:`daskgp.mcmc.samplers.base.Sampler`.

The built-in samplers register themselves in :mod:`daskgp.mcmc.samplers`; a sampler in another package
registers with :func:`register` (in the processes that run its chains: a local cluster's threads share the
registry, worker processes import it) or, to be found in every process without an import, declares an
entry point in the ``daskgp.samplers`` group naming its :class:`Sampler` subclass, loaded on first lookup.
"""

from __future__ import annotations

import numpy as np

from ...inference.registry import Registry
from .base import Sampler

__all__ = ["register", "unregister", "get_sampler", "find_sampler", "sampler_names", "default_method", "AUTO",
           "ENTRY_POINT_GROUP", "SAMPLERS"]

ENTRY_POINT_GROUP = "daskgp.samplers"
AUTO = "auto"  # SamplerConfig(method=AUTO): the sampler is chosen by the data's size (default_method)


def _keeps_records(sampler: Sampler) -> None:
    missing = {"seconds", "warmup"} - set(sampler.records)
    if missing:
        raise ValueError(f"sampler {sampler.name!r} records no {sorted(missing)}: every sampler records its "
                         "seconds and warmup flags per iteration")


# the family's registry in the one registry of every family's methods (daskgp.inference.registry)
SAMPLERS = Registry("mcmc", Sampler, ENTRY_POINT_GROUP, "sampler", check=_keeps_records)


def register(sampler: Sampler, *, replace: bool = False) -> Sampler:
    """Make ``sampler`` (an instance of a :class:`Sampler` subclass) available under its ``name`` to
    ``SamplerConfig(method=name)``, the driver, ``daskgp sample --method`` and the dashboard. A name already
    taken raises ValueError unless ``replace``. Returns the sampler."""
    return SAMPLERS.register(sampler, replace=replace)


def unregister(name: str) -> None:
    """Forget the sampler ``name`` (a no-op where there is none)."""
    SAMPLERS.unregister(name)


def find_sampler(name) -> Sampler | None:
    """The sampler registered as ``name`` (entry points included), or None."""
    return SAMPLERS.find(name)


def get_sampler(name: str) -> Sampler:
    """The sampler registered as ``name``; ValueError listing the known ones otherwise."""
    return SAMPLERS.get(name)


def sampler_names() -> tuple[str, ...]:
    """The registered samplers' names, in registration order (the built-ins first: SGHMC, the default)."""
    return SAMPLERS.names()


def default_method(n: int, gradient: bool = False) -> str:
    """The sampler ``method='auto'`` runs on n rows: of the registered samplers whose ``default_max_n`` is at
    least n, the one with the smallest (the most specialised; registration order breaks ties); SGHMC has no
    limit; HMC is the default up to 1,400 rows (:data:`daskgp.mcmc.samplers.hmc.HMC_DEFAULT_MAX_N`, from
    its measured crossover with SGHMC). ``gradient``: among the stochastic-gradient
    samplers only (a run that asks for the stochastic ascent as its warmup)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    fits = [s for s in SAMPLERS.methods() if s.default_max_n is not None and n <= s.default_max_n
            and (s.uses_gradient or not gradient)]
    if not fits:
        raise ValueError(f"no registered sampler is a default for {n} rows: name one (method=...)")
    return min(fits, key=lambda s: s.default_max_n).name
