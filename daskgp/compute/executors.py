"""Where a kernel operator's row blocks run, and who owns their cached kernel rows.

A :class:`daskgp.compute.operator.KernelOperator` is a value: K(θ) for one θ. Everything that outlives a
θ — the threads or the cluster, X placed on the workers or the device, the cached rows K(X_i, X) — belongs
to its executor, which operators at other θ share (``op.with_log_params``): a new θ finds the old rows,
sees their θ key differ, and rebuilds them in the same memory.

* :class:`LocalExecutor`: a thread pool in this process; its cache is a dict it holds.
* :class:`DaskExecutor`: a ``dask.distributed`` Client, X sent to its workers (all of the cluster's, or
  a given subset: one MCMC chain's) once, V per product, one task per worker and product computing that
  worker's row blocks, pinned to it, so that the blocks' cached rows stay there. The cache lives in each
  worker process under the executor's id (a task cannot carry a dict back and forth); a lost worker —
  between products or during one — re-pins the blocks on the survivors (and on workers the cluster gained
  since), places X afresh and repeats the product.

Results depend on the block boundaries only, never on which worker or thread computed a block: a row's
product is one block function call on the same tile shapes, and the blocks are concatenated in order. So
the same blocks give bit-identical products locally, on 1 or 16 workers, and after a lost worker.

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
from .cluster import cluster_workers

__all__ = ["LocalExecutor", "DaskExecutor", "executor_for", "cache_for", "single_threaded_blas",
           "release_worker_caches"]

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
_WATCH_SECONDS = 1.0  # how often a product in flight checks that its workers are alive


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


def release_worker_caches(prefix: str) -> int:
    """Free, in this process, the cached rows and device copies of X of every executor whose id starts with
    ``prefix`` (a run's key: its chains' executors are named after it); returns how many executors. Run on
    every worker when a run ends, so a chain's blocks are freed even where its driver never got to close
    them (a lost driver, a cancelled segment)."""
    with _LOCK:
        ids = [x for x in set(_WORKER_CACHES) | set(_DEVICE_X) if x.startswith(prefix)]
        for x in ids:
            _WORKER_CACHES.pop(x, None)
            _DEVICE_X.pop(x, None)
    return len(ids)


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


def _worker_address() -> str | None:
    """The address of the worker this code runs on (None outside a worker)."""
    try:
        from distributed import get_worker

        return get_worker().address
    except ValueError:
        return None


def _worker_blocks(fn, X, blocks: list, V, *rest) -> list:
    """A worker's share of one product: ``fn`` on each of its blocks, on the worker's threads (BLAS single
    threaded then, as in :class:`LocalExecutor`), results in block order."""
    try:
        from distributed import get_worker

        threads = get_worker().state.nthreads
    except ValueError:
        threads = 1
    if threads <= 1 or len(blocks) == 1:
        return [fn(X, b0, b1, V, *rest) for b0, b1 in blocks]
    with ThreadPoolExecutor(min(threads, len(blocks))) as pool, single_threaded_blas():
        return list(pool.map(lambda b: fn(X, b[0], b[1], V, *rest), blocks))


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
        self.passes = 0  # operator passes run here, by every operator built on this executor

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

        self.passes += 1
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
    block j pinned to worker ⌊j·w/blocks⌋ of its w workers so its cached rows stay there. ``workers``: the
    addresses to use (default: all of the cluster's), e.g. one chain's share of a cluster that runs several
    chains. ``device``: each worker puts X on its device ('gpu', or 'auto': its GPU when it has one) and keeps
    it; results come back as numpy. ``id``: the name of its caches on the workers (default: a fresh one); an
    executor rebuilt under the same id (a chain's next segment in another process) finds the rows its
    predecessor cached, keyed by θ as always. The client may be a worker's (``worker_client``): a chain's
    driver runs in a task."""

    mode = "distributed"

    def __init__(self, X, client=None, device: str | None = None, *, workers=None, id: str | None = None):
        if device is not None and type(X) is not np.ndarray:
            raise ValueError("device= in distributed mode moves numpy X to the workers' devices; X is "
                             f"already a {type(X).__module__} array: pass numpy X, or device=None")
        from .cluster import get_client

        self.X, self.device = X, device
        self.client = client if client is not None else get_client()
        live = sorted(cluster_workers(self.client))
        if not live:
            raise RuntimeError("the dask cluster has no workers")
        if workers is not None:
            workers = list(dict.fromkeys(workers))
            unknown = [w for w in workers if w not in live]
            if not workers or unknown:
                raise ValueError(f"workers must be addresses of the cluster's workers; not among them: "
                                 f"{unknown or workers}")
        self._chosen = workers  # None: every worker, as the cluster grows or shrinks
        self.workers = workers if workers is not None else live
        self._known = set(live)  # workers seen so far: one that appears later is a spare
        self.id = id or uuid.uuid4().hex
        self.here = _worker_address()  # this executor's process: a worker (a chain's driver task) or None
        self.bytes_moved = 0  # right-hand sides out and results back, for the scaling measurements
        self.passes = 0  # operator passes run here, by every operator built on this executor
        self._X_future = self._place_X()

    def _home(self) -> list[str]:
        """Where X and each V are put: the worker this executor's client runs on (a chain's driver task:
        the data are there already) when that is one of its workers, else its first worker. The block tasks
        on the other workers fetch them from there, once per worker for X. Not a broadcast: a broadcast to
        a worker that dies during it is retried by the scheduler, 30 s at a time, for ever (seen: a test
        hung 20 minutes)."""
        return [self.here] if self.here in self.workers else self.workers[:1]

    def _moved(self, V, out, n_blocks: int) -> int:
        """Bytes of one product that crossed a process boundary: V to every worker that is not this
        process, and the results of the blocks computed there."""
        away = [j for j in range(n_blocks) if self._owner(j, n_blocks) != self.here]
        return V.nbytes * sum(x != self.here for x in self.workers) + sum(_nbytes(out[j]) for j in away)

    def _place_X(self):
        return self.client.scatter(self.X, workers=self._home(), hash=False)

    @property
    def cache_ref(self) -> str:
        return self.id

    def block_rows(self, n: int) -> int:
        return max(256, min(4096, math.ceil(n / (2 * len(self.workers)))))

    def cache_fits(self, blocks: list, n: int, itemsize: int, fraction: float) -> bool:
        info = cluster_workers(self.client)
        limits = [info[w].get("memory_limit") or 0 for w in self.workers]
        budget = fraction * min(limits) if min(limits) > 0 else 0
        per_worker = math.ceil(len(blocks) / len(self.workers))
        return per_worker * max(b1 - b0 for b0, b1 in blocks) * n * itemsize <= budget

    def run(self, fn, blocks: list, V, *rest) -> list:
        from concurrent.futures import CancelledError

        self.passes += 1
        try:
            return self._run(fn, blocks, V, rest)
        except CancelledError:  # "lost dependencies": every replica of X or V died mid-pass; go again once
            return self._run(fn, blocks, V, rest, repin=True)

    def _repin(self, live: set) -> None:
        """After a lost worker: this executor's survivors plus workers the cluster gained since (a nanny's
        restart comes back under a new address), up to its own count (all live workers when it uses the
        whole cluster, or when none survived); X placed on them afresh — not trusting the replicas: a
        restarted worker needs it anyway — and every cached block dropped (the blocks move: rebuilt once)."""
        if not live:
            raise RuntimeError("the dask cluster has no workers left")
        if self._chosen is None:
            self.workers = sorted(live)
        else:
            survivors = [w for w in self.workers if w in live]
            spares = sorted(live - self._known)
            self.workers = (survivors + spares)[:len(self._chosen)] or sorted(live)
            self._chosen = self.workers
        self._known |= live
        self.client.run(_drop_on_worker, self.id, on_error="ignore")  # one dying meanwhile keeps nothing
        self._X_future = self._place_X()

    def _owner(self, j: int, n_blocks: int) -> str:
        """The worker of block j: contiguous runs of blocks per worker, in address order."""
        return self.workers[(j * len(self.workers)) // n_blocks]

    def _submit(self, fn, blocks, V, rest):
        """One task per worker, computing that worker's blocks (one task per block cost ~3 ms of scheduling
        each: on 4,096 rows in 16 blocks a product took 0.12 s on two workers against 0.03 s in one
        process), pinned to it (a rule: a block computed elsewhere would cache its rows twice), and the
        scattered V they read. Returns [(block indices, future)]."""
        V_future = self.client.scatter(V, workers=self._home(), hash=False)
        if self.device is not None:  # the task moves X (once per worker) and V to its device
            rest = (fn, self.device, self.id) + tuple(rest)
            fn = _on_worker_device
        mine: dict[str, list[int]] = {}
        for j in range(len(blocks)):
            mine.setdefault(self._owner(j, len(blocks)), []).append(j)
        return [(js, self.client.submit(_worker_blocks, fn, self._X_future, [blocks[j] for j in js], V_future,
                                        *rest, pure=False, workers=[w], allow_other_workers=False))
                for w, js in mine.items()]

    def _run(self, fn, blocks, V, rest, repin: bool = False):
        from distributed import wait

        client = self.client
        if repin:
            self._repin(set(cluster_workers(client)))
        try:
            tasks = self._submit(fn, blocks, V, rest)
        except KeyError:  # the scheduler no longer knows a worker V was to be placed on: lost since
            self._repin(set(cluster_workers(client)))
            tasks = self._submit(fn, blocks, V, rest)
        # a pinned task whose worker died — before this product or during it — waits forever ('no-worker'):
        # a product that takes longer than _WATCH_SECONDS checks its workers (no round trip otherwise)
        while True:
            futs = [f for _, f in tasks]
            try:
                wait(futs, timeout=_WATCH_SECONDS)
                break
            except TimeoutError:
                live = set(cluster_workers(client))
                if not set(self.workers) <= live:  # lost mid-product: the whole product again, re-pinned
                    client.cancel(futs)
                    self._repin(live)
                    tasks = self._submit(fn, blocks, V, rest)
        out: list = [None] * len(blocks)
        for (js, _), parts in zip(tasks, client.gather(futs), strict=True):
            for j, part in zip(js, parts, strict=True):
                out[j] = part
        self.bytes_moved += self._moved(V, out, len(blocks))
        return out

    def drop(self, keep_memory: bool) -> None:
        if self.client is not None and self.client.status == "running":
            self.client.run(_drop_on_worker, self.id, keep_memory)

    def cached_blocks(self) -> dict:
        """Row blocks cached per worker address (for tests and diagnostics)."""
        return self.client.run(_worker_cache_sizes, self.id)

    def close(self) -> None:
        self.drop(keep_memory=False)


def executor_for(X, mode: str, *, client=None, n_threads: int | None = None, device: str | None = None):
    """The executor ``mode`` ('local' or 'distributed') names for X: a :class:`LocalExecutor` of
    ``n_threads`` threads, or a :class:`DaskExecutor` on ``client``'s workers (None: the default client)."""
    if mode == "local":
        return LocalExecutor(X, n_threads, device)
    if mode == "distributed":
        return DaskExecutor(X, client, device)
    raise ValueError(f"mode must be 'local' or 'distributed', got {mode!r}")


def _nbytes(out) -> int:
    return sum(o.nbytes for o in out) if isinstance(out, tuple) else out.nbytes
