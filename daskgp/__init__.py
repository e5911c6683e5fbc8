"""daskgp: Bayesian Gaussian processes on data too big for a Cholesky factorisation, on Dask."""

from ._version import __version__
from .chains import SamplerConfig, resume, sample
from .datasets import Dataset, load, load_csv
from .diagnostics import open_run, psrf_evolution, run_summary
from .estimator import BayesianGPRegressor
from .gplvm import BayesianGPLVM, GPLVMClassifier
from .kernels import RBF, Kernel, Matern32, Matern52, make_kernel
from .linalg import KernelOperator
from .marginal import GradientEstimate, exact_log_marginal, log_marginal_gradient
from .sgpr import SparseGPRegressor
from .solvers import PivotedCholesky, cg, ulisse

__all__ = ["__version__", "Dataset", "load", "load_csv", "Kernel", "RBF", "Matern32", "Matern52",
           "make_kernel", "KernelOperator", "cg", "ulisse", "PivotedCholesky", "exact_log_marginal",
           "log_marginal_gradient", "GradientEstimate", "SamplerConfig", "sample", "resume", "open_run",
           "run_summary", "psrf_evolution", "BayesianGPRegressor", "SparseGPRegressor", "BayesianGPLVM",
           "GPLVMClassifier"]
