"""Where a kernel operator's row blocks run, and who owns their cached kernel rows.

A :class:`daskgp.compute.operator.KernelOperator` is a value: K(θ) for one θ. Everything that outlives a
θ — the threads or the cluster, X placed on the workers or the device, the cached rows K(X_i, X) — belongs
to its executor, which operators at other θ share (``op.with_log_params``): a new θ finds the old rows,
sees their θ key differ, and rebuilds them in the same memory.

* :class:`LocalExecutor`: a thread pool in this process; its cache is a dict it holds.
* :class:`DaskExecutor`: a ``dask.distributed`` Client, X broadcast to the workers once, V per product, one
  task per row block pinned to a worker, so that the block's cached rows stay there. The cache lives in each
  worker process under the executor's id (a task cannot carry a dict back and forth); a lost worker re-pins
  the blocks and broadcasts X afresh.

A block function has the signature ``fn(X, i0, i1, V, *rest)`` and returns the rows i0:i1 of its result; a
``cache`` argument among ``rest`` is the executor's :attr:`cache_ref`, which :func:`cache_for` turns into the
dict on whichever process runs the block.
"""

from __future__ import annotations

import math
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .backend import free_memory, resolve_device, to_device, to_host

__all__ = ["LocalExecutor", "DaskExecutor", "cache_for", "single_threaded_blas"]

_CONTROLLER: list = []  # threadpoolctl's view of the loaded BLAS, built once per process


def single_threaded_blas():
    """A context in which BLAS runs on one thread (for code that already runs one thread per core). The
    controller is built once: ``threadpool_limits`` rescans the process's libraries on every call (≈ 5 ms,
    40 % of a gradient on concrete when it ran per operator pass)."""
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


# In a worker process: executor id -> {first row of a block: (θ key, cached rows)}, and executor id ->
# (device, X on it). Module level because a task cannot carry its executor's dict to the worker and back.
_WORKER_CACHES: dict[str, dict] = {}
_DEVICE_X: dict[str, tuple] = {}
_LOCK = threading.Lock()


def cache_for(ref) -> dict:
    """The cached-rows dict an executor's ``cache_ref`` names: the dict itself (local) or this worker's dict
    for that executor id (distributed)."""
    if isinstance(ref, dict):
        return ref
    with _LOCK:
        return _WORKER_CACHES.setdefault(ref, {})


def _drop(cache: dict, keep_memory: bool) -> int:
    """Forget cached rows: delete them, or only mark them stale so the next product rebuilds them in the
    same memory."""
    with _LOCK:
        keys = list(cache)
        for k in keys:
            if keep_memory:
                cache[k] = (None, cache[k][1])
            else:
                del cache[k]
    return len(keys)


def _drop_on_worker(xid: str, keep_memory: bool = False) -> int:
    with _LOCK:
        cache = _WORKER_CACHES.get(xid)
        if not keep_memory:
            _DEVICE_X.pop(xid, None)
            _WORKER_CACHES.pop(xid, None)
    return 0 if cache is None else _drop(cache, keep_memory)


def _worker_cache_sizes(xid: str) -> int:
    """Row blocks this worker holds for executor ``xid`` (for tests and diagnostics)."""
    return len(_WORKER_CACHES.get(xid, {}))


def _on_worker_device(X, i0, i1, V, fn, device_name, xid, *rest):
    """Run a block function on this worker's device: X moved once per executor and kept, V moved per
    product, the result brought back to the host (the client's X is numpy)."""
    with _LOCK:
        entry = _DEVICE_X.get(xid)
        if entry is None:
            where = resolve_device(device_name)
            entry = _DEVICE_X[xid] = (where, to_device(X, where))
    where, Xd = entry
    out = fn(Xd, i0, i1, to_device(V, where), *rest)
    return tuple(to_host(o) for o in out) if isinstance(out, tuple) else to_host(out)


def _cpu_count() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class LocalExecutor:
    """Row blocks on a pool of ``n_threads`` threads in this process (default: one per CPU for numpy X, one
    for a device array, which runs its own parallelism). ``device``: 'gpu', 'cpu' or 'auto' moves X there
    first (None: X stays where it is). Holds the cached rows of every operator built on it."""

    mode = "local"

    def __init__(self, X, n_threads: int | None = None, device: str | None = None):
        self.X = X if device is None else to_device(X, resolve_device(device))
        self.n_threads = n_threads or (_cpu_count() if type(self.X) is np.ndarray else 1)
        self._pool = ThreadPoolExecutor(self.n_threads) if self.n_threads > 1 else None
        self.cache: dict = {}
        self.id = uuid.uuid4().hex

    @property
    def cache_ref(self) -> dict:
        return self.cache

    def block_rows(self, n: int) -> int:
        return max(256, min(2048, math.ceil(n / (4 * self.n_threads))))

    def cache_fits(self, blocks: list, n: int, itemsize: int, fraction: float) -> bool:
        return n * n * itemsize <= fraction * free_memory(self.X)

    def run(self, fn, blocks: list, V, *rest) -> list:
        def one(b):
            return fn(self.X, b[0], b[1], V, *rest)

        if self._pool is None:
            return [one(b) for b in blocks]
        with single_threaded_blas():  # the threads already use every core
            return list(self._pool.map(one, blocks))

    def drop(self, keep_memory: bool) -> None:
        _drop(self.cache, keep_memory)

    def close(self) -> None:
        self.drop(keep_memory=False)
        if self._pool is not None:
            self._pool.shutdown()


class DaskExecutor:
    """Row blocks as tasks on the workers of ``client`` (None: :func:`daskgp.compute.cluster.get_client`),
    block j pinned to worker ⌊j·w/blocks⌋ so its cached rows stay there. ``device``: each worker puts X on
    its device ('gpu', or 'auto': its GPU when it has one) and keeps it; results come back as numpy."""

    mode = "distributed"

    def __init__(self, X, client=None, device: str | None = None):
        if device is not None and type(X) is not np.ndarray:
            raise ValueError("device= in distributed mode moves numpy X to the workers' devices; X is "
                             f"already a {type(X).__module__} array: pass numpy X, or device=None")
        from .cluster import get_client

        self.X, self.device = X, device
        self.client = client if client is not None else get_client()
        self.workers = sorted(self.client.scheduler_info()["workers"])
        if not self.workers:
            raise RuntimeError("the dask cluster has no workers")
        self.id = uuid.uuid4().hex
        self._X_future = self.client.scatter(X, broadcast=True, hash=False)

    @property
    def cache_ref(self) -> str:
        return self.id

    def block_rows(self, n: int) -> int:
        return max(256, min(4096, math.ceil(n / (2 * len(self.workers)))))

    def cache_fits(self, blocks: list, n: int, itemsize: int, fraction: float) -> bool:
        info = self.client.scheduler_info()["workers"]
        limits = [info[w].get("memory_limit") or 0 for w in self.workers]
        budget = fraction * min(limits) if min(limits) > 0 else 0
        per_worker = math.ceil(len(blocks) / len(self.workers))
        return per_worker * max(b1 - b0 for b0, b1 in blocks) * n * itemsize <= budget

    def run(self, fn, blocks: list, V, *rest) -> list:
        from concurrent.futures import CancelledError

        try:
            return self._run(fn, blocks, V, rest)
        except CancelledError:  # "lost dependencies": a worker died mid-pass; re-pin and go again once
            return self._run(fn, blocks, V, rest, repin=True)

    def _run(self, fn, blocks, V, rest, repin: bool = False):
        client = self.client
        current = set(client.scheduler_info()["workers"])
        if not current:
            raise RuntimeError("the dask cluster has no workers left")
        if repin or not set(self.workers) <= current:  # a worker died: re-pin blocks, drop orphaned caches
            self.workers = sorted(current)
            client.run(_drop_on_worker, self.id)
            # broadcast X afresh, not trusting the surviving replicas: the restarted worker needs it anyway
            self._X_future = client.scatter(self.X, broadcast=True, hash=False)
        V_future = client.scatter(V, broadcast=True, hash=False)
        if self.device is not None:  # the task moves X (once per worker) and V to its device
            rest = (fn, self.device, self.id) + tuple(rest)
            fn = _on_worker_device
        w = len(self.workers)
        futs = [client.submit(fn, self._X_future, b0, b1, V_future, *rest, pure=False,
                              workers=[self.workers[(j * w) // len(blocks)]], allow_other_workers=False)
                for j, (b0, b1) in enumerate(blocks)]
        try:
            return client.gather(futs)
        finally:
            del V_future

    def drop(self, keep_memory: bool) -> None:
        if self.client is not None and self.client.status == "running":
            self.client.run(_drop_on_worker, self.id, keep_memory)

    def cached_blocks(self) -> dict:
        """Row blocks cached per worker address (for tests and diagnostics)."""
        return self.client.run(_worker_cache_sizes, self.id)

    def close(self) -> None:
        self.drop(keep_memory=False)
