"""Checks at the public boundary: clear errors instead of silent NaNs.

The estimators validate with scikit-learn's own ``validate_data`` (:func:`fit_data`, :func:`new_data`), so
they keep its contract: ``n_features_in_``, ``feature_names_in_`` from DataFrames, its messages for 1-D,
complex, sparse and empty input. The array functions below it (:func:`check_X`, ...) serve the function API.
"""

from __future__ import annotations

import numpy as np


def check_X(X, name: str = "X", min_rows: int = 2) -> np.ndarray:
    """(n, d) float64 C-ordered array with finite entries and at least ``min_rows`` rows. C order always: BLAS
    rounds differently on a Fortran-ordered copy of the same numbers, and a run resumed from its stored data
    must compute exactly what it computed from the data it started with."""
    _check_real(X, name)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    check_2d_shape(X.shape, name, min_rows)
    _check_finite(X, name)
    return np.ascontiguousarray(X)


def check_2d_shape(shape, name: str = "X", min_rows: int = 2) -> None:
    """ValueError unless ``shape`` is (n, d) with n ≥ ``min_rows`` and d ≥ 1 (for arrays of any namespace)."""
    shape = tuple(shape)
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D (n, d), got shape {shape}")
    if shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows, got {shape[0]}")
    if shape[1] < 1:
        raise ValueError(f"{name} has no columns")


def check_y(y, n: int, name: str = "y") -> np.ndarray:
    """(n,) float64 target vector matching ``n`` rows of X."""
    _check_real(y, name)
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


def fit_data(est, X, y="no_validation", *, min_rows: int = 2, allow_nan: bool = False,
             y_numeric: bool = True):
    """Validate training data with scikit-learn's ``validate_data`` (resets ``n_features_in_`` and
    ``feature_names_in_``): X → (n, d) float64, C order (see :func:`check_X`), ≥ ``min_rows`` rows, finite;
    y → (n,) numeric (float64) unless ``y_numeric`` is False (class labels). Returns X, or (X, y) when y is
    given."""
    from sklearn.utils.validation import validate_data

    kw = dict(dtype=np.float64, order="C", ensure_min_samples=min_rows,
              ensure_all_finite="allow-nan" if allow_nan else True)
    if isinstance(y, str) and y == "no_validation":
        return validate_data(est, X, reset=True, **kw)
    X, y = validate_data(est, X, y, reset=True, y_numeric=y_numeric, **kw)
    return X, (np.asarray(y, dtype=np.float64) if y_numeric else y)


def fit_data_or_dask(est, X, y, *, min_rows: int = 2):
    """Training data for an estimator that also fits from dask arrays: numpy or DataFrames through
    :func:`fit_data`; a dask X or y (the other converted) checked here on shapes and chunk sizes (known, see
    :func:`check_known_chunks`) and for finiteness in one pass on the workers (:func:`check_finite_chunks`),
    never gathered. Returns (X, y): numpy float64, or float64 dask arrays."""
    import dask.array as da

    if not (isinstance(X, da.Array) or isinstance(y, da.Array)):
        return fit_data(est, X, y, min_rows=min_rows)
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_
    X = X if isinstance(X, da.Array) else da.from_array(check_X(X))
    y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y, float))
    check_known_chunks(X, "X")
    check_known_chunks(y, "y")
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(f"X must be (n, d) and y (n,) with the same n, got {X.shape} and {y.shape}")
    if X.shape[0] < min_rows:
        raise ValueError(f"X needs at least {min_rows} rows, got {X.shape[0]}")
    check_finite_chunks(X, y)  # on the workers; the error names the row chunk
    est.n_features_in_ = X.shape[1]
    return X.astype(float), y.astype(float)


def rows_or_dask(est, Y, *, min_rows: int = 2):
    """Training rows without a target (an unsupervised fit): numpy or DataFrames through :func:`fit_data`; a
    dask Y (n, p) checked here on its shape and chunk sizes and for finiteness in one pass on the workers
    (:func:`check_finite_chunks`), never gathered. Returns numpy float64 or a float64 dask array."""
    import dask.array as da

    if not isinstance(Y, da.Array):
        return fit_data(est, Y, min_rows=min_rows)
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_
    check_known_chunks(Y, "Y")
    if Y.ndim != 2:
        raise ValueError(f"Y must be (n, p), got shape {Y.shape}")
    if Y.shape[0] < min_rows:
        raise ValueError(f"Y needs at least {min_rows} rows, got {Y.shape[0]}")
    check_finite_chunks(Y)  # on the workers; the error names the row chunk
    est.n_features_in_ = Y.shape[1]
    return Y.astype(float)


def column_moments(Y) -> tuple[np.ndarray, np.ndarray, float]:
    """(column means (p,), column sds (p,), the sd of all n·p entries about their common mean) of Y (n, p),
    numpy or dask (one pass over its chunks where they are), from the same shifted long-double sums as
    :func:`standardising_moments`, so that they do not depend on how the rows are chunked."""
    import dask.array as da

    if isinstance(Y, da.Array):
        import dask

        Yd = Y.rechunk({1: -1})
        shift = np.asarray(dask.compute(Yd[0])[0], dtype=np.float64)
        parts = dask.compute(*[dask.delayed(_chunk_sums)(yb, None, shift, 0.0)
                               for yb in Yd.to_delayed().ravel()])
    else:
        shift = np.asarray(Y[0], dtype=np.float64)
        parts = [_chunk_sums(Y, None, shift, 0.0)]
    n = sum(p[0] for p in parts)
    s1, s2 = sum(p[1] for p in parts), sum(p[2] for p in parts)
    mean, sd = _mean_sd(n, s1, s2, shift)
    with np.errstate(over="ignore", invalid="ignore"):
        # all entries about their common mean M: Σ_j [s2_j + 2 (shift_j − M) s1_j + n (shift_j − M)²] / (n p)
        d = shift.astype(np.longdouble) - (shift.astype(np.longdouble) * n + s1).sum() / (n * len(shift))
        var = (s2 + 2 * d * s1 + n * d * d).sum() / (n * len(shift))
        overall = float(np.sqrt(np.maximum(var, 0)))
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(sd)) and np.isfinite(overall)):
        raise ValueError("Y's values are too large to standardise (squares overflow float64): rescale Y")
    return np.asarray(mean), sd, overall


def new_data(est, X, *, allow_nan: bool = False) -> np.ndarray:
    """Validate data for a fitted estimator (predict, transform): the features it was fitted with (number and,
    for DataFrames, names), float64, C order, finite (or NaN where ``allow_nan``), at least one row."""
    from sklearn.utils.validation import validate_data

    return validate_data(est, X, reset=False, dtype=np.float64, order="C",
                         ensure_all_finite="allow-nan" if allow_nan else True)


def seed_from(random_state) -> int:
    """scikit-learn's ``random_state`` → a non-negative int seed for numpy's Generator: an int is used as it
    is, None or a ``RandomState`` draws one (not reproducible unless the RandomState is seeded)."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, (bool, np.bool_)):
        if random_state < 0:
            raise ValueError(f"random_state must be >= 0, None or a RandomState, got {random_state}")
        return int(random_state)
    from sklearn.utils import check_random_state

    try:
        return int(check_random_state(random_state).randint(0, 2**31 - 1))
    except ValueError:
        raise ValueError(f"random_state must be an int >= 0, None or a RandomState, "
                         f"got {random_state!r}") from None


def is_constant(sd, mean) -> np.ndarray:
    """Elementwise: is a column with this sd and mean constant (sd zero, or below 1e-12 of the mean: the
    rounding of the mean of equal numbers)?"""
    sd, mean = np.asarray(sd, float), np.asarray(mean, float)
    return (sd == 0) | (sd <= 1e-12 * np.abs(mean))


def check_not_degenerate(x_sd, y_sd, name: str = "the data", x_mean=0.0, y_mean=0.0) -> None:
    """Refuse data a GP cannot learn from, before any cluster work: every row the same input point (every
    column's sd ``x_sd`` (d,) zero) or a constant target (``y_sd`` zero). Zero means below 1e-12 of the
    column's mean too, the rounding of a mean of equal numbers. Takes moments, so dask arrays need only
    theirs."""
    if np.all(is_constant(x_sd, x_mean)):
        raise ValueError(f"every row of {name} is the same input point: a GP has no lengthscale to learn "
                         "(check the feature columns)")
    if is_constant(y_sd, y_mean):
        raise ValueError(f"the target of {name} is constant: there is nothing to model (check the target "
                         "column)")


def standardising_moments(X, y) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(x mean (d,), x scale (d,), y mean, y scale) to standardise X (n, d) and y (n,) (numpy, or dask arrays:
    one pass over their chunks where they are), after refusing degenerate data (:func:`check_not_degenerate`).
    A constant column gets scale 1: it is only centred.

    The sums are shifted by the first row and kept in extended precision (``np.longdouble``), so that the
    moments do not depend on how the rows are chunked: a fit from a Parquet folder and from the same rows in
    one numpy array standardise identically (float64 sums in another order differ in the last bits, which a
    fit's optimiser then amplifies). On a platform whose long double is a double they agree to round-off."""
    import dask.array as da

    lazy = isinstance(X, da.Array) or isinstance(y, da.Array)
    if lazy:
        import dask

        Xd = (X if isinstance(X, da.Array) else da.from_array(X)).rechunk({1: -1})
        yd = (y if isinstance(y, da.Array) else da.from_array(y)).rechunk((Xd.chunks[0],))
        shift_x, shift_y = (np.asarray(v, dtype=np.float64) for v in dask.compute(Xd[0], yd[0]))
        parts = dask.compute(*[dask.delayed(_chunk_sums)(xb, yb, shift_x, shift_y) for xb, yb in
                               zip(Xd.to_delayed().ravel(), yd.to_delayed().ravel(), strict=True)])
    else:
        shift_x, shift_y = np.asarray(X[0], dtype=np.float64), np.float64(y[0])
        parts = [_chunk_sums(X, y, shift_x, shift_y)]
    n = sum(p[0] for p in parts)
    mx, sx = _mean_sd(n, sum(p[1] for p in parts), sum(p[2] for p in parts), shift_x)
    my, sy = _mean_sd(n, sum(p[3] for p in parts), sum(p[4] for p in parts), shift_y)
    if not (np.all(np.isfinite(mx)) and np.all(np.isfinite(sx))):  # finite values whose squares overflow
        raise ValueError("X's values are too large to standardise (squares overflow float64): rescale X")
    if not (np.isfinite(my) and np.isfinite(sy)):
        raise ValueError("y's values are too large to standardise (squares overflow float64): rescale y")
    check_not_degenerate(sx, sy, "X, y", mx, my)
    sx = np.where(is_constant(sx, mx), 1.0, sx)
    return np.asarray(mx), sx, float(my), float(sy)


_MOMENT_ROWS = 1 << 16  # rows converted to long double at a time: bounded memory whatever the chunk


def _chunk_sums(xb, yb, shift_x, shift_y) -> tuple:
    """(rows, Σ(x − shift), Σ(x − shift)², the same two for y) over one chunk, in long double; y's sums are
    zero when ``yb`` is None."""
    xb = np.asarray(xb)
    yb = np.zeros(xb.shape[0]) if yb is None else np.asarray(yb)
    acc = [np.zeros(xb.shape[1:], np.longdouble), np.zeros(xb.shape[1:], np.longdouble),
           np.longdouble(0), np.longdouble(0)]
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(0, xb.shape[0], _MOMENT_ROWS):
            zx = xb[i:i + _MOMENT_ROWS].astype(np.longdouble) - shift_x
            zy = yb[i:i + _MOMENT_ROWS].astype(np.longdouble) - shift_y
            acc[0] += zx.sum(0)
            acc[1] += (zx * zx).sum(0)
            acc[2] += zy.sum()
            acc[3] += (zy * zy).sum()
    return (xb.shape[0], *acc)


def _mean_sd(n: int, s1, s2, shift):
    """Mean and (population) sd, rounded to float64, from shifted long-double sums."""
    with np.errstate(over="ignore", invalid="ignore"):
        m = s1 / n
        var = np.maximum(s2 / n - m * m, 0)
        return (np.asarray(shift + m, dtype=np.float64), np.asarray(np.sqrt(var), dtype=np.float64))


def check_known_chunks(a, name: str) -> None:
    """A dask array's chunk sizes must be known (a dask DataFrame's ``.values`` does not know them)."""
    if any(np.isnan(c) for dim in a.chunks for c in dim):
        raise ValueError(f"{name} has unknown chunk sizes (a dask DataFrame's .values or to_dask_array()): "
                         f"use to_dask_array(lengths=True) or {name}.compute_chunk_sizes() first")


class DataError(ValueError):
    """Bad values found where the data are read (often on a worker): the message names the file or chunk.
    The CLI's local workers do not log these as failed tasks
    (:func:`daskgp.compute.cluster.quiet_data_errors`): the command's one line says it."""


class NonFiniteError(DataError):
    """A NaN or ±inf in the data, named by where it is (a file or a row chunk, its row and column)."""


def check_finite_chunks(X, y=None, names=None, columns=None) -> None:
    """One pass over dask arrays X (n, d) and y (n,) (or X alone: y None, e.g. class labels) where their
    chunks are (each row chunk's count of NaN and ±inf and its first, computed on the workers);
    :class:`NonFiniteError` naming the first row chunk that holds one — ``names[i]`` for chunk i (a file),
    else its rows — and the row within it (from 0) and the column (with its name from ``columns``, X's
    column names then y's, when given)."""
    import dask
    import dask.array as da

    X = X.rechunk({1: -1})
    y = da.zeros(X.shape[0], chunks=(X.chunks[0],)) if y is None else y.rechunk((X.chunks[0],))
    counts = dask.compute(*[dask.delayed(_nonfinite)(xb, yb) for xb, yb in
                            zip(X.to_delayed().ravel(), y.to_delayed().ravel(), strict=True)])
    starts = np.cumsum((0,) + tuple(X.chunks[0]))
    for i, (bad_x, bad_y, row, col) in enumerate(counts):
        if bad_x or bad_y:
            where = " and ".join(w for w, k in (("X", bad_x), ("y", bad_y)) if k)
            rows = f"rows {starts[i]:,}–{starts[i + 1] - 1:,}"
            chunk = (f"{names[i]}, its row {row:,}" if names is not None
                     else f"row chunk {i} ({rows}), row {starts[i] + row:,}")
            first = f"X column {col}" if col >= 0 else "y"
            if columns is not None and len(columns) > (col if col >= 0 else len(columns) - 1):
                first += f" ({columns[col if col >= 0 else -1]})"
            raise NonFiniteError(f"{chunk}, {first}: {bad_x + bad_y} non-finite value(s) (NaN or inf) in "
                                 f"{where} (rows counted from 0)")


def _nonfinite(xb: np.ndarray, yb: np.ndarray) -> tuple[int, int, int, int]:
    """(NaN/inf in xb, in yb, the first such row, its X column or −1 for y); (0, 0, −1, −1) when none."""
    fx, fy = np.isfinite(xb), np.isfinite(yb)
    bad_x, bad_y = int(np.size(xb) - np.count_nonzero(fx)), int(np.size(yb) - np.count_nonzero(fy))
    if not (bad_x or bad_y):
        return 0, 0, -1, -1
    rows_x = np.flatnonzero(~fx.all(axis=1)) if bad_x else np.array([], int)
    rows_y = np.flatnonzero(~fy) if bad_y else np.array([], int)
    rx, ry = (int(rows_x[0]) if rows_x.size else np.inf), (int(rows_y[0]) if rows_y.size else np.inf)
    if rx <= ry:
        return bad_x, bad_y, int(rx), int(np.flatnonzero(~fx[int(rx)])[0])
    return bad_x, bad_y, int(ry), -1


def _check_real(a, name: str) -> None:
    if np.iscomplexobj(a):  # np.asarray(·, float64) would drop the imaginary parts with only a warning
        raise ValueError(f"{name} is complex; real numbers are needed")


def _check_finite(a: np.ndarray, name: str) -> None:
    if not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))
        raise ValueError(f"{name} contains {len(bad)} non-finite value(s) (NaN or inf), first at index "
                         f"{tuple(int(i) for i in bad[0])}")
