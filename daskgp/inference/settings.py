"""A method's own settings (issue 57, items 2–3): a frozen dataclass per method, each field declared with
:func:`setting` (its default, one line of help, its unit and its bounds), so that the run's configuration, a
command's flags, the dashboard's inputs and an estimator's options all come from one declaration — for every
family's method (a sampler's, a classifier update's).

A configuration holds the method's settings as plain data (``options``, a dict stored with the run) and hands
the method a checked instance (:func:`checked_settings`); a method without settings of its own declares none.
A setting left None is resolved by the method when the configuration is made (a sampler's
:meth:`daskgp.mcmc.samplers.Sampler.resolve`) and stored resolved.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import MISSING, asdict, field, fields, is_dataclass

import numpy as np

__all__ = ["setting", "checked_settings", "settings_fields", "setting_type", "flag_name", "as_options"]


def setting(default, help: str, *, low: float | None = None, high: float | None = None,
            low_open: bool = True, high_open: bool = True, unit: str = ""):
    """A dataclass field of a method's settings: ``default`` (an int, a float, or None: resolved by the
    method), ``help`` (one line, for ``--help`` and the dashboard), bounds ``low`` / ``high`` (open unless
    ``low_open`` / ``high_open`` is False), and ``unit`` (for the help text)."""
    return field(default=default, metadata={"help": help, "low": low, "high": high, "low_open": low_open,
                                            "high_open": high_open, "unit": unit})


def settings_fields(cls) -> list:
    """The fields of a settings dataclass (``cls`` None: none)."""
    return list(fields(cls)) if cls is not None else []


def flag_name(name: str) -> str:
    """The command line's flag of a setting: ``step_start`` → ``--step-start``."""
    return "--" + name.replace("_", "-")


def setting_type(f) -> type:
    """int or float: the type of a setting's values, from its declared type (a string under
    ``from __future__ import annotations``)."""
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    return int if t.startswith("int") else float


def _checked_value(owner: str, f, v):
    if v is None:
        if f.default is None:  # left to the sampler's resolve
            return None
        raise ValueError(f"{owner} setting {f.name} must be a number, got None")
    kind = setting_type(f)
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{owner} setting {f.name} must be an integer, got {v!r}")
        v = int(v)
    else:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(v)):
            raise ValueError(f"{owner} setting {f.name} must be a finite number, got {v!r}")
        v = float(v)
    m = f.metadata
    low, high = m.get("low"), m.get("high")
    if low is not None and (v <= low if m.get("low_open", True) else v < low) or \
            high is not None and (v >= high if m.get("high_open", True) else v > high):
        lo = "(" if m.get("low_open", True) else "["
        hi = ")" if m.get("high_open", True) else "]"
        span = f"{lo}{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}{hi}"
        raise ValueError(f"{owner} setting {f.name} must be in {span}, got {v!r}")
    return v


def checked_settings(cls, values: dict | None, owner: str):
    """An instance of the settings dataclass ``cls`` from plain ``values`` (missing keys: the defaults),
    every value checked against its field (type, bounds) and then the class's own ``check()`` for rules
    across fields; a key that is not a setting raises ValueError naming the closest one. ``owner``: the
    method's name, for the messages."""
    values = dict(values or {})
    if cls is None:
        if values:
            raise ValueError(f"{owner} has no settings of its own; got {sorted(values)}")
        return None
    if not is_dataclass(cls):
        raise TypeError(f"a method's settings must be a dataclass, got {cls!r}")
    known = {f.name: f for f in fields(cls)}
    for k in values:
        if k not in known:
            close = difflib.get_close_matches(str(k), list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{owner} has no setting {k!r}{hint}; its settings: {sorted(known)}")
    out = {}
    for name, f in known.items():
        default = f.default if f.default is not MISSING else None
        out[name] = _checked_value(owner, f, values.get(name, default))
    inst = cls(**out)
    check = getattr(inst, "check", None)
    if callable(check):
        check()
    return inst


def as_options(settings) -> dict:
    """A settings instance as the plain data a configuration stores."""
    return {} if settings is None else asdict(settings)
