"""daskgp: Bayesian Gaussian processes on data too big for a Cholesky factorisation, on Dask."""

from .datasets import Dataset, load, load_csv
from .kernels import RBF, Kernel, Matern32, Matern52, make_kernel
from .linalg import KernelOperator
from .marginal import GradientEstimate, exact_log_marginal, log_marginal_gradient
from .solvers import PivotedCholesky, cg, ulisse

__version__ = "0.1.0"

__all__ = ["Dataset", "load", "load_csv", "Kernel", "RBF", "Matern32", "Matern52", "make_kernel",
           "KernelOperator", "cg", "ulisse", "PivotedCholesky", "exact_log_marginal",
           "log_marginal_gradient", "GradientEstimate"]
