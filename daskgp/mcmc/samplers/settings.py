"""A sampler's own settings: the declarations every family's method uses (:mod:`daskgp.inference.settings`:
:func:`setting`, :func:`checked_settings`, …, re-exported here), plus what only the samplers need — the names
of the registered samplers' settings and the converter of daskgp 0.4's flat configuration fields.

The run's configuration (:class:`daskgp.mcmc.config.SamplerConfig`) holds the method's settings as plain data
(``options``, a dict stored with the run) and hands the sampler a checked instance (``cfg.settings``).
"""

from __future__ import annotations

from ...inference.settings import (
    as_options,
    checked_settings,
    flag_name,
    setting,
    setting_type,
    settings_fields,
)
from .registry import AUTO, find_sampler, get_sampler, sampler_names

__all__ = ["setting", "checked_settings", "settings_fields", "setting_type", "flag_name", "as_options",
           "legacy_options", "LEGACY_OPTIONS", "setting_names"]


def setting_names(method: str | None = None) -> set[str]:
    """The names of the settings of the registered sampler ``method``, or (None) of every registered
    sampler's."""
    names = sampler_names() if method is None else [method]
    return {f.name for nm in names for f in settings_fields(get_sampler(nm).settings)}


# the method's own settings that a configuration of daskgp <= 0.4 held as flat fields, with 0.4's defaults;
# they now live in ``options`` (the sampler's settings dataclass: SGLDSettings, SGHMCSettings)
LEGACY_OPTIONS = {"step_start": 0.1, "step_end": 1e-3, "step_gamma": 0.55, "step_iter": None, "batch": 100,
                  "freeze_threshold": 0.01, "friction": 1.5, "h_max": 0.7, "noise_budget": 0.5}


def legacy_options(d: dict, reserved=frozenset()) -> dict:
    """A configuration dict with the method's settings given flat — as every configuration of daskgp <= 0.4
    stored them, and as ``sample(..., step_start=…)`` may still name them — moved into ``options`` (where
    they win over what ``options`` already says): the converter that lets every stored 0.4 run resume. A
    0.4 field that is not a setting of the run's method was inert there and goes. With method 'auto', a
    setting of any registered sampler moves (the chosen one's are checked by
    :meth:`daskgp.mcmc.config.SamplerConfig.for_rows`),
    except 0.4's fields at their 0.4 default. ``reserved``: the configuration's own field names, never
    taken for a setting (a sampler's setting named like one is given through ``options`` only)."""
    method = d.get("method", AUTO)
    sampler = find_sampler(method)
    own = setting_names(sampler.name if sampler is not None else None)
    flat = {k: v for k, v in d.items() if (k in own or k in LEGACY_OPTIONS) and k not in reserved}
    if not flat:
        return d
    out = {k: v for k, v in d.items() if k not in flat}
    if sampler is not None:
        moved = {k: v for k, v in flat.items() if k in own}
    else:
        moved = {k: v for k, v in flat.items() if k not in LEGACY_OPTIONS or v != LEGACY_OPTIONS[k]}
    out["options"] = {**(out.get("options") or {}), **moved}
    return out
