"""The distributed evaluation of the collapsed bound (Gal, van der Wilk & Rasmussen 2014): row chunks live as
futures on the Dask workers; one evaluation is two maps and two tree reductions.

1. map: every chunk computes its statistics (A, B, C, D, KL) and keeps ψ1 for step 3;
2. reduce: pairwise-ish (fan-in 4) sums, so the centre receives O(m²+mp) numbers whatever n is;
3. the centre computes F and ∂F/∂(A, B, C, D) (:func:`daskgp.sparse.bound.bound_and_grads`);
4. map: every chunk turns those into its share of ∂F/∂(Z, σ², l); reduce as in 2.

For the Bayesian GPLVM, :meth:`ChunkedRows.local_step` also runs each chunk's optimisation of its own
q(x_i) on the worker holding it (all chunks in parallel), given the summed statistics of the others.

A lost worker takes the chunks it held with it. Chunks of observed inputs (SGPR) are a function of the
source data, so they are placed again from it (re-scattered from this process, or recomputed from the dask
array's graph) and the evaluation is repeated; the sums are taken in a fixed order, so the repeated
evaluation gives the same numbers. Chunks holding a GPLVM's latent q(x_i) live only on the workers: losing
one ends the fit with a one-line error.
"""

from __future__ import annotations

import math

import numpy as np

from ..compute.backend import to_host
from ..compute.reductions import local_sum, tree_sum
from ..compute.rows import RowChunks, WorkerLostError, aligned, chunk_size, split_rows
from ..core.optim import lbfgsb
from .bound import (
    BoundGrads,
    GlobalParams,
    SuffStats,
    bound_and_grads,
    chunk_global_grad,
    chunk_local_grad,
    chunk_stats,
    chunk_stats_cached,
)

__all__ = ["ChunkedRows", "LocalRows", "local_objective", "WorkerLostError"]

# K_mn of every chunk kept on the workers between a bound's statistics and its gradient, while all of them
# together take at most this many bytes (summed over the workers). K_mn is m·8 bytes a row — 800 at m = 100,
# ten times a row of nine inputs — so at 10⁷ rows the kept blocks were 8 GB (worker peaks of 4.6-4.8 GB for
# 0.4 GB of rows each) and at 10⁸ rows 80 GB, which distributed spilled to disk (70 GB of the disk, and a
# pass of 6.5 minutes). Beyond the budget the gradient recomputes K_mn: m·b·q flops and m·b exponentials
# against the m²·b of D, about a fifth more work for memory that stays at the rows' own.
KMN_CACHE_BYTES = 512 * 2**20


def _stats_task(chunk, theta: GlobalParams, keep: bool = True):
    stats, cached = chunk_stats_cached(chunk["Y"], theta, chunk.get("X", chunk.get("mu")), chunk.get("S"))
    return stats, (cached if keep else None)


def _grad_task(chunk, cached, theta: GlobalParams, g: BoundGrads):
    return chunk_global_grad(chunk["Y"], theta, g, chunk.get("X", chunk.get("mu")), chunk.get("S"),
                             psi1=cached[1] if cached is not None else None)


def keeps_kmn(n: int, m: int) -> bool:
    """Whether the K_mn blocks of n rows and m inducing points fit :data:`KMN_CACHE_BYTES`."""
    return n * m * 8 <= KMN_CACHE_BYTES


def local_objective(chunk_Y, others: SuffStats, theta: GlobalParams, b: int, q: int):
    """The objective of one chunk's local step (and of a new point's q(x*)): ``fun(x)`` → −F(others + the
    statistics of the b rows chunk_Y (b, p) with latent inputs x = [μ (b·q), log S (b·q)]) and its gradient
    w.r.t. x; ``fun(x, grad=False)`` gives the value alone (half the work: for choosing among starting
    points)."""
    def fun(x, grad: bool = True):
        mu, S = x[:b * q].reshape(b, q), np.exp(x[b * q:]).reshape(b, q)
        st = others + chunk_stats(chunk_Y, theta, mu=mu, S=S)
        try:
            g = bound_and_grads(st, theta, grads=grad)
        except np.linalg.LinAlgError:
            return (math.inf, np.zeros_like(x)) if grad else math.inf
        if not grad:
            return -g
        dmu, dS = chunk_local_grad(chunk_Y, theta, g, mu, S)
        return -g.F, -np.concatenate([dmu.ravel(), (dS * S).ravel()])
    return fun


def _local_task(chunk, total: SuffStats, theta: GlobalParams, n_iter: int):
    """Optimise this chunk's q(x_i) with the other chunks' statistics fixed; returns the updated chunk."""
    b, q = chunk["mu"].shape
    if b == 0 or n_iter <= 0:
        return chunk
    own = chunk_stats(chunk["Y"], theta, mu=chunk["mu"], S=chunk["S"])
    fun = local_objective(chunk["Y"], total - own, theta, b, q)
    x0 = np.concatenate([chunk["mu"].ravel(), np.log(chunk["S"]).ravel()])
    res = lbfgsb(fun, x0, bounds=[(None, None)] * (b * q) + [(-12.0, 3.0)] * (b * q), max_iter=n_iter)
    x = res.x if np.isfinite(res.fun) and res.fun <= fun(x0, grad=False) else x0  # never step downhill
    out = dict(chunk)
    # aligned, as placed chunks are (daskgp.compute.rows.aligned): the same numbers, the same products
    out["mu"], out["S"] = aligned(x[:b * q].reshape(b, q)), aligned(np.exp(x[b * q:]).reshape(b, q))
    return out


def _assemble(theta: GlobalParams, g: BoundGrads, local: np.ndarray) -> np.ndarray:
    """The gradient w.r.t. the unconstrained global vector: central part plus the chunks' summed share."""
    m, q = theta.Z.shape
    local = to_host(local)  # the optimiser's vector lives on the host, whatever the chunks' device
    return theta.grad_vector(to_host(g.dZ) + local[:m * q].reshape(m, q), g.dvar + local[m * q],
                             to_host(g.dls) + local[m * q + 1:], g.dbeta)


class ChunkedRows(RowChunks):
    """:class:`daskgp.compute.rows.RowChunks` that evaluate the collapsed bound: the statistics, the bound and
    its gradient as two maps and two tree reductions, and the GPLVM's local steps."""

    def stats(self, theta: GlobalParams) -> SuffStats:
        """The summed statistics at ``theta``."""
        def evaluate():
            f1 = self.client.map(_stats_task, self.futures, theta=theta, keep=False, pure=False)
            return tree_sum(self.client, f1).result()
        return self.with_replacement(evaluate)

    def bound_and_grad(self, theta: GlobalParams) -> tuple[float, np.ndarray, SuffStats]:
        """F (nats), ∂F/∂(unconstrained global parameters) and the summed statistics."""
        keep = keeps_kmn(self.n, theta.m)

        def evaluate():
            f1 = self.client.map(_stats_task, self.futures, theta=theta, keep=keep, pure=False)
            total = tree_sum(self.client, f1).result()
            g = bound_and_grads(total, theta)
            f2 = self.client.map(_grad_task, self.futures, f1, theta=theta, g=g, pure=False)
            local = tree_sum(self.client, f2).result()
            del f1, f2  # release the cached ψ1 on the workers
            return g.F, _assemble(theta, g, local), total
        return self.with_replacement(evaluate)

    def local_step(self, theta: GlobalParams, total: SuffStats, n_iter: int) -> None:
        """Every chunk optimises its own (μ_i, S_i) for ``n_iter`` L-BFGS-B iterations on its worker, with
        the other chunks' statistics fixed at ``total`` (block-coordinate ascent, all blocks in parallel)."""
        new = self.client.map(_local_task, self.futures, total=total, theta=theta, n_iter=n_iter, pure=False)
        with self.lost_for_good():
            self.client.gather(self.client.map(chunk_size, new, pure=False))  # wait; errors surface here
        self.futures = new


class LocalRows:
    """The same computation as :class:`ChunkedRows` on chunks held in this process, one after another: for
    models small enough to fit whole inside one Dask task (e.g. the per-class models of
    :class:`daskgp.sparse.gplvm_classifier.GPLVMClassifier`, fitted as parallel tasks), where a round trip
    to the scheduler per map would cost more than the work."""

    def __init__(self, chunks):
        self.chunks = list(chunks)

    @property
    def sizes(self) -> list[int]:
        return [c["Y"].shape[0] for c in self.chunks]

    @property
    def n(self) -> int:
        return int(sum(self.sizes))

    @classmethod
    def from_arrays(cls, Y, chunk_rows: int, **inputs) -> LocalRows:
        return cls(split_rows({"Y": Y, **{k: v for k, v in inputs.items() if v is not None}}, chunk_rows))

    def field(self, name: str) -> np.ndarray:
        return np.concatenate([c[name] for c in self.chunks], axis=0)

    def stats(self, theta: GlobalParams) -> SuffStats:
        return local_sum(*[_stats_task(c, theta) for c in self.chunks])

    def bound_and_grad(self, theta: GlobalParams) -> tuple[float, np.ndarray, SuffStats]:
        parts = [_stats_task(c, theta) for c in self.chunks]
        total = local_sum(*parts)
        g = bound_and_grads(total, theta)
        local = local_sum(*[_grad_task(c, p, theta, g) for c, p in zip(self.chunks, parts, strict=True)])
        return g.F, _assemble(theta, g, local), total

    def local_step(self, theta: GlobalParams, total: SuffStats, n_iter: int) -> None:
        self.chunks = [_local_task(c, total, theta, n_iter) for c in self.chunks]

    @property
    def futures(self):  # the state a caller may keep and restore (see BayesianGPLVM's undo)
        return self.chunks

    @futures.setter
    def futures(self, chunks):
        self.chunks = chunks

    def release(self) -> None:
        self.chunks = []
