"""daskgp: Bayesian Gaussian processes on data too big for a Cholesky factorisation, on Dask."""

from ._version import __version__
from .advgp.estimator import ADVGPRegressor
from .compute.operator import KernelOperator
from .compute.solvers import PivotedCholesky, cg, ulisse
from .core.datasets import Dataset, load, load_csv
from .core.kernels import RBF, Kernel, Matern32, Matern52, make_kernel
from .exact.marginal import GradientEstimate, exact_log_marginal, log_marginal_gradient
from .gpc.classifier import SparseGPClassifier
from .mcmc.chains import resume, sample
from .mcmc.config import SamplerConfig
from .mcmc.diagnostics import open_run, psrf_evolution, run_summary
from .mcmc.estimator import BayesianGPRegressor
from .sparse.gplvm import BayesianGPLVM, GPLVMClassifier
from .sparse.sgpr import SparseGPRegressor

__all__ = ["__version__", "Dataset", "load", "load_csv", "Kernel", "RBF", "Matern32", "Matern52",
           "make_kernel", "KernelOperator", "cg", "ulisse", "PivotedCholesky", "exact_log_marginal",
           "log_marginal_gradient", "GradientEstimate", "SamplerConfig", "sample", "resume", "open_run",
           "run_summary", "psrf_evolution", "BayesianGPRegressor", "SparseGPRegressor", "BayesianGPLVM",
           "GPLVMClassifier", "ADVGPRegressor", "SparseGPClassifier"]
