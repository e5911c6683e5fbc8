"""daskgp: Bayesian Gaussian processes on data too big for a Cholesky factorisation, on Dask.

The public names load on first use (PEP 562), so ``import daskgp`` and ``daskgp --help`` do not pay for
dask.distributed, scikit-learn, xarray, zarr and ArviZ until a model or a run needs them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import TYPE_CHECKING

from ._version import __version__

# the module that defines each public name
_WHERE = {
    ".advgp.estimator": ["ADVGPRegressor"],
    ".compute.operator": ["KernelOperator"],
    ".compute.solvers": ["PivotedCholesky", "cg", "ulisse"],
    ".datasets.loaders": ["Dataset", "load", "load_csv"],
    ".datasets.tables": ["Table", "read_table"],
    ".core.kernels": ["RBF", "Kernel", "Matern32", "Matern52", "make_kernel"],
    ".exact.marginal": ["GradientEstimate", "exact_log_marginal", "log_marginal_gradient"],
    ".gpc.classifier": ["SparseGPClassifier"],
    ".mcmc.chains": ["resume", "sample"],
    ".mcmc.config": ["SamplerConfig"],
    ".mcmc.diagnostics": ["open_run", "psrf_evolution", "run_summary"],
    ".mcmc.estimator": ["BayesianGPRegressor"],
    ".sparse.gplvm": ["BayesianGPLVM", "GPLVMClassifier"],
    ".sparse.sgpr": ["SparseGPRegressor"],
}
_LAZY = {name: module for module, names in _WHERE.items() for name in names}

__all__ = ["__version__", "Dataset", "load", "load_csv", "Table", "read_table", "Kernel", "RBF", "Matern32",
           "Matern52", "make_kernel", "KernelOperator", "cg", "ulisse", "PivotedCholesky",
           "exact_log_marginal", "log_marginal_gradient", "GradientEstimate", "SamplerConfig", "sample",
           "resume", "open_run",
           "run_summary", "psrf_evolution", "BayesianGPRegressor", "SparseGPRegressor", "BayesianGPLVM",
           "GPLVMClassifier", "ADVGPRegressor", "SparseGPClassifier"]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'daskgp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Deprecated module names that now live in another layer, each importable for one release with a
    DeprecationWarning: ``daskgp.core.datasets`` is :mod:`daskgp.datasets.loaders` since 0.4 (it goes in
    0.5). The alias lives here, at the top, which may import any layer: a file left under ``core/`` that
    imported ``datasets`` would point up the layers."""

    MOVED = {"daskgp.core.datasets": ("daskgp.datasets.loaders",
                                      "daskgp.core.datasets moved to daskgp.datasets")}

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in self.MOVED else None

    def create_module(self, spec):
        target, message = self.MOVED[spec.name]
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return importlib.import_module(target)  # the module itself: the old name is the same object

    def exec_module(self, module):
        pass  # already executed under its own name


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())  # after the real finders: only names no file answers


if TYPE_CHECKING:  # the names for type checkers and IDEs
    from .advgp.estimator import ADVGPRegressor
    from .compute.operator import KernelOperator
    from .compute.solvers import PivotedCholesky, cg, ulisse
    from .core.kernels import RBF, Kernel, Matern32, Matern52, make_kernel
    from .datasets import Dataset, Table, load, load_csv, read_table
    from .exact.marginal import GradientEstimate, exact_log_marginal, log_marginal_gradient
    from .gpc.classifier import SparseGPClassifier
    from .mcmc.chains import resume, sample
    from .mcmc.config import SamplerConfig
    from .mcmc.diagnostics import open_run, psrf_evolution, run_summary
    from .mcmc.estimator import BayesianGPRegressor
    from .sparse.gplvm import BayesianGPLVM, GPLVMClassifier
    from .sparse.sgpr import SparseGPRegressor
