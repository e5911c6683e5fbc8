"""Where the m inducing inputs Z of every sparse family (SGPR, the GPLVM, ADVGP, sparse GP classification)
start."""

from __future__ import annotations

import numpy as np

__all__ = ["kmeans_inducing"]


def kmeans_inducing(X, m: int, seed: int = 0, max_rows: int = 20_000) -> np.ndarray:
    """Z (m, q): k-means centres (scikit-learn) of at most ``max_rows`` rows drawn at random."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    idx = rng.choice(len(X), size=min(len(X), max_rows), replace=False)
    sub = np.asarray(X[np.sort(idx)])
    return KMeans(n_clusters=m, n_init=1, random_state=seed).fit(sub).cluster_centers_
