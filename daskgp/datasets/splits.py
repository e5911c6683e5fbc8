"""The one train/test split of the project: for data in memory a permutation of the rows
(:func:`split_indices`, nested: a smaller training set is inside a larger one), for a table read on the
workers a hash of each row's index and the seed (:func:`split_table`: the same rows however the table is cut
into files, decided where the rows are, no row read to split)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .loaders import Dataset
    from .tables import Table

__all__ = ["split_indices", "train_test", "split_table", "is_test_row"]


def split_indices(n: int, test_fraction: float = 0.1, train_size: int | None = None,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The one train/test split of the project: (train rows, test rows), each sorted. ``test_fraction`` of
    the n rows are held out (the same rows for every ``train_size``); ``train_size`` rows are drawn from the
    rest (None: all of it), nested: the 7K training set is inside the 70K one."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    perm = np.random.default_rng(seed).permutation(n)
    n_test = max(1, int(round(test_fraction * n)))
    test, rest = perm[:n_test], perm[n_test:]
    if train_size is not None:
        if not 1 <= train_size <= len(rest):
            raise ValueError(f"train_size must be in 1..{len(rest)}, got {train_size}")
        rest = rest[:train_size]
    return np.sort(rest), np.sort(test)


def train_test(ds: Dataset, test_fraction: float = 0.1, train_size: int | None = None, seed: int = 0):
    """A fixed random split (:func:`split_indices`) in original units: (X_train, y_train, X_test, y_test)."""
    train, test = split_indices(ds.n, test_fraction, train_size, seed)
    return ds.X[train], ds.y[train], ds.X[test], ds.y[test]


_MIX = np.uint64(0x9E3779B97F4A7C15)


def is_test_row(start: int, stop: int, seed: int, test_fraction: float) -> np.ndarray:
    """(stop − start,) bool: which of the table's rows start … stop−1 are test rows. A hash (splitmix64) of
    the row's index and the seed against ``test_fraction``: the same rows whatever the files' sizes."""
    with np.errstate(over="ignore"):
        z = np.arange(start, stop, dtype=np.uint64) + np.uint64(seed) * _MIX + _MIX
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53 < test_fraction


def _rows_of(block, test: bool, seed: int, test_fraction: float, block_info=None):
    start, stop = block_info[0]["array-location"][0]
    keep = is_test_row(start, stop, seed, test_fraction)
    return block[keep if test else ~keep]


def split_table(table: Table, test_fraction: float = 0.1, seed: int = 0):
    """(X_train, y_train, X_test, y_test): dask arrays with known chunk sizes, a row held out when a hash of
    its index and ``seed`` falls below ``test_fraction`` (so about that fraction, the same rows however the
    table is split into files; not the permutation :func:`daskgp.datasets.split_indices` draws for data in
    memory). The counts per chunk come from the row indices alone: no row is read to split."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    starts = np.cumsum((0,) + table.X.chunks[0])
    n_test = tuple(int(is_test_row(a, b, seed, test_fraction).sum()) for a, b in zip(starts[:-1], starts[1:],
                                                                                 strict=True))
    n_train = tuple(int(b - a) - t for a, b, t in zip(starts[:-1], starts[1:], n_test, strict=True))
    if sum(n_test) == 0 or sum(n_train) == 0:
        raise ValueError(f"test fraction {test_fraction} leaves {sum(n_train)} training and {sum(n_test)} "
                         f"test rows of {table.n}")
    X = table.X.rechunk({1: -1})
    out = []
    for test, counts in ((False, n_train), (True, n_test)):
        kw = dict(test=test, seed=seed, test_fraction=test_fraction, dtype=np.float64)
        out += [X.map_blocks(_rows_of, chunks=(counts, X.chunks[1]), **kw),
                table.y.rechunk((X.chunks[0],)).map_blocks(_rows_of, chunks=(counts,), **kw)]
    return tuple(out)
