"""Deprecated alias of :mod:`daskgp.runs.lock` (moved there in 0.4 with the run store every fit shares;
this name goes in 0.5)."""

import sys
import warnings

from ..runs import lock as _moved

warnings.warn("daskgp.mcmc.runlock moved to daskgp.runs.lock", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
