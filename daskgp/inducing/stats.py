"""Per-chunk statistics of observed inputs, the map of every sparse family's map-reduce (Gal, van der Wilk &
Rasmussen 2014, section 4; ADVGP's partitions, Peng et al. 2017 eq. 15): for a chunk of b rows X (b, q),
Y (b, p) and inducing inputs Z (m, q),

    A = Σ_i y_iᵀ y_i,   B = Σ_i k(x_i, x_i) = b·σ²,   C = K_mn Y (m, p),   D = K_mn K_nm (m, m),

and the adjoint map: a chunk's share of ∂F/∂(Z, σ², l) given ∂F/∂C and ∂F/∂D from the centre,
Ḡ_nm = Y (∂F/∂C)ᵀ + 2 K_nm ∂F/∂D, back-propagated through K_nm
(:func:`daskgp.inducing.features.kmn_backprop`).
Both are written against the chunk's array namespace, so the sums stay on a GPU worker's device. The
latent-input (GPLVM) statistics are the psi-statistics of :mod:`daskgp.sparse.bound`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from array_api_compat import array_namespace

from ..compute.backend import into, like
from .features import GlobalParams, kmn, kmn_backprop

__all__ = ["ROW_BLOCK", "SuffStats", "observed_stats", "observed_grad", "summed_stats"]


@dataclass
class SuffStats:
    """The partial sums of one chunk (or of all of them): n rows, A, B, C (m, p), D (m, m), KL (nats; latent
    inputs only)."""

    n: int
    A: float
    B: float
    C: np.ndarray
    D: np.ndarray
    KL: float = 0.0

    def __add__(self, other: SuffStats) -> SuffStats:
        return SuffStats(self.n + other.n, self.A + other.A, self.B + other.B, self.C + other.C,
                         self.D + other.D, self.KL + other.KL)

    def __sub__(self, other: SuffStats) -> SuffStats:
        return SuffStats(self.n - other.n, self.A - other.A, self.B - other.B, self.C - other.C,
                         self.D - other.D, self.KL - other.KL)


# Rows per block of a chunk's statistics and gradient. Up to this many rows the chunk's K_mn (m × b) is made
# at once and kept for the gradient; a larger chunk (a 10⁶-row Parquet file) is taken block by block and
# K_mn recomputed in the gradient pass: its K_mn alone would be 8·m·b bytes (0.8 GB at m = 100, b = 10⁶), and
# with the kernel's temporaries a worker measured 3.1 GB at its peak for 0.4 GB of rows. A kernel block
# costs m·b·q flops against D's m²·b, so recomputing it costs little.
ROW_BLOCK = 1 << 15


def _blocks(b: int) -> list[tuple[int, int]]:
    # in-bounds slice ends: the array API standard (cupy's namespace, array_api_strict) requires them
    return [(a, min(a + ROW_BLOCK, b)) for a in range(0, b, ROW_BLOCK)]


def _as_2d(Y):
    return Y[:, None] if Y.ndim == 1 else Y


def observed_stats(Y, theta: GlobalParams, X):
    """(SuffStats, K_mn (m, b), or None for an empty chunk or one of more than :data:`ROW_BLOCK` rows) of
    rows X (b, q), Y (b, p) or (b,) at θ; K_mn is what :func:`observed_grad` reuses, kept on the worker."""
    Y = _as_2d(Y)
    b, m, p = X.shape[0], theta.m, Y.shape[1]
    if b == 0:  # an empty chunk adds nothing
        zeros = (np.zeros((m, p)), np.zeros((m, m)))
        if type(X) is not np.ndarray:
            zeros = tuple(like(z, X) for z in zeros)
        return SuffStats(0, 0.0, 0.0, *zeros), None
    if b > ROW_BLOCK:  # block by block, nothing kept: memory bounded whatever the chunk's size
        total = None
        for a, e in _blocks(b):
            part, _ = observed_stats(Y[a:e, ...], theta, X[a:e, ...])
            total = part if total is None else total + part
        return total, None
    Kmn = kmn(theta, X)
    xp = array_namespace(Y, X)
    return SuffStats(b, float(xp.sum(Y * Y)), float(b * theta.variance), Kmn @ Y, Kmn @ Kmn.T), Kmn


def observed_grad(Y, theta: GlobalParams, GC, GD, X, Kmn=None) -> np.ndarray:
    """One chunk's share of ∂F/∂(Z, σ², l) through its C and D, given GC = ∂F/∂C (m, p) and GD = ∂F/∂D
    (m, m, symmetric): one vector [dZ.ravel(), dvar, dls] in X's namespace. ``Kmn``: the block
    :func:`observed_stats` returned (recomputed when None)."""
    Y = _as_2d(Y)
    m, q = theta.Z.shape
    if X.shape[0] == 0:
        return np.zeros(m * q + 1 + q)
    if Kmn is None and X.shape[0] > ROW_BLOCK:  # as observed_stats: block by block
        parts = [observed_grad(Y[a:e, ...], theta, GC, GD, X[a:e, ...]) for a, e in _blocks(X.shape[0])]
        total = parts[0]
        for v in parts[1:]:
            total = total + v
        return total
    xp = array_namespace(Y, X)
    Knm = (kmn(theta, X) if Kmn is None else Kmn).T
    Gbar = Y @ into(GC, X).T + 2 * (Knm @ into(GD, X))  # ∂F/∂K_nm (b, m)
    dZ, dvar, dls = kmn_backprop(Gbar, X, theta, Knm)
    if type(Gbar) is np.ndarray:
        return np.concatenate([dZ.ravel(), [float(dvar)], dls])
    return xp.concat([xp.reshape(dZ, (-1,)), xp.reshape(dvar, (1,)), dls])


def _stats_task(chunk, theta: GlobalParams) -> SuffStats:
    return observed_stats(chunk["Y"], theta, chunk["X"])[0]


def summed_stats(rows, theta: GlobalParams) -> SuffStats:
    """The statistics of every chunk of ``rows`` (:class:`daskgp.compute.rows.RowChunks` with "X" and "Y")
    at θ, summed on the workers by a tree reduction; chunks lost with a worker are placed again and the
    map repeated."""
    from ..compute.reductions import tree_sum

    def evaluate():
        parts = rows.client.map(_stats_task, rows.futures, theta=theta, pure=False)
        return tree_sum(rows.client, parts).result()
    return rows.with_replacement(evaluate)
