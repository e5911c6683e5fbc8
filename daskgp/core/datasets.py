"""Deprecated alias of :mod:`daskgp.datasets.loaders` (the data sets moved out of the core in 0.4; the
fingerprint is :mod:`daskgp.core.fingerprint`; this name goes in 0.5)."""

import sys
import warnings

from ..datasets import loaders as _moved

warnings.warn("daskgp.core.datasets moved to daskgp.datasets", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
