"""BLAS threads chosen for the size of a dense solve.

A small dense factorisation (n of a few thousand) finishes in milliseconds on one thread; spread over every
core of a shared machine it waits on the busiest of them. Measured for issue 17's report: a 1,030 × 1,030
Cholesky took 0.63 s with multithreaded OpenBLAS on a loaded 2-core machine and 0.017 s on one thread. Larger
factorisations keep the library's default (all cores).
"""

from __future__ import annotations

import contextlib

__all__ = ["SMALL_DENSE_N", "blas_threads_for"]

SMALL_DENSE_N = 2_000  # up to this order, a dense solve runs on one BLAS thread


@contextlib.contextmanager
def blas_threads_for(n: int):
    """Within the block, BLAS uses one thread when the dense matrices are at most ``SMALL_DENSE_N`` on a side
    (n: their order), else its default."""
    if n > SMALL_DENSE_N:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield
