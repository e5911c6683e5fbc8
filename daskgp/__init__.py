"""daskgp: Bayesian Gaussian processes on data too big for a Cholesky factorisation, on Dask.

The public names load on first use (PEP 562), so ``import daskgp`` and ``daskgp --help`` do not pay for
dask.distributed, scikit-learn, xarray, zarr and ArviZ until a model or a run needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

# the module that defines each public name
_WHERE = {
    ".advgp.estimator": ["ADVGPRegressor"],
    ".compute.operator": ["KernelOperator"],
    ".compute.solvers": ["PivotedCholesky", "cg", "ulisse"],
    ".datasets.loaders": ["Dataset", "load", "load_csv"],
    ".datasets.tables": ["Table", "read_table"],
    ".core.events": ["FitEvent"],
    ".core.runtime": ["FitRuntime"],
    ".model.kernels": ["RBF", "Kernel", "Matern32", "Matern52", "make_kernel"],
    ".exact.marginal": ["GradientEstimate", "exact_log_marginal", "log_marginal_gradient"],
    ".gpc.classifier": ["SparseGPClassifier"],
    ".mcmc.chains": ["resume", "sample"],
    ".mcmc.config": ["SamplerConfig"],
    ".mcmc.diagnostics": ["open_run", "psrf_evolution", "run_summary"],
    ".mcmc.estimator": ["BayesianGPRegressor"],
    ".sparse.gplvm": ["BayesianGPLVM"],
    ".sparse.gplvm_classifier": ["GPLVMClassifier"],
    ".sparse.sgpr": ["SparseGPRegressor"],
}
_LAZY = {name: module for module, names in _WHERE.items() for name in names}

__all__ = ["__version__", "Dataset", "load", "load_csv", "Table", "read_table", "Kernel", "RBF", "Matern32",
           "Matern52", "make_kernel", "KernelOperator", "cg", "ulisse", "PivotedCholesky",
           "exact_log_marginal", "log_marginal_gradient", "GradientEstimate", "SamplerConfig", "sample",
           "resume", "open_run",
           "run_summary", "psrf_evolution", "BayesianGPRegressor", "SparseGPRegressor", "BayesianGPLVM",
           "GPLVMClassifier", "ADVGPRegressor", "SparseGPClassifier", "FitEvent", "FitRuntime"]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'daskgp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the names for type checkers and IDEs
    from .advgp.estimator import ADVGPRegressor
    from .compute.operator import KernelOperator
    from .compute.solvers import PivotedCholesky, cg, ulisse
    from .core.events import FitEvent
    from .core.runtime import FitRuntime
    from .datasets import Dataset, Table, load, load_csv, read_table
    from .exact.marginal import GradientEstimate, exact_log_marginal, log_marginal_gradient
    from .gpc.classifier import SparseGPClassifier
    from .mcmc.chains import resume, sample
    from .mcmc.config import SamplerConfig
    from .mcmc.diagnostics import open_run, psrf_evolution, run_summary
    from .mcmc.estimator import BayesianGPRegressor
    from .model.kernels import RBF, Kernel, Matern32, Matern52, make_kernel
    from .sparse.gplvm import BayesianGPLVM
    from .sparse.gplvm_classifier import GPLVMClassifier
    from .sparse.sgpr import SparseGPRegressor
