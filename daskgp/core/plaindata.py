"""Plain data for checkpoints: nested dicts, lists, numbers, strings and numeric arrays as JSON.

Arrays become ``{"__ndarray__": base64, "dtype": ..., "shape": [...]}`` with the dtype from a fixed list of
numeric types, and non-finite floats ``{"__float__": "nan" | "inf" | "-inf"}``, so the documents are strict
JSON. Decoding accepts exactly what encoding writes and nothing else: no object arrays, no classes, no code,
which is what lets a user open a results file that came from somewhere else.

The ``expect_*`` helpers check one decoded field against what a typed state's ``from_dict`` needs, so a
state read back from a file is checked where it is rebuilt (each raises ValueError naming the field).
"""

from __future__ import annotations

import base64
import math

import numpy as np

__all__ = ["encode", "decode", "expect_keys", "expect_array", "expect_number", "expect_int"]

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


def expect_keys(d, keys, what: str) -> dict:
    """``d`` must be a dict with exactly the keys ``keys``."""
    if not isinstance(d, dict) or set(d) != set(keys):
        found = sorted(d) if isinstance(d, dict) else type(d).__name__
        raise ValueError(f"{what}: expected fields {sorted(keys)}, found {found}")
    return d


def expect_array(v, shape: tuple, name: str, kind: str = "f", optional: bool = False,
                 finite: bool = True) -> np.ndarray | None:
    """A numpy array of ``shape`` and dtype kind ``kind`` ('f' floats, all finite unless not ``finite``;
    'b' booleans), copied so the caller owns it; None passes when ``optional``."""
    if v is None and optional:
        return None
    if not (isinstance(v, np.ndarray) and v.dtype.kind == kind and v.shape == tuple(shape)):
        got = f"{v.dtype} array of shape {v.shape}" if isinstance(v, np.ndarray) else type(v).__name__
        raise ValueError(f"{name} must be a {'float' if kind == 'f' else 'bool'} array of shape "
                         f"{tuple(shape)}, got {got}")
    if kind == "f" and finite and not np.all(np.isfinite(v)):
        raise ValueError(f"{name} has non-finite entries")
    return v.copy()


def expect_number(v, name: str, positive: bool = False, optional: bool = False) -> float | None:
    """A finite real (not a bool), > 0 when ``positive``; None passes when ``optional``."""
    if v is None and optional:
        return None
    if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and (not positive or v > 0)):
        raise ValueError(f"{name} must be a finite{' positive' if positive else ''} number, got {v!r}")
    return float(v)


def expect_int(v, name: str, low: int = 0, high: int | None = None) -> int:
    """An int (not a bool) in [low, high]."""
    if not (type(v) is int and v >= low and (high is None or v <= high)):
        raise ValueError(f"{name} must be an integer in [{low}, {high if high is not None else '∞'}], "
                         f"got {v!r}")
    return v
