"""``ADVGPRegressor``: asynchronous distributed variational GP regression (Peng, Zhe & Qi 2017) as a
scikit-learn regressor on a Dask cluster.

``fit(X, y)`` standardises X and y, places the rows as partitions on the workers, starts Z at k-means
centres and q(w) at its closed-form optimum for the initial kernel (one synchronous map-reduce of the
statistics), then runs the parameter server (:class:`daskgp.advgp.server.ParameterServer`) for
``max_iter`` updates with staleness bound ``tau``. ``predict`` gives the mean φ(x*)ᵀμ and the variance
φᵀΣφ + k** − φᵀφ (+ 1/β for y), chunk-wise for dask arrays.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..core.inducing import kmeans_inducing
from ..core.validation import check_int, check_not_degenerate, fit_data, is_constant, new_data, seed_from
from ..sparse.bound import rbf_ard
from ..sparse.chunks import ChunkedRows
from .model import FEATURE_MAPS, ADVGPParams, optimal_q, weight_map
from .server import ParameterServer

__all__ = ["ADVGPRegressor"]


class ADVGPRegressor(RegressorMixin, BaseEstimator):
    """Sparse variational GP regression with an RBF-ARD kernel in ADVGP's weight space, fitted by asynchronous
    delayed proximal gradients on a Dask cluster.

    n_inducing: m; max_iter: server updates; tau: staleness bound (0: synchronous); n_partitions: row
    partitions (default: two per worker); feature_map: 'cholesky' (eq. 11), 'nystrom' (eq. 21) or 'ensemble'
    (eq. 22, with ``groups``); scheduler: a dask-scheduler address (default: this process's client, else a
    local cluster); noise_init: initial noise variance relative to var y; adadelta_eps: ADADELTA's ε (its
    first steps are about √ε per coordinate); random_state: the k-means seed.

    Fitted: ``params_`` (ADVGPParams, standardised units), ``n_iter_`` (updates), ``records_`` (per update:
    version, staleness, objective, seconds), ``objective_`` (nats, standardised y), ``n_features_in_``.
    """

    def __init__(self, n_inducing: int = 100, max_iter: int = 500, tau: int = 8,
                 n_partitions: int | None = None, feature_map: str = "cholesky", groups: int = 1,
                 scheduler: str | None = None, noise_init: float = 0.5, adadelta_eps: float = 1e-6,
                 random_state=0):
        self.n_inducing, self.max_iter, self.tau, self.n_partitions = n_inducing, max_iter, tau, n_partitions
        self.feature_map, self.groups, self.scheduler = feature_map, groups, scheduler
        self.noise_init, self.adadelta_eps, self.random_state = noise_init, adadelta_eps, random_state

    def _check_params(self, n: int) -> None:
        for name in ("n_inducing", "max_iter", "groups"):
            check_int(name, getattr(self, name))
        check_int("tau", self.tau, low=0)
        if self.n_partitions is not None:
            check_int("n_partitions", self.n_partitions)
        if self.n_inducing > n:
            raise ValueError(f"n_inducing={self.n_inducing} is more than the {n} training rows")
        if self.feature_map not in FEATURE_MAPS:
            raise ValueError(f"feature_map must be one of {FEATURE_MAPS}, got {self.feature_map!r}")
        if not 0 < self.noise_init < 10:
            raise ValueError(f"noise_init must be in (0, 10) (relative to var y), got {self.noise_init}")

    def fit(self, X, y, client=None, callback=None, delays=None):
        """Fit on X (n, d), y (n,). ``callback(record)`` after every server update; ``delays``: artificial
        seconds per partition task (the straggler experiment). Returns self."""
        X, y = fit_data(self, X, y)
        n, d = X.shape
        self._check_params(n)
        seed = seed_from(self.random_state)
        mx, sx, my, sy = X.mean(0), X.std(0), float(y.mean()), float(y.std())
        check_not_degenerate(sx, sy, "X, y", mx, my)
        sx = np.where(is_constant(sx, mx), 1.0, sx)
        self.x_mean_, self.x_scale_, self.y_mean_, self.y_scale_ = mx, sx, my, sy
        Xs, ys = (X - mx) / sx, (y - my) / sy
        from ..compute.cluster import borrowed_client

        with borrowed_client(client, self.scheduler) as c:
            r = self.n_partitions or 2 * max(1, len(c.scheduler_info()["workers"]))
            chunks = ChunkedRows.from_arrays(c, ys, max(1, -(-n // r)), X=Xs)
            try:
                m, k = int(self.n_inducing), int(self.n_inducing) // int(self.groups)
                Z = kmeans_inducing(Xs, m, seed)
                p0 = ADVGPParams(Z, 1.0, np.full(d, math.sqrt(d)), 1.0 / self.noise_init, np.zeros(k),
                                 np.eye(k), self.feature_map, int(self.groups))
                p0.mu, p0.U = optimal_q(chunks.stats(p0.kernel), p0)
                server = ParameterServer(chunks, p0, int(self.tau), delays, eps=float(self.adadelta_eps))
                server.run(int(self.max_iter), callback=callback)
            finally:
                chunks.release()
        self.params_, self.records_ = server.current, server.records
        self.n_iter_ = server.version
        self.objective_ = self.records_[-1].objective if self.records_ else math.nan
        self.lost_partitions_ = server.lost
        return self

    def predict(self, X, return_std: bool = False, noise: bool = True):
        """Predictive mean (n,) in y units; with ``return_std`` also the sd (n,) (of y with ``noise``, else of
        f)."""
        check_is_fitted(self, "params_")
        import dask.array as da

        if isinstance(X, da.Array):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(f"X must be (n, {self.n_features_in_}), got {X.shape}")
            out = X.rechunk((X.chunks[0], -1)).map_blocks(self._predict_block, noise, dtype=float,
                                                          chunks=(X.chunks[0], (2,)))
        else:
            X = new_data(self, X)
            out = np.concatenate([self._predict_block(X[a:a + 10_000], noise)
                                  for a in range(0, len(X), 10_000)])
        mean, sd = out[:, 0], out[:, 1]
        return (mean, sd) if return_std else mean

    def _predict_block(self, X, noise: bool = True) -> np.ndarray:
        p = self.params_
        Xs = (np.asarray(X, float) - self.x_mean_) / self.x_scale_
        W, _, _, _ = weight_map(p)
        Phi = rbf_ard(Xs, p.Z, p.variance, p.lengthscales) @ W  # (b, k)
        mean = Phi @ p.mu
        var = np.sum((Phi @ p.U.T) ** 2, axis=1) + p.variance - np.sum(Phi**2, axis=1)
        var = np.maximum(var, 1e-12 * p.variance) + (1.0 / p.beta if noise else 0.0)
        return np.column_stack([mean * self.y_scale_ + self.y_mean_, np.sqrt(var) * self.y_scale_])
