"""Deprecated alias of :mod:`daskgp.runs.draws` (moved there in 0.4 with the run store every fit shares;
this name goes in 0.5)."""

import sys
import warnings

from ..runs import draws as _moved

warnings.warn("daskgp.mcmc.runstore moved to daskgp.runs.draws", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
