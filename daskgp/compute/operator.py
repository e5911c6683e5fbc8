"""The covariance operator K(θ) = k(X, X) + σ²·I, applied blockwise and never materialised.

One product is one pass over row blocks of X. A row block i evaluates its kernel rows K(X_i, X) tile by tile
(bounded memory) and applies each tile to every column of V at once; a gradient pass also applies the
derivative blocks ∂K/∂log θ_j in the same pass, reusing each tile for every column and every derivative.

An operator is a value, K at one θ: ``op.with_log_params(θ′)`` gives K(θ′) and leaves ``op`` as it was.
Where the blocks run is its executor's business (:mod:`daskgp.compute.executors`: ``local``, a thread pool
in this process, chosen for small n; ``distributed``, one pinned task per row block on a ``dask.distributed``
cluster), injected or built from ``mode``; operators derived by ``with_log_params`` share it.

Caching: while θ is fixed (a whole CG solve), each row block's kernel rows K(X_i, X) are kept where they were
computed if all blocks fit the memory budget; the executor owns them, keyed by θ, so a product at another θ
rebuilds them in the same memory.
"""

from __future__ import annotations

import copy
import math
import threading

import numpy as np
from array_api_compat import array_namespace, device

from ..core.validation import check_positive
from ..model.kernels import Kernel
from .backend import check_columns, check_matrix, dtype_name, to_host
from .cached import cached_product
from .executors import cache_for, executor_for, single_threaded_blas

__all__ = ["KernelOperator", "dense_covariance", "single_threaded_blas"]  # the last: from .executors

_TILE_ENTRIES = 1 << 22  # 4M entries = 32 MiB per float64 temporary


def _tiles(n: int, rows: int):
    step = max(256, _TILE_ENTRIES // max(rows, 1))
    return [(c, min(c + step, n)) for c in range(0, n, step)]


# numpy fast path: (rows × cols) tiles small enough to stay in cache, computed in place in a per-thread
# workspace (fresh large allocations cost more in page faults than the kernel arithmetic itself).
_TILE_ROWS, _TILE_COLS = 128, 2048
_WS_NAMES = ("H", "K", "G", "E", "T")
_local = threading.local()


def _workspace(r: int, c: int) -> dict:
    flat = getattr(_local, "flat", None)
    if flat is None:
        flat = _local.flat = {k: np.empty(_TILE_ROWS * _TILE_COLS) for k in _WS_NAMES}
        flat["F"] = np.empty(_TILE_ROWS * _TILE_COLS, dtype=np.float32)  # float32 rows' own scratch
    return {k: v[: r * c].reshape(r, c) for k, v in flat.items()}


def _np_tiles(i0: int, i1: int, n: int):
    for r0 in range(i0, i1, _TILE_ROWS):
        for c0 in range(0, n, _TILE_COLS):
            yield r0, min(r0 + _TILE_ROWS, i1), c0, min(c0 + _TILE_COLS, n)


def _fast(*arrays) -> bool:
    """The in-place numpy tiles apply: float64 numpy arrays."""
    return all(type(a) is np.ndarray and a.dtype == np.float64 for a in arrays)


def _row_block_matmul(X, i0, i1, V, kernel: Kernel, noise, cache_ref, theta_key, cache_dtype):
    """(i1-i0, k) rows of K V for the row block X[i0:i1]; ``cache_dtype`` None (no cache) or the dtype of
    the cached kernel rows (float32 halves the memory read by every cached pass: V is rounded to float32
    for the product, whose result comes back as float64), kept in the executor's cache ``cache_ref``."""
    key = i0
    cache = cache_for(cache_ref) if cache_dtype is not None else None
    entry = cache.get(key) if cache is not None else None
    if entry is not None and entry[0] == theta_key:
        return cached_product(entry[1], V) + noise * V[i0:i1, :]
    if _fast(X, V):
        n = X.shape[0]
        full = None
        if cache_dtype is not None:  # rebuild in the same memory when θ changed
            cache_dtype = np.dtype(cache_dtype)
            reuse = entry is not None and entry[1].dtype == cache_dtype
            full = entry[1] if reuse else np.empty((i1 - i0, n), dtype=cache_dtype)
            cache[key] = (None, full)
        A, B = kernel.augmented(X)
        out = np.zeros((i1 - i0, V.shape[1]))
        for r0, r1, c0, c1 in _np_tiles(i0, i1, n):
            ws = _workspace(r1 - r0, c1 - c0)
            dest = None if full is None else full[r0 - i0:r1 - i0, c0:c1]
            K, _, _ = kernel.tile_numpy(A[r0:r1], B[c0:c1], ws, need_g=False, out=dest)
            if full is None:
                out[r0 - i0:r1 - i0] += K @ V[c0:c1]
        if full is not None:
            out = cached_product(full, V)
            cache[key] = (theta_key, full)
        return out + noise * V[i0:i1, :]
    # any other array namespace (cupy, array_api_strict), or numpy float32: tiles allocated per product,
    # the rows kept in the cache as one (rows, n) array when there is one
    xp = array_namespace(X, V)
    Z = kernel.scale(X)
    Zi = Z[i0:i1, :]
    tiles = _tiles(X.shape[0], i1 - i0)
    if cache_dtype is not None:
        dt = getattr(xp, cache_dtype)
        full = xp.concat([xp.astype(kernel.blocks_from_scaled(Zi, Z[c0:c1, :])[0], dt) for c0, c1 in tiles],
                         axis=1)
        cache[key] = (theta_key, full)
        return cached_product(full, V) + noise * V[i0:i1, :]
    out = xp.zeros((i1 - i0, V.shape[1]), dtype=V.dtype, device=device(V))
    for c0, c1 in tiles:
        Kt, _, _ = kernel.blocks_from_scaled(Zi, Z[c0:c1, :])
        out = out + Kt @ V[c0:c1, :]
    return out + noise * V[i0:i1, :]


def _ard_columns(xp, Z, V):
    """[V, z_1 V, …, z_d V, z_1² V, …, z_d² V], (n, (2d+1)k)."""
    d = Z.shape[1]
    return xp.concat([V] + [Z[:, j:j + 1] * V for j in range(d)]
                     + [Z[:, j:j + 1] ** 2 * V for j in range(d)], axis=1)


def _row_block_grads(X, i0, i1, V, kernel: Kernel, noise):
    """For the row block X[i0:i1]: (KV rows (b, k), dKV rows (p, b, k)), derivatives w.r.t. log θ in the
    order kernel params..., noise. ∂K/∂log l_j = G ⊙ Δz_j², applied as
    z_j²⊙(GV) − 2 z_j⊙(G(z_j V)) + G(z_j² V), so ARD costs one wider matrix product."""
    xp = array_namespace(X, V)
    n, d = X.shape
    b, k = i1 - i0, V.shape[1]
    fast = _fast(X, V)
    if fast:
        A, B = kernel.augmented(X)
        Z = A[:, :d]
    else:
        Z = kernel.scale(X)
    W = _ard_columns(xp, Z, V) if kernel.ard else None
    KV = xp.zeros((b, k), dtype=V.dtype, device=device(V))
    acc = xp.zeros((b, W.shape[1] if kernel.ard else k), dtype=V.dtype, device=device(V))
    if fast:
        for r0, r1, c0, c1 in _np_tiles(i0, i1, n):
            ws = _workspace(r1 - r0, c1 - c0)
            K, G, H = kernel.tile_numpy(A[r0:r1], B[c0:c1], ws, need_g=True)
            rows = slice(r0 - i0, r1 - i0)
            KV[rows] += K @ V[c0:c1]
            if kernel.ard:
                acc[rows] += G @ W[c0:c1]
            else:
                np.multiply(G, H, out=ws["T"])  # G ⊙ (−r²/2); the −2 is applied once below
                acc[rows] += ws["T"] @ V[c0:c1]
        if not kernel.ard:
            acc *= -2.0
    else:
        Zi = Z[i0:i1, :]
        for c0, c1 in _tiles(n, b):
            Kt, Gt, R2 = kernel.blocks_from_scaled(Zi, Z[c0:c1, :], need_g=True)
            KV = KV + Kt @ V[c0:c1, :]
            acc = acc + (Gt @ W[c0:c1, :] if kernel.ard else (Gt * R2) @ V[c0:c1, :])
    if kernel.ard:
        GV = acc[:, :k]
        dl = []
        for j in range(d):
            zj = Z[i0:i1, j:j + 1]
            dl.append(zj * zj * GV - 2.0 * zj * acc[:, (1 + j) * k:(2 + j) * k]
                      + acc[:, (1 + d + j) * k:(2 + d + j) * k])
    else:
        dl = [acc]
    Vi = V[i0:i1, :]
    return KV + noise * Vi, xp.stack([KV] + dl + [noise * Vi])


def _theta_key(kernel: Kernel, noise: float) -> tuple:
    return (kernel.name, kernel.ard, *kernel.log_params.tolist(), float(noise))


class KernelOperator:
    """K(θ) = k(X, X) + noise·I as a linear operator, (n, n), never stored; a value — ``with_log_params``
    gives the operator at another θ, sharing this one's executor and cached rows.

    Parameters
    ----------
    X : (n, d) inputs of any array-API namespace (numpy, cupy, array_api_strict; a dask array is computed
        once). Products, derivative products and kernel rows come back in X's namespace and on its device;
        float32 X gives float32 products (the solvers refuse it: see :mod:`daskgp.compute.backend`).
    kernel : a :class:`daskgp.model.kernels.Kernel`.
    noise : σ² > 0, the noise variance added to the diagonal (units of y²).
    client : a ``dask.distributed.Client``; with ``mode='distributed'`` and none given, one is obtained
        from :func:`daskgp.compute.cluster.get_client` (an existing default client, or a new LocalCluster).
    mode : 'local', 'distributed', or 'auto': local when n ≤ ``local_max_n``, or when no client is given
        and n ≤ 4·``local_max_n`` (one process with a thread pool beats the scheduler's per-task overhead
        there); distributed otherwise. Ignored when ``executor`` is given.
    cache : 'auto' (cache kernel rows when they fit ``cache_fraction`` of the memory budget), True, False.
    cache_dtype : 'float64' or 'float32', the precision of the cached rows. The products are memory-bound,
        so float32 halves the time of every cached pass; the product's error is then a fixed ~1e-7 relative
        perturbation of K (on 8,000 rows of house_8L CG to 1e-6 and 1e-8 took the same iterations and the
        gradient moved by < 1e-3 of its 32-probe noise sd). The samplers use float32; exact checks float64.
    block_rows : rows per block (per task in distributed mode).
    n_threads : threads of the local executor (default: CPU count).
    device : None (compute where X is), 'cpu', 'gpu' or 'auto'. Local mode: 'gpu' moves X to the GPU
        (cupy) here, 'auto' when this process has one. Distributed mode: the workers put X on their device
        ('auto': each worker's GPU when it has one) and keep it there; products still come back in X's
        namespace.
    executor : a :class:`~daskgp.compute.executors.LocalExecutor` or
        :class:`~daskgp.compute.executors.DaskExecutor` built on this X (its ``X`` is used; the operator
        neither owns nor closes it); None builds one from ``mode``, owned (closed) by this operator.

    Log-parameter vector θ = [kernel.log_params..., log noise], names in ``param_names``.
    """

    def __init__(self, X, kernel: Kernel, noise: float, *, client=None, mode: str = "auto",
                 cache="auto", cache_dtype: str = "float64", block_rows: int | None = None,
                 n_threads: int | None = None, local_max_n: int = 10_000, cache_fraction: float = 0.4,
                 device: str | None = None, executor=None):
        if hasattr(X, "compute") and hasattr(X, "dask"):  # a dask array: its chunks' type, gathered here
            X = X.compute()
        X = check_matrix(X)  # numpy → float64 C order unless float32; other namespaces keep their dtype
        if not isinstance(kernel, Kernel):
            raise TypeError(f"kernel must be a daskgp Kernel, got {type(kernel).__name__}")
        kernel.check_dims(X.shape[1])
        if mode not in ("auto", "local", "distributed"):
            raise ValueError(f"mode must be 'auto', 'local' or 'distributed', got {mode!r}")
        if cache not in ("auto", True, False):
            raise ValueError(f"cache must be 'auto', True or False, got {cache!r}")
        if cache_dtype not in ("float64", "float32"):
            raise ValueError(f"cache_dtype must be 'float64' or 'float32', got {cache_dtype!r}")
        if device not in (None, "auto", "cpu", "gpu"):
            raise ValueError(f"device must be None, 'auto', 'cpu' or 'gpu', got {device!r}")
        # cached rows never more precise than the data they are computed from
        self.cache_dtype = np.dtype("float32" if dtype_name(X.dtype) == "float32" else cache_dtype)
        self.kernel, self.noise = kernel, check_positive("noise", noise)
        self.n, self.d = X.shape
        self.dtype = X.dtype
        # one construction path: the executor is injected, or built here from ``mode`` (and then owned)
        self._owns_executor = executor is None
        if executor is None:
            if mode == "auto":
                mode = "local" if (self.n <= local_max_n or client is None and self.n <= 4 * local_max_n) \
                    else "distributed"
            executor = executor_for(X, mode, client=client, n_threads=n_threads, device=device)
        elif tuple(executor.X.shape) != tuple(X.shape):
            raise ValueError(f"the executor holds X of shape {tuple(executor.X.shape)}, not {tuple(X.shape)}")
        self.executor = executor
        self.X = executor.X
        self.device = device
        rows = block_rows or executor.block_rows(self.n)
        self.blocks = [(i, min(i + rows, self.n)) for i in range(0, self.n, rows)]
        if cache is True or cache is False:
            self.use_cache = cache
        else:
            self.use_cache = executor.cache_fits(self.blocks, self.n, self.cache_dtype.itemsize,
                                                 cache_fraction)

    # --- where it runs -------------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        """'local' or 'distributed': the executor's kind."""
        return self.executor.mode

    @property
    def client(self):
        return getattr(self.executor, "client", None)

    @property
    def n_products(self) -> int:
        """Operator passes so far (one per matmul / matmul_grads call), counted by the executor: over every
        operator on it (those derived from this one by ``with_log_params`` among them)."""
        return self.executor.passes

    # --- parameters ---------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def param_names(self) -> list[str]:
        return self.kernel.param_names + ["noise"]

    @property
    def n_params(self) -> int:
        return self.kernel.n_params + 1

    @property
    def log_params(self) -> np.ndarray:
        return np.concatenate([self.kernel.log_params, [math.log(self.noise)]])

    def with_log_params(self, log_params) -> KernelOperator:
        """The operator at θ = ``log_params`` (log space, kernel params then noise), on the same executor:
        this one is unchanged, and the cached rows of either are rebuilt in place by the other's next
        product (their θ keys differ)."""
        lp = np.asarray(log_params, dtype=np.float64)
        if lp.shape != (self.n_params,):
            raise ValueError(f"expected {self.n_params} log-parameters {self.param_names}, "
                             f"got shape {lp.shape}")
        if not np.all(np.isfinite(lp)) or np.any(np.abs(lp) > 50):
            raise ValueError(f"log-parameters must be finite and in [-50, 50], got {lp.tolist()}")
        new = copy.copy(self)
        new.kernel = self.kernel.with_log_params(lp[:-1])
        new.noise = float(np.exp(lp[-1]))
        new._owns_executor = False
        return new

    # --- products -------------------------------------------------------------------------------------
    def matmul(self, V):
        """K V for V (n,) or (n, k); returns the same shape, in X's namespace and dtype (V of another
        namespace is converted to it first)."""
        V2, was_1d = check_columns(V, self.n, self.X)
        out = self.executor.run(_row_block_matmul, self.blocks, V2, self.kernel, self.noise,
                                self.executor.cache_ref, _theta_key(self.kernel, self.noise),
                                self.cache_dtype.name if self.use_cache else None)
        out = self._concat(out, 0)
        return out[:, 0] if was_1d else out

    __matmul__ = matmul

    def matmul_grads(self, V):
        """(K V, dKV) with dKV[j] = ∂K/∂log θ_j · V, shapes (n, k) and (p, n, k); V (n,) or (n, k); in X's
        namespace."""
        V2, was_1d = check_columns(V, self.n, self.X)
        parts = self.executor.run(_row_block_grads, self.blocks, V2, self.kernel, self.noise)
        KV = self._concat([p[0] for p in parts], 0)
        dKV = self._concat([p[1] for p in parts], 1)
        if was_1d:
            return KV[:, 0], dKV[:, :, 0]
        return KV, dKV

    def _concat(self, parts, axis: int):
        if len(parts) == 1:
            return parts[0]
        if type(parts[0]) is np.ndarray:
            return np.concatenate(parts, axis=axis)
        return array_namespace(*parts).concat(parts, axis=axis)

    def diag(self):
        """(n,) diagonal of K: prior variance plus noise, in X's namespace."""
        return self.kernel.diag(self.X) + self.noise

    def kernel_rows(self, idx):
        """(len(idx), n) rows k(X[idx], X) of the kernel part (no noise), in X's namespace; numpy float64
        computes them tile by tile in place (no n-sized temporaries). ``idx``: host integers."""
        idx = np.asarray(to_host(idx), dtype=np.intp)
        if not _fast(self.X):
            xp = array_namespace(self.X)
            Xi = xp.take(self.X, xp.asarray(idx, device=device(self.X)), axis=0)
            return self.kernel(Xi, self.X)
        A, B = self.kernel.augmented(self.X)
        A = A[idx]
        out = np.empty((idx.size, self.n))
        for r0, r1, c0, c1 in _np_tiles(0, idx.size, self.n):
            self.kernel.tile_numpy(A[r0:r1], B[c0:c1], _workspace(r1 - r0, c1 - c0), need_g=False,
                                   out=out[r0:r1, c0:c1])
        return out

    def to_dense(self):
        """(n, n) dense K in X's namespace, for tests and small n only."""
        return dense_covariance(self.X, self.kernel, self.noise)

    def invalidate_cache(self) -> None:
        """Mark the cached kernel rows stale but keep their memory: the next product recomputes them in
        place (what a θ change does; fresh allocations of that size cost page faults)."""
        self.executor.drop(keep_memory=True)

    def clear_cache(self) -> None:
        """Free the cached kernel rows wherever they are."""
        self.executor.drop(keep_memory=False)

    def close(self) -> None:
        """Free the cached rows and, when this operator built its executor, the executor itself (its
        threads); an operator derived by ``with_log_params`` or given an executor leaves it open."""
        if self._owns_executor:
            self.executor.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (f"KernelOperator(n={self.n}, d={self.d}, kernel={self.kernel.name}, ard={self.kernel.ard}, "
                f"mode={self.mode!r}, blocks={len(self.blocks)}, cache={self.use_cache})")


def dense_covariance(X, kernel: Kernel, noise: float):
    """(n, n) dense K = k(X, X) + noise·I, in X's namespace (float64 for numpy input)."""
    if type(X) is np.ndarray:
        K = np.asarray(kernel(X, X), dtype=np.float64)
        K[np.diag_indices_from(K)] += noise
        return K
    xp = array_namespace(X)
    return kernel(X, X) + noise * xp.eye(X.shape[0], dtype=X.dtype, device=device(X))
