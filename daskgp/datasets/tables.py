"""Tables read on the workers: Parquet files, folders and globs, zarr arrays and groups, and CSV globs, as
dask arrays (issue 34, item 1).

The client reads metadata only — each Parquet file's footer (schema and row count), each CSV file's header
line, the zarr arrays' headers — checks it, and builds the graph. Every row is read where its chunk is
computed: on a cluster's workers when a ``dask.distributed`` client is the default scheduler (with no client,
dask's threads in this process). One row chunk per Parquet or CSV file, zarr's own row chunks for zarr, so
that an error found in the values names the file (or the zarr rows) it is in.

What a table is: one numeric target column and numeric feature columns (by default every column but the
target), the same columns with the same types in every file. ``read_table`` refuses, in one line each: a
path or glob matching nothing, a target or feature column that is not there, files whose columns or types
differ from the first file's, non-numeric feature or target columns, a column name repeated in a file's
header, a zarr ``columns`` / ``feature_names`` attribute whose length is not the array's width (issue 56).
Non-finite values are found by
:meth:`Table.check_finite`, one pass over the rows on the workers that names the file holding them.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core.validation import DataError, check_finite_chunks

if TYPE_CHECKING:
    import dask.array as da

__all__ = ["Table", "read_table", "is_table_path", "counts_rows_by_reading"]

PARQUET_SUFFIXES = (".parquet", ".pq")
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Table:
    """Rows that stay where they are read. ``X`` (n, d) and ``y`` (n,): float64 dask arrays with known chunk
    sizes, one row chunk per file (Parquet, CSV) or per zarr row chunk; ``chunk_names`` names each chunk for
    errors; ``kind``: 'parquet' | 'csv' | 'zarr'; ``source``: the path or glob as given."""

    name: str
    X: da.Array
    y: da.Array
    feature_names: tuple[str, ...]
    target_name: str
    kind: str
    source: str
    chunk_names: tuple[str, ...]

    @property
    def n(self) -> int:
        """Rows, known from metadata (no row was read to count them, except for CSV files)."""
        return int(self.X.shape[0])

    def check_finite(self) -> Table:
        """One pass over the rows where they are (each chunk's count of NaN and ±inf in X and y); returns
        the table, or raises ValueError naming the first chunk (file) that holds a non-finite value."""
        check_finite_chunks(self.X, self.y, self.chunk_names, self.feature_names + (self.target_name,))
        return self


def is_table_path(text: str) -> bool:
    """Whether ``text`` names a table for :func:`read_table` rather than a built-in data set or a single CSV:
    a glob, a Parquet file, a zarr store, or a folder."""
    s = str(text).rstrip("/")
    return (bool(_GLOB_CHARS & set(s)) or s.endswith(PARQUET_SUFFIXES) or s.endswith(".zarr")
            or os.path.isdir(s))


def counts_rows_by_reading(path) -> bool:
    """Whether :func:`read_table` must read the rows of ``path`` to count them (CSV files: no footer says
    how many), so that a caller reads it where rows should be read, on a cluster's workers."""
    path = os.fspath(path)
    if _is_zarr(path) and not (_GLOB_CHARS & set(path)):
        return False
    try:
        return any(f.endswith(".csv") for f in _matches(path))
    except FileNotFoundError:
        return False  # read_table says so, in one line


def _matches(path: str) -> list[str]:
    """The files of a glob (sorted), or the data files under a folder, or the file itself."""
    if _GLOB_CHARS & set(path):
        files = sorted(f for f in glob.glob(path, recursive=True) if os.path.isfile(f))
        if not files:
            raise FileNotFoundError(f"no file matches {path}")
        return files
    p = Path(path)
    if p.is_dir():
        files = sorted(str(f) for f in p.rglob("*")
                       if f.is_file() and f.suffix in PARQUET_SUFFIXES + (".csv",))
        if not files:
            raise FileNotFoundError(f"{path} is a folder with no .parquet or .csv file in it")
        return files
    if not p.exists():
        raise FileNotFoundError(f"{path} does not exist")
    return [str(p)]


def _is_zarr(path: str) -> bool:
    p = Path(path.rstrip("/"))
    return p.suffix == ".zarr" or (p.is_dir() and any((p / m).exists() for m in ("zarr.json", ".zarray",
                                                                                  ".zgroup")))


def read_table(path, target: str | int | None = None, features=None, name: str | None = None) -> Table:
    """A :class:`Table` from ``path``: a Parquet file, a folder of Parquet files (searched recursively, as
    ``dd.read_parquet`` reads a dataset folder), a glob of Parquet or CSV files, a zarr array (n, c) or a zarr
    group (an 'X' (n, d) and 'y' (n,) array pair, or one 1-D array per column).

    target : the target column's name (an int index for a zarr array); default the last column (a zarr group
        of columns needs it named). features : the feature columns (names, or a comma-separated string);
        default every other column. name : the data set's name in messages and results (default: the path's
        stem). Raises FileNotFoundError or ValueError, one line each, before any row is read. A CSV glob's
        rows are counted where dask computes (the workers of the default client): no footer holds the count.
    """
    path = os.fspath(path)
    if isinstance(features, str):
        features = [f.strip() for f in features.split(",") if f.strip()]
    label = name or Path(path.rstrip("/").split("*")[0] or "table").stem or "table"
    if _is_zarr(path) and not (_GLOB_CHARS & set(path)):
        return _read_zarr(path, target, features, label)
    files = _matches(path)
    kinds = {"parquet" if f.endswith(PARQUET_SUFFIXES) else "csv" if f.endswith(".csv") else "other"
             for f in files}
    if kinds == {"parquet"}:
        return _read_files(path, files, "parquet", target, features, label)
    if kinds == {"csv"}:
        return _read_files(path, files, "csv", target, features, label)
    raise ValueError(f"{path} matches {'files of several kinds' if len(kinds) > 1 else 'no .parquet or .csv '
                     'file'} ({', '.join(sorted(kinds))}): give Parquet files or CSV files")


# --- Parquet and CSV: one chunk per file ------------------------------------------------------------------
def _schema(f: str, kind: str) -> tuple[dict[str, str], int | None]:
    """(column name → type, rows) from the file's metadata, read once: a Parquet footer (its row count too),
    or a CSV header line ('?' types: a CSV's types are known only from its values, checked where they are
    read; rows None: counted where the file is read)."""
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(f)
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError; it names no file
            raise ValueError(f"{f}: not a readable Parquet file ({_first_line(e)})") from None
        s = meta.schema.to_arrow_schema()
        names = [n for n in s.names if not n.startswith("__index_level_")]
        _refuse_duplicates(f, names)  # before s.field(n), which raises KeyError on a repeated name
        return {n: str(s.field(n).type) for n in names}, meta.num_rows
    import csv

    import pandas as pd

    try:
        with open(f, newline="", encoding="utf-8") as fh:  # the header as written: pandas renames a
            header = next(csv.reader(fh), [])  # repeated name to 'name.1'
    except UnicodeDecodeError as e:
        raise ValueError(_not_utf8(f, e)) from None
    if not header:
        raise ValueError(f"{f} is empty (no header line): every CSV file of a table needs its header")
    _refuse_duplicates(f, header)
    return {str(c): "?" for c in pd.read_csv(f, nrows=0).columns}, None


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _not_utf8(f: str, e: UnicodeDecodeError) -> str:
    return f"{f}: not UTF-8 text ({e.reason}): daskgp reads CSV files as UTF-8"


def _numeric_type(t: str) -> bool:
    return t == "?" or t.startswith(("int", "uint", "float", "double", "halffloat", "bool", "decimal"))


def _columns(source: str, schema: dict[str, str], target, features) -> tuple[list[str], str]:
    cols = list(schema)
    if target is None:
        target = cols[-1]
    elif isinstance(target, int) and not isinstance(target, bool):
        if not -len(cols) <= target < len(cols):
            raise ValueError(f"{source}: target index {target} is out of range for {len(cols)} columns")
        target = cols[target]
    if target not in schema:
        raise ValueError(f"{source}: no target column {target!r}; its columns: {', '.join(cols)}")
    feats = [c for c in cols if c != target] if features is None else list(features)
    missing = [c for c in feats if c not in schema]
    if missing:
        raise ValueError(f"{source}: no column {', '.join(map(repr, missing))}; "
                         f"its columns: {', '.join(cols)}")
    if not feats:
        raise ValueError(f"{source}: no feature column besides the target {target!r}")
    if target in feats:
        raise ValueError(f"{source}: the target {target!r} is also given as a feature")
    bad = [f"{c} ({schema[c]})" for c in feats + [target] if not _numeric_type(schema[c])]
    if bad:
        raise ValueError(f"{source}: non-numeric column(s) {', '.join(bad)}: daskgp needs numbers")
    return feats, target


def _read_files(source: str, files: list[str], kind: str, target, features, label: str) -> Table:
    import dask
    import dask.array as da

    footers = [_schema(f, kind) for f in files]
    first = footers[0][0]
    for f, (s, _) in zip(files[1:], footers[1:], strict=True):
        if s != first:
            diff = sorted(set(s.items()) ^ set(first.items()))
            what = ", ".join(f"{c}: {t}" for c, t in diff)
            raise ValueError(f"{f} has other columns than {files[0]} ({what}): every file of {source} needs "
                             "the same columns and types")
    feats, target = _columns(source, first, target, features)
    cols = feats + [target]
    read = _read_parquet_file if kind == "parquet" else _read_csv_file
    if kind == "parquet":
        rows = [r for _, r in footers]  # from the footers: no row is read
    else:  # a CSV's row count is known only by reading it: counted where the file is read
        # and checked on the way, before any fit: ragged lines, text, non-numeric values by row and column
        rows = list(dask.compute(*[dask.delayed(_count_csv_rows)(f, cols) for f in files]))
    # pure tasks named by the file, its size and modification time and the columns: the same table gives the
    # same graph in any process (a fit's checkpoint is tied to its data by that token), a changed file another
    blocks = [da.from_delayed(dask.delayed(read, pure=True)(f, cols, _stamp(f)), shape=(r, len(cols)),
                              dtype=np.float64)
              for f, r in zip(files, rows, strict=True) if r > 0]
    if not blocks:
        raise ValueError(f"{source}: every file is empty")
    A = da.concatenate(blocks, axis=0)
    names = tuple(f for f, r in zip(files, rows, strict=True) if r > 0)
    return Table(label, A[:, :-1], A[:, -1], tuple(feats), target, kind, source, names)


def _stamp(f: str) -> tuple[int, int]:
    st = os.stat(f)
    return st.st_size, st.st_mtime_ns


def _read_parquet_file(f: str, cols: list[str], stamp=None) -> np.ndarray:
    import pyarrow.parquet as pq

    t = pq.read_table(f, columns=cols)
    return np.column_stack([t.column(c).to_numpy(zero_copy_only=False).astype(np.float64) for c in cols]) \
        if t.num_rows else np.empty((0, len(cols)))


def _count_csv_rows(f: str, cols: list[str] | None = None) -> int:
    """The data rows of CSV file ``f``, read where the file is (a worker), in chunks; with ``cols``, each
    chunk is checked as :func:`_read_csv_file` checks the whole file, so that a table's bad CSV values are
    found when its rows are counted — before any fit — and named by file, row and column."""
    rows = 0
    for chunk in _csv_chunks(f, chunksize=1 << 18):
        if cols is not None:
            _check_numeric(f, chunk, cols, rows)
        rows += len(chunk)
    return rows


def _csv_chunks(f: str, **kw):
    """pandas' reader over every column of ``f``: a line with more fields than the header is an error (with
    ``usecols`` pandas drops the extra fields silently, shifting nothing but losing a value), a shorter one
    reads NaN (found by the finite check, by row); errors name the file and its line."""
    import re

    import pandas as pd

    try:
        yield from (pd.read_csv(f, index_col=False, **kw) if "chunksize" in kw
                    else [pd.read_csv(f, index_col=False, **kw)])
    except pd.errors.ParserError as e:
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(e))
        what = (f"line {int(m[2]):,} has {m[3]} fields where its header has {m[1]}" if m
                else f"not a well-formed CSV file ({_first_line(e)})")
        raise DataError(f"{f}: {what}") from None
    except UnicodeDecodeError as e:
        raise DataError(_not_utf8(f, e)) from None


def _check_numeric(f: str, df, cols: list[str], start: int) -> None:
    """DataError naming the first value of ``cols`` that is not a number: its file, row (from 0, counting
    from ``start``, the rows before this chunk) and column."""
    import pandas as pd

    for c in cols:
        if len(df) and not pd.api.types.is_numeric_dtype(df[c]):  # a header alone reads as text columns
            bad = pd.to_numeric(df[c], errors="coerce").isna().to_numpy() & df[c].notna().to_numpy()
            if not bad.any():  # text that reads as numbers (e.g. every value empty but one '1e3 ')
                continue
            i = int(np.argmax(bad))
            raise DataError(f"{f}, its row {start + i:,}, column {c}: the value {str(df[c].iloc[i])[:40]!r} "
                            "is not a number (rows counted from 0): daskgp needs numbers")


def _read_csv_file(f: str, cols: list[str], stamp=None) -> np.ndarray:
    import pandas as pd

    df = next(_csv_chunks(f))
    _check_numeric(f, df, cols, 0)  # a CSV's types are known only where its values are read
    return df[cols].apply(pd.to_numeric).to_numpy(np.float64) if len(df) else np.empty((0, len(cols)))


# --- zarr -------------------------------------------------------------------------------------------------
def _names_attr(path: str, node, key: str, width: int, prefix: str) -> list[str]:
    """The column names a zarr array or group names in its attribute ``key``, checked against the ``width``
    of the array they name: a list of distinct strings, one per column (a shorter list once shifted the
    target onto another column, silently; a longer one raised an IndexError); ``prefix`` + index without."""
    names = node.attrs.get(key)
    if names is None:
        return [f"{prefix}{j}" for j in range(width)]
    if not isinstance(names, list | tuple) or not all(isinstance(c, str) for c in names):
        raise ValueError(f"{path}: its attribute {key!r} must be a list of column names, got {names!r:.80}")
    if len(names) != width:
        raise ValueError(f"{path}: its attribute {key!r} names {len(names)} columns; the array has {width}")
    _refuse_duplicates(path, names)
    return [str(c) for c in names]


def _refuse_duplicates(source: str, names) -> None:
    seen, dup = set(), []
    for c in names:
        if c in seen and c not in dup:
            dup.append(c)
        seen.add(c)
    if dup:
        raise ValueError(f"{source}: the column name(s) {', '.join(map(repr, dup))} appear more than once; "
                         "name every column once")


def _read_zarr(path: str, target, features, label: str) -> Table:
    import dask.array as da
    import zarr

    try:
        node = zarr.open(path, mode="r")
    except Exception as e:  # zarr raises several types for a store it cannot read
        raise ValueError(f"{path} is not a zarr array or group ({type(e).__name__}: {e})") from None
    if isinstance(node, zarr.Array):
        if node.ndim != 2 or node.shape[1] < 2:
            raise ValueError(f"{path} is a zarr array of shape {node.shape}: a table needs (n, columns ≥ 2)")
        names = _names_attr(path, node, "columns", node.shape[1], "c")
        schema = {c: str(node.dtype) for c in names}
        tcol = names[target] if isinstance(target, int) else target
        feats = None if features is None else [names[f] if isinstance(f, int) else f for f in features]
        feats, tcol = _columns(path, schema, tcol, feats)
        A = da.from_zarr(node)
        X = da.stack([A[:, names.index(c)] for c in feats], axis=1)
        y = A[:, names.index(tcol)]
    else:
        arrays = dict(node.arrays())
        if "X" in arrays and "y" in arrays and target is None and features is None:
            Xa, ya = arrays["X"], arrays["y"]
            if Xa.ndim != 2 or ya.ndim != 1 or Xa.shape[0] != ya.shape[0]:
                raise ValueError(f"{path}: X must be (n, d) and y (n,), got {Xa.shape} and {ya.shape}")
            feats = _names_attr(path, node, "feature_names", Xa.shape[1], "x")
            tcol = str(node.attrs.get("target_name", "y"))
            for nm, a in (("X", Xa), ("y", ya)):
                if not _numeric_type(str(a.dtype)):
                    raise ValueError(f"{path}: non-numeric array {nm} ({a.dtype}): daskgp needs numbers")
            X, y = da.from_zarr(Xa), da.from_zarr(ya)
        else:
            cols = {k: a for k, a in arrays.items() if a.ndim == 1}
            if target is None:
                raise ValueError(f"{path} is a zarr group of columns ({', '.join(cols)}): name the target")
            lengths = {a.shape[0] for a in cols.values()}
            if len(lengths) > 1:
                raise ValueError(f"{path}: its columns have different lengths {sorted(lengths)}")
            feats, tcol = _columns(path, {k: str(a.dtype) for k, a in cols.items()}, target, features)
            y = da.from_zarr(cols[tcol])
            X = da.stack([da.from_zarr(cols[c]).rechunk(y.chunks) for c in feats], axis=1)
    X = X.rechunk({1: -1}).astype(np.float64)
    y = y.rechunk((X.chunks[0],)).astype(np.float64)
    starts = np.cumsum((0,) + X.chunks[0])
    chunk_names = tuple(f"{path} rows {a:,}–{b - 1:,}" for a, b in zip(starts[:-1], starts[1:], strict=True))
    return Table(label, X, y, tuple(feats), tcol, "zarr", path, chunk_names)
