"""The sparse families' fits as the dashboard shows them: one :class:`FitKind` per family (:mod:`.sgpr`,
:mod:`.advgp`, :mod:`.gpc`, :mod:`.gplvm`), registered by the catalogue's kind name."""

from . import advgp, gpc, gplvm, sgpr  # noqa: F401  (each registers its kind)
from .base import FIT_KINDS, FitKind, fit_kind, register

__all__ = ["FIT_KINDS", "FitKind", "fit_kind", "register"]
