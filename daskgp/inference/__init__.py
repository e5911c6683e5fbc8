"""Inference methods as the unit of every family (issue 57, item 2): :class:`Method` (a name, a label, its own
settings dataclass), :class:`Registry` (one per family — the samplers' ``'mcmc'``, the classifier updates'
``'gpc'`` — each with its entry-point group for methods of other packages; :func:`registry` and
:func:`families` list them all) and the settings declarations (:mod:`.settings`: :func:`setting`,
:func:`checked_settings`) from which a method's flags, inputs and stored options are generated. A floor just
above ``core/``: it imports nothing of daskgp; each family's protocol subclasses :class:`Method` and makes
its registry here."""

from .method import Method
from .registry import Registry, families, registry
from .settings import checked_settings, setting

__all__ = ["Method", "Registry", "registry", "families", "setting", "checked_settings"]
