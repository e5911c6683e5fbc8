"""What the dashboard shows of one family's sparse fit (issue 57, item 3): a :class:`FitKind` per family —
its checkpoint class, what its objective is, how its trace reads from a checkpoint's state and from a
results file, its held-out metrics and its own figures — registered by name, so the page, the fit's reader
and the figures ask the fit's kind for what it shows instead of branching on its name.
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd

__all__ = ["FitKind", "FIT_KINDS", "fit_kind", "register", "bound_trace"]

FIT_KINDS: dict[str, FitKind] = {}


class FitKind:
    """One family's fit as the page shows it. ``name``: the catalogue's kind (``daskgp.runs.catalog``);
    ``checkpoint``: its checkpoint class as 'module:Class'; ``what``: its objective in words (nats);
    ``unit``: what a commit of the checkpoint is ('steps', a GPLVM's 'rounds'); ``heldout``: the held-out
    metrics the command line logs — (metric column, log-density column, metric label, log-density label) —
    or None; ``trace_note``: how the step counter reads (None: 'N steps'); ``method_flag`` and
    ``method_label``: the family command's flag that picks one of its registered methods and the page's
    menu label, ``default_method`` the command's default (see :meth:`methods`)."""

    name = ""
    checkpoint = ""
    what = ""
    unit = "steps"
    heldout: tuple[str, str, str, str] | None = None
    trace_note: str | None = None
    method_flag = "--method"
    method_label = "Method"
    default_method: str | None = None  # the command's default method (None: the registry's first)

    def methods(self):
        """The family's registry of methods (a :class:`daskgp.inference.Registry`) whose every method the
        page's fit form offers (a third-party one too), or None: the family has one way to fit."""
        return None

    def store(self, path: str):
        """The family's checkpoint (a :class:`daskgp.runs.fits.FitStore`) at ``path``, read-only use."""
        module, cls = self.checkpoint.split(":")
        return getattr(importlib.import_module(module), cls)(path)

    def trace(self, state: dict) -> pd.DataFrame:
        """One row per committed step of the decoded checkpoint ``state``: ``step``, ``objective`` and the
        family's own columns."""
        raise NotImplementedError

    def results(self, ds, out) -> None:
        """Fill ``out`` (:class:`daskgp.interface.fitview.FitResults`: its trace and extras) from the
        finished fit's results file ``ds`` (an xarray Dataset). KeyError when a variable is missing."""
        raise NotImplementedError

    def latent(self, path: str):
        """The points the family draws from its checkpoint at ``path`` (the GPLVM's latent means), or
        None."""
        return None

    def extra_figures(self) -> dict:
        """The family's own Bokeh figures by name, their sources kept on the returned dict's
        ``"_sources"`` entry (read by :meth:`update_extra` and :meth:`update_calibration`)."""
        return {}

    def update_extra(self, sources: dict, trace: pd.DataFrame, latent=None, staleness=None) -> None:
        """Put a new trace (and the latent points, a results file's staleness counts) into ``sources``."""

    def update_calibration(self, sources: dict, heldout: pd.DataFrame, calibration=None) -> None:
        """Put the held-out log's (or a results file's) reliability bins into ``sources``."""


def register(kind: FitKind) -> FitKind:
    FIT_KINDS[kind.name] = kind
    return kind


def fit_kind(name: str) -> FitKind:
    """The registered :class:`FitKind` of ``name``; ValueError naming the known ones otherwise."""
    try:
        return FIT_KINDS[name]
    except KeyError:
        raise ValueError(f"no trace view for a {name!r} fit (known: {', '.join(FIT_KINDS)})") from None


def bound_trace(state: dict) -> pd.DataFrame:
    """SGPR's and the GPLVM's checkpoint trace: the bound per step, with the fit's wall seconds where the
    checkpoint recorded them for every step (SGPR since daskgp 0.6)."""
    trace = np.asarray(state["trace"], float)
    out = pd.DataFrame({"step": np.arange(1, len(trace) + 1), "objective": trace})
    secs = np.asarray(state.get("seconds", []), float)
    if secs.shape == trace.shape and np.isfinite(secs).all():
        out["seconds"] = secs
    return out
