"""The array backend: one code path for numpy, cupy and any other array-API namespace.

Every numerical routine in :mod:`daskgp.compute` takes its arrays' own namespace (``array_api_compat``) and
returns arrays of it, on the same device. What the array API standard does not cover is here, dispatched on
the namespace:

* dense linear algebra the standard lacks: a triangular solve (scipy on numpy, ``cupyx.scipy.linalg`` on
  cupy, the standard's general ``linalg.solve`` elsewhere: correct, O(m³), used only on small m × m factors);
* column scatters (``a[:, cols] = v``): in place where the namespace allows integer-array assignment (numpy,
  cupy), functional (a concatenation and a ``take``) where it does not (``array_api_strict``);
* host transfers of small things (counters, a p-vector of parameters) and uploads of host-drawn random
  numbers, so that a chain's random stream is the same numpy generator on CPU and GPU workers;
* the device a computation runs on: 'cpu' or 'gpu' (cupy), resolved per process.

Precision: the solvers and everything built on them need float64 (CG on float32 products stalls near a
relative residual of 1e-4, above the tolerances the unbiased estimators need); :func:`require_float64` gives
that one clear error. Kernel evaluations and operator products keep float32 when given it.
"""

from __future__ import annotations

import numpy as np
from array_api_compat import array_namespace, device, is_cupy_namespace, is_numpy_namespace

__all__ = ["namespace", "is_numpy", "is_array", "is_cupy", "to_host", "like", "from_host", "into", "diagonal",
           "require_float64", "require_floating",
           "solve_triangular", "cholesky", "cho_solve", "take_cols", "put_cols", "col_dots", "norms",
           "free_memory", "gpu_available", "resolve_device", "to_device", "DEVICES",
           "check_matrix", "check_finite", "check_columns", "dtype_name"]

DEVICES = ("auto", "cpu", "gpu")


def namespace(*arrays):
    """The array-API namespace of ``arrays`` (numpy arrays give the compat wrapper of numpy)."""
    return array_namespace(*arrays)


def is_numpy(*arrays) -> bool:
    """True when every array is a plain numpy ndarray (the CPU fast paths' condition)."""
    return all(type(a) is np.ndarray for a in arrays)


def is_cupy(a) -> bool:
    """A cupy array (told by its type's module: cupy need not be importable here)."""
    return type(a).__module__.startswith("cupy")


def to_host(a) -> np.ndarray:
    """A numpy copy (or view) of ``a``: cupy device → host, other namespaces through ``np.asarray``."""
    if isinstance(a, np.ndarray):
        return a
    if is_cupy(a):
        return a.get()
    return np.asarray(a)


def from_host(a, xp, dtype=None, on=None):
    """``a`` (numpy or Python numbers) as an array of namespace ``xp`` (on the device of array ``on``)."""
    if is_numpy_namespace(xp):
        return np.asarray(a, dtype=dtype)
    kw = {} if on is None else {"device": device(on)}
    return xp.asarray(np.asarray(a), dtype=dtype, **kw)


def like(a, ref):
    """``a`` (numpy or numbers) in the namespace, dtype and device of array ``ref``."""
    return from_host(a, namespace(ref), dtype=ref.dtype, on=ref)


def into(a, ref):
    """``a`` (numpy, or an array of ref's namespace; None stays None) where array ``ref`` is: uploaded in its
    dtype when ref is a device array, brought to the host when ref is numpy."""
    if a is None:
        return None
    if type(ref) is np.ndarray:
        return to_host(a)
    return like(a, ref) if type(a) is np.ndarray else a


def diagonal(A):
    """The main diagonal (m,) of A (m, m), in A's namespace."""
    return A.diagonal() if type(A) is np.ndarray else namespace(A).linalg.diagonal(A)


def require_floating(a, name: str):
    """``a`` itself when it is float32 or float64; a float64 copy of an integer or boolean array."""
    xp = namespace(a)
    if a.dtype in (xp.float32, xp.float64):
        return a
    if xp.isdtype(a.dtype, ("integral", "bool")):
        return xp.astype(a, xp.float64)
    raise ValueError(f"{name} must be real floating point, got dtype {a.dtype}")


def require_float64(a, name: str, what: str):
    """``a`` when float64; a ValueError naming ``what`` needs float64 otherwise (float32 is refused, not
    upcast: the caller's arrays and the solver's would silently differ)."""
    xp = namespace(a)
    if a.dtype == xp.float64:
        return a
    raise ValueError(f"{what} needs float64 arrays, got {name} of dtype {a.dtype}: conjugate gradients on "
                     "float32 products stall near a relative residual of 1e-4. Convert "
                     "with xp.astype(X, xp.float64) (float32 is kept for kernel evaluations and operator "
                     "products)")


def cholesky(A):
    """Lower Cholesky factor of the symmetric positive definite A (m, m), in A's namespace."""
    if is_numpy(A):
        return np.linalg.cholesky(A)
    return namespace(A).linalg.cholesky(A)


def solve_triangular(L, B, *, lower: bool = True, trans: bool = False):
    """L⁻¹B (or L⁻ᵀB with ``trans``) for triangular L (m, m) and B (m,) or (m, k), in their namespace."""
    if is_numpy(L, B):
        import scipy.linalg

        return scipy.linalg.solve_triangular(L, B, lower=lower, trans="T" if trans else "N",
                                             check_finite=False)
    xp = namespace(L, B)
    if is_cupy_namespace(xp):
        import cupyx.scipy.linalg

        return cupyx.scipy.linalg.solve_triangular(L, B, lower=lower, trans="T" if trans else "N")
    M = L.T if trans else L
    return xp.linalg.solve(M, B) if B.ndim == 2 else xp.linalg.solve(M, B[:, None])[:, 0]


def cho_solve(L, B):
    """(L Lᵀ)⁻¹ B from the lower factor L (m, m); B (m,) or (m, k)."""
    return solve_triangular(L, solve_triangular(L, B, lower=True), lower=True, trans=True)


def _assignable(a) -> bool:
    return type(a) is np.ndarray or is_cupy(a)


def take_cols(a, cols: np.ndarray):
    """a[:, cols] for host integer indices ``cols``. Numpy and cupy index (a copy, whose memory layout sets
    the BLAS kernels of the products that follow: kept as it was, so CPU results are unchanged); other
    namespaces take (or return ``a`` itself when ``cols`` is every column in order)."""
    if _assignable(a):
        return a[:, cols]
    if cols.size == a.shape[1] and np.array_equal(cols, np.arange(a.shape[1])):
        return a
    xp = namespace(a)
    return xp.take(a, from_host(cols, xp, dtype=xp.int64, on=a), axis=1)


def put_cols(a, cols: np.ndarray, values):
    """a with a[:, cols] = values (in place where the namespace allows it; returns the result either way)."""
    k = a.shape[1]
    if _assignable(a):
        a[:, cols] = values
        return a
    if cols.size == k and np.array_equal(cols, np.arange(k)):
        return values
    xp = namespace(a, values)
    rest = np.setdiff1d(np.arange(k), cols)
    order = np.empty(k, dtype=np.int64)  # position of each column in [values, a[:, rest]]
    order[cols] = np.arange(cols.size)
    order[rest] = cols.size + np.arange(rest.size)
    both = xp.concat([values, take_cols(a, rest)], axis=1)
    return xp.take(both, from_host(order, xp, dtype=xp.int64, on=a), axis=1)


def col_dots(A, B):
    """(k,) column-wise dot products Σ_i A_ik B_ik of A, B (n, k)."""
    if is_numpy(A, B):
        return np.einsum("ij,ij->j", A, B)
    return namespace(A, B).sum(A * B, axis=0)


def norms(A):
    """(k,) Euclidean norms of the columns of A (n, k)."""
    if is_numpy(A):
        return np.linalg.norm(A, axis=0)
    return namespace(A).linalg.vector_norm(A, axis=0)


def free_memory(a) -> float:
    """Bytes free on the device holding array ``a``: the GPU's free memory for cupy, host memory otherwise."""
    if is_cupy(a):
        import cupy

        return float(cupy.cuda.Device().mem_info[0])
    import psutil

    return float(psutil.virtual_memory().available)


def gpu_available() -> bool:
    """True when cupy imports and sees a CUDA device."""
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:  # ImportError, or a CUDA driver error raised at import
        return False


def resolve_device(device_name: str = "auto") -> str:
    """'cpu' or 'gpu' for this process: 'gpu' only when cupy imports and sees a CUDA device (a ValueError
    for device='gpu' otherwise); 'auto' takes the GPU when there is one."""
    if device_name not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device_name!r}")
    if device_name == "cpu":
        return "cpu"
    if gpu_available():
        return "gpu"
    if device_name == "gpu":
        raise ValueError("device='gpu' needs cupy and a CUDA device in this process (pip install "
                         "cupy-cuda12x on a machine with an NVIDIA GPU), or use device='cpu'")
    return "cpu"


def to_device(a, device_name: str):
    """``a`` on 'cpu' (numpy) or 'gpu' (cupy); arrays of other namespaces (e.g. array_api_strict) are kept as
    they are for 'cpu'."""
    if device_name == "gpu":
        import cupy

        return cupy.asarray(a)
    if device_name != "cpu":
        raise ValueError(f"device must be 'cpu' or 'gpu' here, got {device_name!r}")
    if is_cupy(a):
        return a.get()
    return a


def is_array(a) -> bool:
    """An array of some array-API namespace (numpy, cupy, array_api_strict, ...), not a list or number."""
    return hasattr(a, "__array_namespace__") or is_cupy(a)


def check_matrix(X, name: str = "X", min_rows: int = 2):
    """(n, d) finite real array with at least ``min_rows`` rows, in its own namespace. Numpy input (and lists)
    becomes float64 C-ordered (:func:`daskgp.core.validation.check_X`) unless it is numpy float32, which is
    kept; other namespaces keep float32 / float64 (integers become float64). A 1-D array is one column."""
    from ..core.validation import check_2d_shape, check_X

    if not is_array(X) or (type(X) is np.ndarray and X.dtype != np.float32):
        return check_X(X, name, min_rows)
    X = require_floating(X, name)
    xp = namespace(X)
    if X.ndim == 1:
        X = xp.reshape(X, (X.shape[0], 1))
    check_2d_shape(X.shape, name, min_rows)
    check_finite(X, name)
    return np.ascontiguousarray(X) if type(X) is np.ndarray else X


def check_finite(a, name: str) -> None:
    """ValueError naming the first non-finite entry of ``a`` (any namespace; one reduction on the device)."""
    xp = namespace(a)
    if not bool(xp.all(xp.isfinite(a))):
        bad = np.argwhere(~np.isfinite(to_host(a)))
        raise ValueError(f"{name} contains {len(bad)} non-finite value(s) (NaN or inf), first at index "
                         f"{tuple(int(i) for i in bad[0])}")


def check_columns(V, n: int, ref, name: str = "V"):
    """Right-hand sides for an operator whose data is the array ``ref``: (V2d (n, k) in ref's namespace,
    dtype and device, was_1d). Numpy input to a non-numpy operator is uploaded; finite entries only."""
    if not is_array(V):
        V = np.asarray(V, dtype=np.float64)
    was_1d = V.ndim == 1
    if V.ndim not in (1, 2) or V.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k), got {tuple(V.shape)}")
    if type(ref) is np.ndarray:
        V = np.ascontiguousarray(to_host(V), dtype=ref.dtype)
    elif type(V) is np.ndarray or namespace(V) is not namespace(ref):
        V = like(to_host(V), ref)
    elif V.dtype != ref.dtype:
        V = namespace(ref).astype(V, ref.dtype)
    if was_1d:
        V = namespace(V).reshape(V, (n, 1))
    check_finite(V, name)
    return V, was_1d


def dtype_name(dtype) -> str:
    """'float32', 'float64', ... for a dtype of any namespace (``array_api_strict.float32`` → 'float32')."""
    return str(dtype).rsplit(".", 1)[-1]
