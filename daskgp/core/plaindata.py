"""Plain data for checkpoints: nested dicts, lists, numbers, strings and numeric arrays as JSON.

Arrays become ``{"__ndarray__": base64, "dtype": ..., "shape": [...]}`` with the dtype from a fixed list of
numeric types, and non-finite floats ``{"__float__": "nan" | "inf" | "-inf"}``, so the documents are strict
JSON. Decoding accepts exactly what encoding writes and nothing else: no object arrays, no classes, no code,
which is what lets a user open a results file that came from somewhere else.
"""

from __future__ import annotations

import base64
import math

import numpy as np

__all__ = ["encode", "decode"]

_DTYPES = {"<f8", "<f4", "<i8", "<i4", "|b1", "<u8", "<u4"}


def encode(obj):
    """Chain states and records → JSON-ready data: arrays become {'__ndarray__': base64, 'dtype', 'shape'}
    (dtypes from a fixed numeric list), non-finite floats {'__float__': 'nan' | 'inf' | '-inf'}."""
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        if a.dtype.str not in _DTYPES:
            raise TypeError(f"cannot store an array of dtype {a.dtype} in a checkpoint")
        return {"__ndarray__": base64.b64encode(a.tobytes()).decode("ascii"), "dtype": a.dtype.str,
                "shape": list(a.shape)}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError(f"checkpoint keys must be strings, got {list(obj)}")
        return {k: encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if isinstance(obj, np.generic):
        return encode(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"__float__": repr(obj)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot store a {type(obj).__name__} in a checkpoint")


def decode(obj):
    """The inverse of :func:`encode`; raises ValueError on anything it would not have written."""
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            if set(obj) != {"__ndarray__", "dtype", "shape"} or obj["dtype"] not in _DTYPES:
                raise ValueError(f"malformed array entry (keys {sorted(obj)}, dtype {obj.get('dtype')!r})")
            shape = obj["shape"]
            if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)):
                raise ValueError(f"malformed array shape {shape!r}")
            raw = base64.b64decode(obj["__ndarray__"], validate=True)
            dt = np.dtype(obj["dtype"])
            if len(raw) != math.prod(shape) * dt.itemsize:
                raise ValueError(f"array data of {len(raw)} bytes does not fill shape {shape}")
            return np.frombuffer(raw, dtype=dt).reshape(shape).copy()
        if "__float__" in obj:
            if set(obj) != {"__float__"} or obj["__float__"] not in ("nan", "inf", "-inf"):
                raise ValueError(f"malformed float entry {obj!r}")
            return float(obj["__float__"])
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    return obj
