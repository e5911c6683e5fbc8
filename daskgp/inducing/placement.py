"""Where the m inducing inputs Z of every sparse family (SGPR, the GPLVM, ADVGP, sparse GP classification)
start."""

from __future__ import annotations

import numpy as np

from ..core.constraints import ValidatedParams
from ..model.kernels import kernel_name

__all__ = ["SAMPLE_ROWS", "kmeans_centres", "kmeans_inducing", "sample_rows", "InducingEstimator"]


class InducingEstimator(ValidatedParams):
    """The parameter check the estimators with ``n_inducing`` inducing inputs and a ``kernel=`` share
    (SGPR, ADVGP, sparse GP classification): scikit-learn's validation of the constructor, the kernel's
    name, then what depends on the data — no more inducing inputs than the n training rows."""

    def _check_params(self, n: int) -> None:
        self._validate_params()
        kernel_name(self.kernel)
        if self.n_inducing > n:
            raise ValueError(f"n_inducing={self.n_inducing} is more than the {n} training rows")


SAMPLE_ROWS = 20_000  # rows drawn for k-means (and ADVGP's subset start): a sample, wherever the rows are


def sample_rows(seed: int, *arrays, max_rows: int = SAMPLE_ROWS) -> tuple[np.ndarray, ...]:
    """The same at most ``max_rows`` rows, drawn at random without replacement (in row order), of each of
    ``arrays`` (n, …): numpy, or dask arrays, sliced where their chunks are and computed together (each
    chunk read once), so only the sample reaches this process."""
    import dask
    import dask.array as da

    n = len(arrays[0])
    idx = np.sort(np.random.default_rng(seed).choice(n, size=min(n, max_rows), replace=False))
    picked = [a[idx] for a in arrays]
    lazy = [i for i, a in enumerate(picked) if isinstance(a, da.Array)]
    for i, v in zip(lazy, dask.compute(*[picked[i] for i in lazy]), strict=True):
        picked[i] = v
    return tuple(np.asarray(a) for a in picked)


def kmeans_centres(sample, m: int, seed: int = 0) -> np.ndarray:
    """Z (m, q): k-means centres (scikit-learn, one start) of the rows ``sample`` (b, q)."""
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=m, n_init=1, random_state=seed).fit(sample).cluster_centers_


def kmeans_inducing(X, m: int, seed: int = 0, max_rows: int = SAMPLE_ROWS) -> np.ndarray:
    """Z (m, q): k-means centres (scikit-learn) of at most ``max_rows`` rows of X (n, q) drawn at random
    (:func:`sample_rows`)."""
    return kmeans_centres(sample_rows(seed, X, max_rows=max_rows)[0], m, seed)
