"""Random streams that a checkpoint can store and continue, and the probe vectors of stochastic trace
estimates (Hutchinson 1990; Filippone & Engler 2015, eq. 5).

A generator's state is ``Generator.bit_generator.state``, a plain dict of integers: stored as data and
restored by :func:`rng_from_state`, a chain continues exactly where it stopped.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rng_from_state", "rademacher", "minibatch_rows"]

_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")


def rng_from_state(state: dict) -> np.random.Generator:
    """A Generator continuing exactly from ``bit_generator.state`` (a plain dict, storable as JSON).
    Raises ValueError for anything but the state of one of numpy's bit generators."""
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in _BIT_GENERATORS:
        raise ValueError(f"not a numpy random generator state (bit_generator {name!r})")
    bg = getattr(np.random, name)()
    try:
        bg.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as e:
        raise ValueError(f"malformed {name} state: {e}") from None
    return np.random.Generator(bg)


def rademacher(n: int, k: int, rng) -> np.ndarray:
    """(n, k) probes with entries ±1 (E[r rᵀ] = I)."""
    return np.random.default_rng(rng).choice(np.array([-1.0, 1.0]), size=(n, k))


def minibatch_rows(n: int, batch) -> np.ndarray | None:
    """The rows (sorted, without replacement) of a minibatch of a chunk of n rows, ``batch`` = (size, seed):
    the same rows for the same seed on any worker, so a task recomputed elsewhere draws them again. None when
    ``batch`` is None or covers the chunk (every row)."""
    if batch is None or batch[0] >= n:
        return None
    return np.sort(np.random.default_rng(batch[1]).choice(n, batch[0], replace=False))
