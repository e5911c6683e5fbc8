"""Where the m inducing inputs Z of every sparse family (SGPR, the GPLVM, ADVGP, sparse GP classification)
start."""

from __future__ import annotations

import numpy as np

from ..core.kernels import kernel_name
from ..core.validation import ValidatedParams

__all__ = ["kmeans_inducing", "InducingEstimator"]


class InducingEstimator(ValidatedParams):
    """The parameter check the estimators with ``n_inducing`` inducing inputs and a ``kernel=`` share
    (SGPR, ADVGP, sparse GP classification): scikit-learn's validation of the constructor, the kernel's
    name, then what depends on the data — no more inducing inputs than the n training rows."""

    def _check_params(self, n: int) -> None:
        self._validate_params()
        kernel_name(self.kernel)
        if self.n_inducing > n:
            raise ValueError(f"n_inducing={self.n_inducing} is more than the {n} training rows")


def kmeans_inducing(X, m: int, seed: int = 0, max_rows: int = 20_000) -> np.ndarray:
    """Z (m, q): k-means centres (scikit-learn) of at most ``max_rows`` rows drawn at random."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    idx = rng.choice(len(X), size=min(len(X), max_rows), replace=False)
    sub = np.asarray(X[np.sort(idx)])
    return KMeans(n_clusters=m, n_init=1, random_state=seed).fit(sub).cluster_centers_
