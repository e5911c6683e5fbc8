"""Tree reductions on the Dask workers: per-chunk sums (ELBO or EP statistics, gradients) added in a tree of
small fan-in, so the client receives one sum whatever the number of chunks, and the parts of a chunk's result
that must stay with it (a cached ψ1) never travel."""

from __future__ import annotations

__all__ = ["tree_sum", "local_sum"]


def _first(item):
    return item[0] if isinstance(item, tuple) else item


def local_sum(*items):
    total = _first(items[0])
    for it in items[1:]:
        total = total + _first(it)
    return total


def tree_sum(client, futures, fan_in: int = 4):
    """One future holding the sum of ``futures`` (tuples contribute their first item, taken on the worker
    holding the tuple so the rest, e.g. a cached ψ1, never travels), reduced in a tree of fan-in ``fan_in``
    on the workers."""
    futures = client.map(_first, list(futures), pure=False)
    if not futures:
        raise ValueError("nothing to sum: no chunks")
    while len(futures) > 1:
        futures = [client.submit(local_sum, *futures[i:i + fan_in], pure=False)
                   for i in range(0, len(futures), fan_in)]
    return futures[0]
