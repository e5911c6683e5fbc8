"""Whether a kernel operator may cache its rows in float32 for an iterative solve of (K + σ²I) x = b.

A float32 product (K + σ²I)v carries a rounding error of about ε₃₂·Σ_j |K_ij||v_j| per row (ε₃₂ = 2⁻²⁴,
the cached entries' rounding and the accumulation's), so at most ε₃₂·λ_max(|K|)·‖v‖ ≤ ε₃₂·n·s·‖v‖ for a
stationary kernel of variance s (its entries lie in [0, s] for the RBF and Matérn kernels). CG on the
float32 operator solves a system perturbed by that much, against the system's smallest eigenvalue σ²: once
ε₃₂·n·s/σ² is not small, CG stalls at a residual above its tolerance and no iteration budget rescues it.
Measured with the samplers' rank-300 pivoted-Cholesky preconditioner, CG to 1e-6, float32 against float64
iterations (the bound in brackets): 4,000 rows in 8 dimensions, lengthscale 3 — 43 and 43 (0.03), 124 and
114 (0.24), 414 and 314 (1.8), and float32 fails within 3,000 where float64 takes 855 (13); 2,000 rows in
one dimension, lengthscale 2.4, where the preconditioner is nearly exact and float64 takes 2 — 4 (0.016),
8 (0.12), 38 (0.87), and a stall (2.4; tests/compute/test_precision.py). :data:`FLOAT32_MAX_BOUND` = 0.1
keeps float32 where it cost at most a few iterations (6 at 0.12, where the preconditioner left nothing else
to do); the real data sets of the docs lie far below it (0.005–0.022 at their modes), the held-out failure
class (a small noise variance) far above. The bound is taken at a run's start, the subset MAP, which can sit
well off the mode: on all of house_8L a 500-row subset put log s at 1.69 against the mode's 1.01, a bound
of 0.048 (0.053 at 3 sd) against 0.022 at the mode — a threshold of 0.05 took float64 rows there (twice
the memory and time of every product) for no reason.
"""

from __future__ import annotations

import math

__all__ = ["FLOAT32_EPS", "FLOAT32_MAX_BOUND", "float32_rounding_bound", "rows_dtype_for"]

FLOAT32_EPS = 2.0**-24
FLOAT32_MAX_BOUND = 0.1


def float32_rounding_bound(n: int, log_variance: float, log_noise: float) -> float:
    """ε₃₂·n·s/σ²: a float32 product's rounding error against the smallest eigenvalue σ² (the noise
    variance) of K + σ²I on n rows, for a kernel of variance s (log parameters, as the samplers keep them)."""
    return FLOAT32_EPS * n * math.exp(log_variance - log_noise)


def rows_dtype_for(n: int, log_variance: float, log_noise: float) -> tuple[str, float]:
    """('float32' or 'float64', the bound of :func:`float32_rounding_bound`): float32 where the bound is at
    most :data:`FLOAT32_MAX_BOUND`."""
    bound = float32_rounding_bound(n, log_variance, log_noise)
    return ("float32" if bound <= FLOAT32_MAX_BOUND else "float64"), bound
