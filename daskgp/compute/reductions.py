"""Tree reductions on the Dask workers: per-chunk sums (ELBO or EP statistics, gradients) added in a tree of
small fan-in, so the client receives one sum whatever the number of chunks, and the parts of a chunk's result
that must stay with it (a cached ψ1) never travel."""

from __future__ import annotations

__all__ = ["tree_sum", "local_sum", "sum_in_tree_order", "sum_groups_in_tree_order"]


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


def sum_in_tree_order(items, fan_in: int = 4):
    """The sum of ``items`` (tuples contribute their first item) added exactly as :func:`tree_sum` adds
    the same list on the workers — runs of ``fan_in`` left to right, level by level: the same bits."""
    items = [_first(it) for it in items]
    if not items:
        raise ValueError("nothing to sum: no chunks")
    while len(items) > 1:
        items = [local_sum(*items[i:i + fan_in]) for i in range(0, len(items), fan_in)]
    return items[0]


def sum_groups_in_tree_order(order, *groups, fan_in: int = 4):
    """:func:`sum_in_tree_order` of per-chunk results computed in groups (a task per worker): ``groups``
    are lists of results, ``order`` the chunk index of each, group after group; the sum is the one a task
    per chunk and :func:`tree_sum` give, whatever the grouping."""
    flat = [r for g in groups for r in g]
    if len(flat) != len(order):
        raise ValueError(f"{len(flat)} results for {len(order)} chunks")
    at = dict(zip(order, flat, strict=True))
    return sum_in_tree_order([at[i] for i in sorted(at)], fan_in)
