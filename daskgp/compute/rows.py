"""Rows of data held in chunks on the Dask workers, as futures: placement (numpy scattered, dask arrays
materialised on the workers chunk by chunk), optional placement on each worker's device, and re-placement of
the chunks a lost worker took with it. Every sparse family maps its per-chunk work over these; what the work
is belongs to the family.
"""

from __future__ import annotations

import contextlib
import logging
from concurrent.futures import CancelledError

import numpy as np
from distributed import KilledWorker

from .backend import resolve_device, to_device, to_host
from .cluster import cluster_workers

__all__ = ["RowChunks", "WorkerLostError", "MAX_REPLACEMENTS", "split_rows", "chunk_size"]

log = logging.getLogger(__name__)
MAX_REPLACEMENTS = 3  # evaluations repeated after lost workers before giving up


class WorkerLostError(ConnectionError):
    """Chunks were lost with a worker and cannot be placed again (or workers kept dying)."""


def _row_edges(n: int, chunk_rows: int) -> list[tuple[int, int]]:
    edges = list(range(0, n, max(1, int(chunk_rows)))) + [n]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _rows_2d(arrays: dict) -> dict:
    return {k: (v[:, None] if v.ndim == 1 else v) for k, v in arrays.items()}


def split_rows(arrays: dict, chunk_rows: int) -> list[dict]:
    """Numpy arrays (same number of rows) → chunk dicts of at most ``chunk_rows`` rows, 1-D made (n, 1)."""
    arrays = _rows_2d(arrays)
    return [{k: np.ascontiguousarray(v[a:b]) for k, v in arrays.items()}
            for a, b in _row_edges(arrays["Y"].shape[0], chunk_rows)]


def aligned(a) -> np.ndarray:
    """``a`` as a C-ordered numpy array whose data start at a 64-byte boundary (a copy unless it already is).
    OpenBLAS takes alignment-dependent paths for small products (A.T @ A of a chunk is one), so the same
    numbers at two addresses — a chunk scattered from numpy, the same rows read from a file on a worker —
    can give products that differ in their last bits; aligned inputs give the same bits."""
    a = np.asarray(a)
    if a.flags.c_contiguous and a.ctypes.data % 64 == 0:
        return a
    buf = np.empty(a.nbytes + 64, dtype=np.uint8)
    start = -buf.ctypes.data % 64
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _aligned_chunk(**arrays) -> dict:
    """A chunk dict of C-ordered, 64-byte aligned arrays (:func:`aligned`): a dask chunk may come as a view
    in another layout (a concatenation's, a transpose's) and a scattered one at whatever offset its message
    put it, and BLAS may take another path for either, so the same rows would give sums that differ in
    their last bits (which an optimiser then amplifies)."""
    return {k: aligned(v) for k, v in arrays.items()}


def _scatter_aligned(client, parts: list[dict]) -> list:
    """Scatter numpy chunk dicts, then align them where they landed (:func:`_aligned_chunk`)."""
    # hash=False: equal chunks of two row sets must not share a key, or releasing one loses the other's
    scattered = client.scatter(parts, hash=False)
    return client.map(_realign, scattered, pure=False)


def _realign(chunk: dict) -> dict:
    return _aligned_chunk(**chunk)


def chunk_size(chunk) -> int:
    """The rows of one chunk (a task: waits for the chunk and surfaces its error)."""
    return chunk["Y"].shape[0]


def _get_field(chunk, name):
    return to_host(chunk[name])


def _chunk_to_device(chunk: dict, device: str) -> dict:
    """The chunk's arrays on this worker's device ('cpu' | 'gpu' | 'auto': its GPU when it has one)."""
    where = resolve_device(device)
    return {k: to_device(v, where) for k, v in chunk.items()}


class RowChunks:
    """Row chunks held as futures on the workers of ``client``; each a dict of arrays with the same number
    of rows: "Y" (b, p) and the inputs — "X" (b, q) when observed, "mu", "S" (b, q) for a GPLVM's latent
    q(x_i). The sparse families map their per-chunk work over :attr:`futures`; :meth:`with_replacement`
    repeats a map after a lost worker, once the lost chunks are placed again from their source
    (:meth:`replace`)."""

    def __init__(self, client, futures, sizes, rebuild=None):
        self.client, self.futures, self.sizes = client, list(futures), list(sizes)
        self._rebuild = rebuild  # rebuild(indices) -> futures of those chunks placed again, or None

    @property
    def replaceable(self) -> bool:
        """Whether lost chunks can be placed again (observed inputs: from their source)."""
        return self._rebuild is not None

    def replace(self, idx: list[int]) -> list:
        """Futures of chunks ``idx`` placed again from their source (after a lost worker)."""
        if self._rebuild is None:
            raise WorkerLostError("these row chunks live only on the workers and cannot be placed again")
        return self._rebuild(list(idx))

    @property
    def n(self) -> int:
        return int(sum(self.sizes))

    @classmethod
    def from_arrays(cls, client, Y, chunk_rows: int, device: str | None = None, **inputs) -> RowChunks:
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
    def _from_arrays(cls, client, Y, chunk_rows: int, **inputs) -> RowChunks:
        import dask.array as da

        arrays = {"Y": Y, **{k: v for k, v in inputs.items() if v is not None}}
        if any(isinstance(a, da.Array) for a in arrays.values()):
            # an int: rows per chunk; a tuple: the chunks' sizes (a dask array's own row chunks)
            blocks = tuple(int(b) for b in chunk_rows) if isinstance(chunk_rows, tuple) else \
                max(1, int(chunk_rows))
            darr = {k: (a if isinstance(a, da.Array) else da.from_array(a)) for k, a in arrays.items()}
            darr = {k: (a[:, None] if a.ndim == 1 else a).rechunk((blocks, -1)) for k, a in darr.items()}
            sizes = darr["Y"].chunks[0]
            delayed_cols = {k: a.to_delayed().ravel() for k, a in darr.items()}
            from dask import delayed

            tasks = [delayed(_aligned_chunk)(**{k: v[i] for k, v in delayed_cols.items()})
                     for i in range(len(sizes))]

            def compute(idx):
                # chunk i (with the reads it needs) preferably on worker i mod W: spread evenly, as scatter
                # spreads numpy chunks. Left to itself the scheduler gives quick independent reads to
                # whichever worker frees first, and a worker behind a slow link may hold none while another
                # holds most: every evaluation then waits on one worker's serial share. Loose restrictions:
                # a lost or missing worker's chunks go to another one
                # (one submission per worker, not per chunk: a chunk's graph may hold the whole source array,
                # as da.from_array's does, and would be sent once per chunk)
                idx = list(idx)
                workers = sorted(cluster_workers(client)) or [None]
                futures = {}
                for j, w in enumerate(workers):
                    mine = [i for i in idx if i % len(workers) == j]
                    if mine:
                        futures.update(zip(mine, client.compute([tasks[i] for i in mine], workers=w,
                                                                allow_other_workers=True), strict=True))
                return [futures[i] for i in idx]
            # latent inputs change on the workers: no source to place them from again
            return cls(client, compute(range(len(sizes))), sizes, rebuild=None if "mu" in arrays else compute)
        parts = split_rows(arrays, chunk_rows)
        futures = _scatter_aligned(client, parts)
        sizes = [p["Y"].shape[0] for p in parts]
        if "mu" in arrays:  # latent inputs change on the workers: no source to place them from again
            return cls(client, futures, sizes)
        del parts  # a lost chunk is sliced again from the caller's arrays: no second copy of the data here
        rows, edges = _rows_2d(arrays), _row_edges(len(Y), chunk_rows)

        def rebuild(idx):
            return _scatter_aligned(client, [{k: np.ascontiguousarray(v[a:b]) for k, v in rows.items()}
                                             for a, b in (edges[i] for i in idx)])
        return cls(client, futures, sizes, rebuild=rebuild)

    def with_replacement(self, evaluate):
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
        with self.lost_for_good():
            parts = self.client.gather(futs)
        return np.concatenate(parts, axis=0)

    @contextlib.contextmanager
    def lost_for_good(self):
        """Work on chunks whose state exists only on the workers (a GPLVM's latent means and variances):
        a worker lost with them is one clear WorkerLostError, not a cancelled future's traceback."""
        try:
            yield
        except (CancelledError, KilledWorker) as e:
            raise WorkerLostError(f"a Dask worker was lost with row chunks whose latent state lived only "
                                  f"there; the fit cannot continue ({type(e).__name__}): fit again") from None

    def release(self) -> None:
        self.futures = []
