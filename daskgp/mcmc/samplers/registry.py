"""The sampler registry: name → :class:`daskgp.mcmc.samplers.base.Sampler`.

The built-in samplers register themselves in :mod:`daskgp.mcmc.samplers`; a sampler in another package
registers with :func:`register` (in the processes that run its chains: a local cluster's threads share the
registry, worker processes import it) or, to be found in every process without an import, declares an
entry point in the ``daskgp.samplers`` group naming its :class:`Sampler` subclass, loaded on first lookup.
"""

from __future__ import annotations

import threading

import numpy as np

from .base import Sampler

__all__ = ["register", "unregister", "get_sampler", "find_sampler", "sampler_names", "default_method", "AUTO",
           "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "daskgp.samplers"
AUTO = "auto"  # SamplerConfig(method=AUTO): the sampler is chosen by the data's size (default_method)
_REGISTRY: dict[str, Sampler] = {}
_LOCK = threading.Lock()
_entry_points_loaded = False


def register(sampler: Sampler, *, replace: bool = False) -> Sampler:
    """Make ``sampler`` (an instance of a :class:`Sampler` subclass) available under its ``name`` to
    ``SamplerConfig(method=name)``, the driver, ``daskgp sample --method`` and the dashboard. A name already
    taken raises ValueError unless ``replace``. Returns the sampler."""
    if not isinstance(sampler, Sampler):
        raise TypeError(f"a sampler must be an instance of a daskgp.mcmc.samplers.Sampler subclass, got "
                        f"{type(sampler).__name__}")
    name = sampler.name
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise ValueError(f"a sampler's name must be a lower-case identifier, got {name!r}")
    missing = {"seconds", "warmup"} - set(sampler.records)
    if missing:
        raise ValueError(f"sampler {name!r} records no {sorted(missing)}: every sampler records its "
                         "seconds and warmup flags per iteration")
    with _LOCK:
        if name in _REGISTRY and not replace and _REGISTRY[name] is not sampler:
            raise ValueError(f"a sampler named {name!r} is already registered ({_REGISTRY[name]!r})")
        _REGISTRY[name] = sampler
    return sampler


def unregister(name: str) -> None:
    """Forget the sampler ``name`` (a no-op where there is none)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue
        try:  # a broken plugin must not take the built-in samplers (or `daskgp --help`) down with it
            cls = ep.load()
            sampler = cls() if isinstance(cls, type) else cls
            if getattr(sampler, "name", None) != ep.name:
                raise ValueError(f"it names a sampler called {getattr(sampler, 'name', None)!r}")
            register(sampler)
        except Exception as e:  # noqa: BLE001 — any failure of foreign code: one warning naming it
            import warnings

            warnings.warn(f"daskgp: the sampler entry point {ep.name!r} ({ep.value}) was not registered: "
                          f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=3)


def find_sampler(name) -> Sampler | None:
    """The sampler registered as ``name`` (entry points included), or None."""
    if not isinstance(name, str):
        return None
    if name not in _REGISTRY:
        _load_entry_points()
    return _REGISTRY.get(name)


def get_sampler(name: str) -> Sampler:
    """The sampler registered as ``name``; ValueError listing the known ones otherwise."""
    sampler = find_sampler(name)
    if sampler is None:
        raise ValueError(f"method must be one of {sampler_names()}, got {name!r}")
    return sampler


def sampler_names() -> tuple[str, ...]:
    """The registered samplers' names, in registration order (the built-ins first: SGHMC, the default)."""
    _load_entry_points()
    return tuple(_REGISTRY)


def default_method(n: int, gradient: bool = False) -> str:
    """The sampler ``method='auto'`` runs on n rows: of the registered samplers whose ``default_max_n`` is at
    least n, the one with the smallest (the most specialised; registration order breaks ties); SGHMC has no
    limit; HMC is the default up to 1,400 rows (:data:`daskgp.mcmc.samplers.hmc.HMC_DEFAULT_MAX_N`, from
    its measured crossover with SGHMC). ``gradient``: among the stochastic-gradient
    samplers only (a run that asks for the stochastic ascent as its warmup)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    _load_entry_points()
    fits = [s for s in _REGISTRY.values() if s.default_max_n is not None and n <= s.default_max_n
            and (s.uses_gradient or not gradient)]
    if not fits:
        raise ValueError(f"no registered sampler is a default for {n} rows: name one (method=...)")
    return min(fits, key=lambda s: s.default_max_n).name
