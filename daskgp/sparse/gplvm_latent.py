"""The Bayesian GPLVM's latent state where it lives: every row's q(x_i) = N(μ_i, diag S_i) is held with its
chunk of rows on a Dask worker (Gal, van der Wilk & Rasmussen 2014, section 3: the local parameters stay with
their data), and nothing of it is gathered to the client whole (issue 58, item 4):

- a round's restart copy (:class:`RestartCopies`) is the round's chunks themselves plus a copy of every
  chunk's q(x_i) on another worker than the chunk's; a lost worker's chunks are placed again from the
  surviving copy and their rows from the data's source;
- a checkpoint streams q(x_i) to its array file chunk by chunk (:func:`latent_blocks`), and a resume places
  it back chunk by chunk (:func:`place_latent`);
- the k-means start of the inducing inputs gathers only its sample of latent means (:func:`take_rows`).

Client memory is then one chunk's q(x_i) at a time, flat in n. Every function takes the rows as
:class:`daskgp.sparse.chunks.ChunkedRows` (futures on the workers) or
:class:`~daskgp.sparse.chunks.LocalRows` (chunks in this process, inside one task).
"""

from __future__ import annotations

import logging

import numpy as np

from ..compute.cluster import cluster_workers
from ..compute.rows import WorkerLostError, aligned
from .chunks import ChunkedRows, LocalRows

__all__ = ["RestartCopies", "latent_blocks", "place_latent", "take_rows", "chunk_edges", "embedding"]

log = logging.getLogger(__name__)


def chunk_edges(sizes) -> list[tuple[int, int]]:
    """[(start, stop), …] of chunks of ``sizes`` rows, in order."""
    ends = np.cumsum([0, *sizes])
    return [(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:], strict=True)]


def _rows_of(chunk, name: str, local: np.ndarray) -> np.ndarray:
    return np.asarray(chunk[name])[local]


def take_rows(rows, name: str, idx) -> np.ndarray:
    """Rows ``idx`` (sorted indices into all n rows) of one field of the chunks ("mu": latent means),
    gathered here: (len(idx), q) — a sample's worth, never the field whole."""
    idx = np.asarray(idx, dtype=np.int64)
    parts = []
    if isinstance(rows, LocalRows):
        for (a, b), c in zip(chunk_edges(rows.sizes), rows.chunks, strict=True):
            parts.append(np.asarray(c[name])[idx[(idx >= a) & (idx < b)] - a])
    else:
        futs = [rows.client.submit(_rows_of, f, name, idx[(idx >= a) & (idx < b)] - a, pure=False)
                for (a, b), f in zip(chunk_edges(rows.sizes), rows.futures, strict=True)]
        with rows.lost_for_good():
            parts = rows.client.gather(futs)
    return np.concatenate(parts, axis=0)


def _latent_of(chunk) -> np.ndarray:
    """[μ | S] (b, 2q) of one chunk."""
    return np.concatenate([np.asarray(chunk["mu"]), np.asarray(chunk["S"])], axis=1)


def latent_blocks(rows):
    """[μ | S] (b, 2q) of every chunk in chunk order, one chunk at a time (a generator: a checkpoint's array
    file is written from it without the whole q(x_i) here)."""
    if isinstance(rows, LocalRows):
        for c in rows.chunks:
            yield _latent_of(c)
        return
    for f in rows.futures:
        with rows.lost_for_good():
            yield rows.client.submit(_latent_of, f, pure=False).result()


def _rows(a) -> int:
    return len(a)


def _settle(client, futures) -> None:
    """Wait for ``futures`` (arrays) through ``client``, their errors raised here; only their lengths come
    back (``distributed.wait`` would look for the process's default client, which a caller's may not be)."""
    client.gather(client.map(_rows, futures, pure=False))


def _field(chunk, name: str) -> np.ndarray:
    return np.asarray(chunk[name])


def embedding(rows: ChunkedRows, q: int, lazy: bool):
    """(μ (n, q), S (n, q)) of the fitted chunks of q latent dimensions: with ``lazy``, dask arrays whose
    chunks are the fit's, held on the workers (the fit's cluster outlives it: nothing comes here until
    computed); otherwise numpy arrays filled chunk by chunk (no second copy while they are gathered)."""
    edges = chunk_edges(rows.sizes)
    if lazy:
        import dask.array as da

        client = rows.client
        out = []
        for name in ("mu", "S"):
            futs = [client.submit(_field, f, name, pure=False) for f in rows.futures]
            with rows.lost_for_good():
                _settle(client, futs)
            out.append(da.concatenate([da.from_delayed(f, (b - a, q), dtype=float)
                                       for f, (a, b) in zip(futs, edges, strict=True)]))
        return tuple(out)
    mu, S = np.empty((rows.n, q)), np.empty((rows.n, q))
    for (a, b), v in zip(edges, latent_blocks(rows), strict=True):
        mu[a:b], S[a:b] = v[:, :q], v[:, q:]
    return mu, S


def _copy(latent: np.ndarray) -> np.ndarray:
    return np.array(latent, copy=True)


def _with_latent(ychunk: dict, source) -> dict:
    """The rows of ``ychunk`` with the q(x_i) of ``source``: a [μ | S] array (a copy, a checkpoint's block)
    or a chunk dict holding μ and S (a round's chunk)."""
    if isinstance(source, dict):
        mu, S = source["mu"], source["S"]
    else:
        q = source.shape[1] // 2
        mu, S = source[:, :q], source[:, q:]
    return {**ychunk, "mu": aligned(mu), "S": aligned(S)}


class RestartCopies:
    """Where a round restarts from when a worker is lost with some of its chunks: the round's chunks
    (:meth:`keep` holds their futures), a copy of each chunk's q(x_i) on another worker than the chunk's
    (on a one-worker cluster the same worker), and — when both copies of a chunk are gone (every worker
    lost) — the round's commit in the fit's checkpoint, if it has one (``committed(round)``: the
    :class:`daskgp.sparse.gplvm_checkpoint.LatentRows` committed for that round, or None). ``source``: the
    chunks of rows without latent state, as first placed (:class:`daskgp.compute.rows.RowChunks`, which can
    place lost rows again from the data)."""

    def __init__(self, source, committed=None):
        self.source, self.client, self.committed = source, source.client, committed

    def keep(self, rows: ChunkedRows, round_: int) -> tuple[int, list, list]:
        """(the round, its chunk futures, the copies of their q(x_i)): taken at the start of every round."""
        client = self.client
        primary = list(rows.futures)
        held = client.who_has(primary)
        # each chunk's q(x_i) taken where the chunk is (no transfer of its rows), then copied elsewhere
        def where(f):
            return {"workers": list(held[f.key]), "allow_other_workers": True} if held.get(f.key) else {}
        own = [client.submit(_latent_of, f, pure=False, **where(f)) for f in primary]
        with rows.lost_for_good():
            _settle(client, own)
        who = client.who_has(own)
        workers = sorted(cluster_workers(client))
        copies = []
        for i, (f, o) in enumerate(zip(primary, own, strict=True)):
            holders = set(held.get(f.key, ())) | set(who.get(o.key, ()))
            others = [w for w in workers if w not in holders] or workers
            copies.append(client.submit(_copy, o, workers=[others[i % len(others)]], allow_other_workers=True,
                                        pure=False))
        with rows.lost_for_good():
            _settle(client, copies)
        return round_, primary, copies

    def place(self, kept: tuple[int, list, list]) -> ChunkedRows:
        """The chunks placed again for the kept round: rows from the source, q(x_i) from whichever copy
        survived, or all from the round's commit when a chunk lost both. Raises WorkerLostError when
        neither is left."""
        round_, primary, copies = kept
        sources = []
        for i in range(len(primary)):
            alive = [f for f in (copies[i], primary[i]) if f.status == "finished"]
            if not alive:
                latent = self.committed(round_) if self.committed is not None else None
                if latent is None:
                    raise WorkerLostError(
                        f"a Dask worker was lost with GPLVM row chunk {i} and the copy of its q(x_i) (a "
                        "one-worker cluster, or every worker lost) and no checkpoint holds the round: the "
                        "fit cannot continue; fit again, with checkpoint= to resume from the last round")
                log.warning("daskgp: both copies of a GPLVM chunk's q(x_i) were lost; placing every chunk "
                            "again from round %d's checkpoint", round_)
                self.source.futures = self.source.replace(list(range(len(primary))))
                placed = place_latent(self.source, latent)
                self.source.release()
                return placed
            sources.append(alive[0])
        ys = self.source.replace(list(range(len(primary))))
        futures = [self.client.submit(_with_latent, y, s, pure=False)
                   for y, s in zip(ys, sources, strict=True)]
        return ChunkedRows(self.client, futures, self.source.sizes)


def place_latent(source, latent) -> ChunkedRows | LocalRows:
    """The chunks of ``source`` (rows without latent state: :class:`daskgp.compute.rows.RowChunks` on the
    workers, or LocalRows) with q(x_i) from ``latent`` (:class:`daskgp.sparse.gplvm_checkpoint.LatentRows`:
    a resumed checkpoint), block by block: one chunk's q(x_i) in this process at a time."""
    edges = chunk_edges(source.sizes)
    blocks = latent.blocks(edges)
    if isinstance(source, LocalRows):
        return LocalRows([_with_latent(c, np.concatenate(b, axis=1)) for c, b in zip(source.chunks, blocks,
                                                                                        strict=True)])
    client, futures = source.client, []
    for f, (mu, S) in zip(source.futures, blocks, strict=True):
        [lat] = client.scatter([np.concatenate([mu, S], axis=1)], hash=False)
        futures.append(client.submit(_with_latent, f, lat, pure=False))
    return ChunkedRows(client, futures, source.sizes)
