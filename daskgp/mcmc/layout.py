"""Which workers compute which chain's kernel products: the layout of a run on its cluster.

A chain's driver — its sampler state, the CG / ULISSE solves, the probes — is one task; its kernel products
K(θ)V over row blocks of X (:mod:`daskgp.compute.operator`) run either in that task's process (one worker
per chain, the cached kernel rows in its memory) or as pinned tasks on a set of workers, each caching the
kernel rows of its own blocks (:class:`daskgp.compute.executors.DaskExecutor`). Filippone & Engler (2015,
section 4) parallelise exactly this product; the chains are independent.

The rule: C chains on W workers get K = ⌊W/C⌋ workers each (chain c the workers cK … cK + K − 1 in address
order; the W − CK left over stay free; a chain that loses a worker takes one the cluster gains, such as
the nanny's restart), so C ≥ W keeps one chain per worker. Below
:data:`DISTRIBUTE_MIN_N` rows one worker per chain is kept whatever W is: there a product is quicker than
the per-product scheduling (scatter V, one task per worker, gather) of a spread one (measured: see the
constant). ``workers_per_chain`` overrides the rule (chains then share workers when CK > W); more than W
is refused.

Draws do not depend on the layout: the row blocks are a function of n only (:func:`chain_block_rows`), a
block's rows are computed by the same function on the same tile shapes wherever it runs, and the blocks
are concatenated in order — so the same seed gives bit-identical draws on 1, 2 or 16 workers per chain, and
after a lost worker's blocks move.
"""

from __future__ import annotations

import math

__all__ = ["chain_layout", "chain_block_rows", "DISTRIBUTE_MIN_N"]

# Rows from which a chain's products are spread over several workers by default. Measured on this
# project's 2-core machine (benchmarks/exact_scaling.py, house_8L rows, 33 columns, float32 cached rows):
# two workers against one took 11× as long per product at 1,030 rows (a product there is 3 ms, a
# scheduling round trip ~30 ms), 0.67× as fast at 4,096, 0.82× at 8,192, level at 16,384 and 1.30× as fast
# at 22,784 (two processes on one host share its memory bandwidth; on separate hosts the crossover is lower).
DISTRIBUTE_MIN_N = 16_384


def chain_block_rows(n: int) -> int:
    """Rows per block of a chain's kernel operator on n rows: 16 blocks up to 32,768 rows (enough to balance
    16 threads or workers), 2,048 rows beyond (a float32 cached block is then 8 KiB × n). A function of n
    only, so that a chain's draws do not depend on where its blocks run."""
    return max(256, min(2048, math.ceil(n / 16)))


def chain_layout(workers, n_chains: int, n_rows: int,
                 workers_per_chain: int | None = None) -> list[list[str]]:
    """The workers of each of ``n_chains`` chains on n_rows rows: a list of C address lists (one address:
    the chain computes in its own task's process). ``workers``: the cluster's worker addresses.
    ``workers_per_chain`` None applies the module's rule; an integer K takes K per chain, round robin, shared
    when C·K exceeds the workers. Raises ValueError when K is not a positive integer or exceeds the
    workers."""
    workers = sorted(workers)
    W = len(workers)
    if W == 0:
        raise ValueError("the dask cluster has no workers")
    if workers_per_chain is None:
        K = max(1, W // n_chains) if n_rows >= DISTRIBUTE_MIN_N else 1
    else:
        K = workers_per_chain
        if isinstance(K, bool) or not isinstance(K, int) or K < 1:
            raise ValueError(f"workers per chain must be a positive integer, got {K!r}")
        if K > W:
            raise ValueError(f"--workers-per-chain {K} is more than the cluster's {W} worker"
                             f"{'s' if W != 1 else ''}")
    return [[workers[(c * K + j) % W] for j in range(K)] for c in range(n_chains)]
