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

import contextlib
import logging
import math
from concurrent.futures import CancelledError

import numpy as np
import scipy.optimize
from distributed import KilledWorker

from ..compute.backend import resolve_device, to_device, to_host
from ..compute.reductions import local_sum, tree_sum
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

log = logging.getLogger(__name__)
MAX_REPLACEMENTS = 3  # evaluations repeated after lost workers before giving up


class WorkerLostError(ConnectionError):
    """Chunks were lost with a worker and cannot be placed again (or workers kept dying)."""


def _stats_task(chunk, theta: GlobalParams):
    return chunk_stats_cached(chunk["Y"], theta, chunk.get("X", chunk.get("mu")), chunk.get("S"))


def _grad_task(chunk, cached, theta: GlobalParams, g: BoundGrads):
    return chunk_global_grad(chunk["Y"], theta, g, chunk.get("X", chunk.get("mu")), chunk.get("S"),
                             psi1=cached[1])


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
    res = scipy.optimize.minimize(fun, x0, jac=True, method="L-BFGS-B",
                                  bounds=[(None, None)] * (b * q) + [(-12.0, 3.0)] * (b * q),
                                  options={"maxiter": n_iter})
    x = res.x if np.isfinite(res.fun) and res.fun <= fun(x0, grad=False) else x0  # never step downhill
    out = dict(chunk)
    out["mu"], out["S"] = x[:b * q].reshape(b, q), np.exp(x[b * q:]).reshape(b, q)
    return out


def _assemble(theta: GlobalParams, g: BoundGrads, local: np.ndarray) -> np.ndarray:
    """The gradient w.r.t. the unconstrained global vector: central part plus the chunks' summed share."""
    m, q = theta.Z.shape
    local = to_host(local)  # the optimiser's vector lives on the host, whatever the chunks' device
    return theta.grad_vector(to_host(g.dZ) + local[:m * q].reshape(m, q), g.dvar + local[m * q],
                             to_host(g.dls) + local[m * q + 1:], g.dbeta)


def _row_edges(n: int, chunk_rows: int) -> list[tuple[int, int]]:
    edges = list(range(0, n, max(1, int(chunk_rows)))) + [n]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _rows_2d(arrays: dict) -> dict:
    return {k: (v[:, None] if v.ndim == 1 else v) for k, v in arrays.items()}


def _split_rows(arrays: dict, chunk_rows: int) -> list[dict]:
    """Numpy arrays (same number of rows) → chunk dicts of at most ``chunk_rows`` rows, 1-D made (n, 1)."""
    arrays = _rows_2d(arrays)
    return [{k: np.ascontiguousarray(v[a:b]) for k, v in arrays.items()}
            for a, b in _row_edges(arrays["Y"].shape[0], chunk_rows)]


def _chunk_rows(chunk):
    return chunk["Y"].shape[0]


def _get_field(chunk, name):
    return to_host(chunk[name])


def _chunk_to_device(chunk: dict, device: str) -> dict:
    """The chunk's arrays on this worker's device ('cpu' | 'gpu' | 'auto': its GPU when it has one)."""
    where = resolve_device(device)
    return {k: to_device(v, where) for k, v in chunk.items()}


class ChunkedRows:
    """Row chunks held as futures on the workers of ``client``; each a dict with "Y" (b, p) and either
    "X" (b, q) (observed inputs) or "mu", "S" (b, q) (the latent inputs' q(x_i))."""

    def __init__(self, client, futures, sizes, rebuild=None):
        self.client, self.futures, self.sizes = client, list(futures), list(sizes)
        self._rebuild = rebuild  # rebuild(indices) -> futures of those chunks placed again, or None

    @property
    def n(self) -> int:
        return int(sum(self.sizes))

    @classmethod
    def from_arrays(cls, client, Y, chunk_rows: int, device: str | None = None, **inputs) -> ChunkedRows:
        """Split numpy or dask arrays by rows. Dask arrays are materialised chunk by chunk on the workers
        (their data need never pass through this process); numpy arrays are scattered. ``device`` None
        keeps the chunks' own type; 'cpu', 'gpu' or 'auto' puts every chunk on its worker's device (cupy on
        a GPU worker), where its statistics and their sums are then computed."""
        if device not in (None, "auto", "cpu", "gpu"):  # before anything is scattered
            raise ValueError(f"device must be None, 'auto', 'cpu' or 'gpu', got {device!r}")
        rows = cls._from_arrays(client, Y, chunk_rows, **inputs)
        if device is None:
            return rows

        def place(futs):
            return client.map(_chunk_to_device, futs, device=device, pure=False)
        rebuild = rows._rebuild
        return cls(client, place(rows.futures), rows.sizes,
                   rebuild=None if rebuild is None else (lambda idx: place(rebuild(idx))))

    @classmethod
    def _from_arrays(cls, client, Y, chunk_rows: int, **inputs) -> ChunkedRows:
        import dask.array as da

        arrays = {"Y": Y, **{k: v for k, v in inputs.items() if v is not None}}
        if any(isinstance(a, da.Array) for a in arrays.values()):
            blocks = max(1, int(chunk_rows))
            darr = {k: (a if isinstance(a, da.Array) else da.from_array(a)) for k, a in arrays.items()}
            darr = {k: (a[:, None] if a.ndim == 1 else a).rechunk((blocks, -1)) for k, a in darr.items()}
            sizes = darr["Y"].chunks[0]
            delayed_cols = {k: a.to_delayed().ravel() for k, a in darr.items()}
            from dask import delayed

            tasks = [delayed(dict)(**{k: v[i] for k, v in delayed_cols.items()}) for i in range(len(sizes))]
            futures = client.compute(tasks)
            return cls(client, futures, sizes, rebuild=lambda idx: client.compute([tasks[i] for i in idx]))
        parts = _split_rows(arrays, chunk_rows)
        # hash=False: equal chunks of two row sets must not share a key, or releasing one loses the other's
        futures = client.scatter(parts, hash=False)
        sizes = [p["Y"].shape[0] for p in parts]
        if "mu" in arrays:  # latent inputs change on the workers: no source to place them from again
            return cls(client, futures, sizes)
        del parts  # a lost chunk is sliced again from the caller's arrays: no second copy of the data here
        rows, edges = _rows_2d(arrays), _row_edges(len(Y), chunk_rows)

        def rebuild(idx):
            return client.scatter([{k: np.ascontiguousarray(v[a:b]) for k, v in rows.items()}
                                   for a, b in (edges[i] for i in idx)], hash=False)
        return cls(client, futures, sizes, rebuild=rebuild)

    def _with_replacement(self, evaluate):
        """``evaluate()``, repeated after any chunks lost with a worker are placed again from the source."""
        for attempt in range(MAX_REPLACEMENTS + 1):
            try:
                return evaluate()
            except (CancelledError, KilledWorker) as e:
                lost = [i for i, f in enumerate(self.futures) if f.status != "finished"]
                if self._rebuild is None or attempt == MAX_REPLACEMENTS:
                    rows = f" (chunks {lost})" if lost else ""
                    raise WorkerLostError(f"a Dask worker was lost with rows it held{rows}, and they cannot "
                                          f"be placed again ({type(e).__name__})") from None
                log.warning("daskgp: a worker was lost with %d row chunk(s); placing the chunk(s) again from "
                            "the data and repeating the evaluation", len(lost))
                for i, f in zip(lost, self._rebuild(lost) if lost else [], strict=True):
                    self.futures[i] = f
        raise AssertionError("unreachable")

    def field(self, name: str) -> np.ndarray:
        """Gather one field of every chunk, stacked by rows (for the latent means and variances: n × q)."""
        futs = [self.client.submit(_get_field, f, name, pure=False) for f in self.futures]
        with self._lost_for_good():
            parts = self.client.gather(futs)
        return np.concatenate(parts, axis=0)

    def stats(self, theta: GlobalParams) -> SuffStats:
        """The summed statistics at ``theta``."""
        def evaluate():
            f1 = self.client.map(_stats_task, self.futures, theta=theta, pure=False)
            return tree_sum(self.client, f1).result()
        return self._with_replacement(evaluate)

    def bound_and_grad(self, theta: GlobalParams) -> tuple[float, np.ndarray, SuffStats]:
        """F (nats), ∂F/∂(unconstrained global parameters) and the summed statistics."""
        def evaluate():
            f1 = self.client.map(_stats_task, self.futures, theta=theta, pure=False)
            total = tree_sum(self.client, f1).result()
            g = bound_and_grads(total, theta)
            f2 = self.client.map(_grad_task, self.futures, f1, theta=theta, g=g, pure=False)
            local = tree_sum(self.client, f2).result()
            del f1, f2  # release the cached ψ1 on the workers
            return g.F, _assemble(theta, g, local), total
        return self._with_replacement(evaluate)

    def local_step(self, theta: GlobalParams, total: SuffStats, n_iter: int) -> None:
        """Every chunk optimises its own (μ_i, S_i) for ``n_iter`` L-BFGS-B iterations on its worker, with
        the other chunks' statistics fixed at ``total`` (block-coordinate ascent, all blocks in parallel)."""
        new = self.client.map(_local_task, self.futures, total=total, theta=theta, n_iter=n_iter, pure=False)
        with self._lost_for_good():
            self.client.gather(self.client.map(_chunk_rows, new, pure=False))  # wait; errors surface here
        self.futures = new

    @contextlib.contextmanager
    def _lost_for_good(self):
        """Work on chunks whose state exists only on the workers (a GPLVM's latent means and variances):
        a worker lost with them is one clear WorkerLostError, not a cancelled future's traceback."""
        try:
            yield
        except (CancelledError, KilledWorker) as e:
            raise WorkerLostError(f"a Dask worker was lost with row chunks whose latent state lived only "
                                  f"there; the fit cannot continue ({type(e).__name__}): fit again") from None

    def release(self) -> None:
        self.futures = []


class LocalRows:
    """The same computation as :class:`ChunkedRows` on chunks held in this process, one after another: for
    models small enough to fit whole inside one Dask task (e.g. :class:`daskgp.sparse.gplvm.GPLVMClassifier`'s
    per-class models, fitted as parallel tasks), where a round trip to the scheduler per map would cost more
    than the work."""

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
        return cls(_split_rows({"Y": Y, **{k: v for k, v in inputs.items() if v is not None}}, chunk_rows))

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
