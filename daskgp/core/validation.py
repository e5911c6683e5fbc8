"""Checks at the public boundary: clear errors instead of silent NaNs."""

from __future__ import annotations

import numpy as np


def check_X(X, name: str = "X", min_rows: int = 2) -> np.ndarray:
    """(n, d) float64 C-ordered array with finite entries and at least ``min_rows`` rows. C order always: BLAS
    rounds differently on a Fortran-ordered copy of the same numbers, and a run resumed from its stored data
    must compute exactly what it computed from the data it started with."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, d), got shape {X.shape}")
    if X.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows, got {X.shape[0]}")
    if X.shape[1] < 1:
        raise ValueError(f"{name} has no columns")
    _check_finite(X, name)
    return np.ascontiguousarray(X)


def check_y(y, n: int, name: str = "y") -> np.ndarray:
    """(n,) float64 target vector matching ``n`` rows of X."""
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n,), got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} rows but X has {n}")
    _check_finite(y, name)
    return y


def check_rhs(V, n: int, name: str = "V") -> tuple[np.ndarray, bool]:
    """(n, k) right-hand sides; returns (V2d, was_1d)."""
    V = np.asarray(V)
    was_1d = V.ndim == 1
    if was_1d:
        V = V[:, None]
    if V.ndim != 2 or V.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k), got {V.shape}")
    _check_finite(V, name)
    return V, was_1d


def check_int(name: str, value, low: int = 1) -> int:
    """An integer parameter ≥ ``low``: Python or numpy integers only (2.7 or True is refused, not rounded)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def check_positive(name: str, value) -> float:
    v = float(value)
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return v


def _check_finite(a: np.ndarray, name: str) -> None:
    if not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))
        raise ValueError(f"{name} contains {len(bad)} non-finite value(s) (NaN or inf), first at index "
                         f"{tuple(int(i) for i in bad[0])}")
