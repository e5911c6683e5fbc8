"""A product of cached kernel rows with a block of right-hand sides, in the cached rows' precision: the inner
loop of every cached pass of :class:`daskgp.compute.operator.KernelOperator` (the CG and ULISSE products of
the exact GP, Filippone & Engler 2015), and what it does about BLAS's slow column counts.
"""

from __future__ import annotations

import numpy as np
from array_api_compat import array_namespace

from .backend import is_numpy

__all__ = ["PAD_F32", "PAD_TO", "cached_product"]

# Column counts that OpenBLAS's single-precision GEMM computes slower than 16 (issue 55, item 1): its kernel
# for this machine (SkylakeX, on an AMD EPYC) works on 16 columns at a time and handles a remainder of 9-15
# poorly, so a product with 9-15 right-hand sides — the CG's [y, probes] block (1 + 13 columns on house_8L)
# and its narrower blocks as columns converge — costs more than one with 16 (measured on 22,784 cached
# float32 rows, one thread: 14 columns 0.419 s, padded to 16 0.334 s; over widths 9-15 0.87x the time;
# ``benchmarks/product_width.py``; numpy 2.5.5's OpenBLAS 0.3.34: 14 columns 0.032 s, 16 0.026 s on a
# 2,048-row block). Those products are computed with zero columns added up to 16 and the extra columns
# dropped. With the OpenBLAS first measured the bits were those of the unpadded product; with 0.3.34 the
# remainder kernel sums in another order, so they differ in the last float32 bits (within a float32 dot
# product's rounding bound, tests/compute/test_operator.py). Every worker pads the same widths, so a chain's
# draws stay the same bits on every worker of one build.
PAD_F32 = range(9, 16)
PAD_TO = 16


def cached_product(rows, V):
    """rows @ V in the cached rows' precision, returned in V's (numpy would otherwise upcast a float32
    cache to a float64 copy of itself on every product); float32 rows with 9-15 columns of V are multiplied
    as 16 (:data:`PAD_F32`: sooner; a float32 product either way)."""
    if rows.dtype == V.dtype and not (rows.dtype == np.float32 and V.shape[1] in PAD_F32):
        return rows @ V
    if is_numpy(rows, V):
        k = V.shape[1]
        if rows.dtype == np.float32 and k in PAD_F32:
            Vp = np.zeros((V.shape[0], PAD_TO), dtype=np.float32)
            Vp[:, :k] = V
            return (rows @ Vp)[:, :k].astype(V.dtype)
        return (rows @ V.astype(rows.dtype)).astype(V.dtype)
    xp = array_namespace(rows, V)
    return xp.astype(rows @ xp.astype(V, rows.dtype), V.dtype)
