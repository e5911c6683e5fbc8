"""What ties a run or a fit checkpoint to its data: a digest of the numbers (numpy) or dask's token of the
graph (dask arrays, whose rows are never read for it)."""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["fingerprint", "data_token"]


def data_token(X, y) -> str:
    """What ties a checkpoint to its data: :func:`fingerprint` of numpy arrays, dask's token of dask arrays
    (their graph: the rows are never read here)."""
    import dask.array as da

    if isinstance(X, da.Array) or isinstance(y, da.Array):
        from dask.base import tokenize

        return tokenize(X, y)
    return fingerprint(X, y)


def fingerprint(X, y) -> str:
    """sha1 of the numbers of X and y (as float64): what ties a run or a fit checkpoint to its data, so a
    resumed one must see the same numbers."""
    h = hashlib.sha1()
    h.update(np.ascontiguousarray(X, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(y, dtype=np.float64).tobytes())
    return h.hexdigest()
