"""Distributed sparse variational GP regression (Titsias' collapsed bound in the map-reduce form of Gal et
al. 2014) as a scikit-learn regressor.

``SparseGPRegressor(n_inducing=100).fit(X, y)`` standardises X and y, places the row chunks on the Dask
workers, initialises Z by k-means, and maximises the bound over (Z, σ², l, β) with scipy's L-BFGS-B, each
evaluation being two map-reduces over the chunks (:class:`daskgp.sparse.chunks.ChunkedRows`). X and y may be
numpy or dask arrays; dask arrays are read chunk by chunk on the workers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize
import xarray as xr
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..core.inducing import kmeans_inducing
from ..core.validation import check_X, check_y
from .bound import GlobalParams, SuffStats, _kmm, rbf_ard
from .chunks import ChunkedRows

__all__ = ["SparseGPRegressor", "SparsePosterior", "fit_global"]


@dataclass
class SparsePosterior:
    """The optimal q(u) of the collapsed bound, in the standardised units it was fitted in: predictive
    mean k*ᵀ a with a = β P⁻¹ C (m, p), variance σ² − k*ᵀ (K_mm⁻¹ − P⁻¹) k* (+ 1/β for y)."""

    theta: GlobalParams
    a: np.ndarray
    Q: np.ndarray

    @classmethod
    def from_stats(cls, theta: GlobalParams, stats: SuffStats) -> SparsePosterior:
        _, Kmm = _kmm(theta.Z, theta.variance, theta.lengthscales)
        Lk = np.linalg.cholesky(Kmm)
        Lp = np.linalg.cholesky(Kmm + theta.beta * stats.D)
        eye = np.eye(theta.m)
        a = theta.beta * scipy.linalg.cho_solve((Lp, True), stats.C)
        Q = scipy.linalg.cho_solve((Lk, True), eye) - scipy.linalg.cho_solve((Lp, True), eye)
        return cls(theta, a, 0.5 * (Q + Q.T))

    def predict_block(self, X, noise: bool = True):
        """(mean (b, p), var (b,)) at inputs X (b, q) in X's array namespace (numpy, cupy)."""
        from array_api_compat import array_namespace

        xp = array_namespace(X)
        Kxm = rbf_ard(X, xp.asarray(self.theta.Z), self.theta.variance, self.theta.lengthscales)
        mean = Kxm @ xp.asarray(self.a)
        var = self.theta.variance - xp.sum((Kxm @ xp.asarray(self.Q)) * Kxm, axis=1)
        var = xp.clip(var, 1e-12 * self.theta.variance, None)
        return mean, (var + 1.0 / self.theta.beta if noise else var)


def fit_global(chunks: ChunkedRows, theta0: GlobalParams, max_iter: int, tol: float = 1e-9,
               callback=None, fixed_inducing: bool = False,
               on_params=None) -> tuple[GlobalParams, list, dict]:
    """Maximise the bound over the global parameters with L-BFGS-B (unconstrained: Z, log σ², log l,
    log β); ``callback(iteration, F)`` and ``on_params(θ, trace)`` after every iteration. Returns (θ, bound
    trace, info)."""
    m, q = theta0.Z.shape
    n = chunks.n
    v0 = theta0.to_vector()
    free = np.ones(v0.size, bool)
    if fixed_inducing:
        free[:m * q] = False
    info = {"n_evaluations": 0, "seconds_evaluating": 0.0}

    def fun(x):
        v = v0.copy()
        v[free] = x
        t0 = time.perf_counter()
        try:
            F, g, _ = chunks.bound_and_grad(GlobalParams.from_vector(v, m, q))
        except np.linalg.LinAlgError:
            return math.inf, np.zeros_like(x)  # L-BFGS-B backtracks from a non-PD step
        info["n_evaluations"] += 1
        info["seconds_evaluating"] += time.perf_counter() - t0
        return -F / n, -g[free] / n

    trace = []

    def cb(intermediate_result):
        F = -float(intermediate_result.fun) * n
        trace.append(F)
        if on_params is not None:
            v = v0.copy()
            v[free] = intermediate_result.x
            on_params(GlobalParams.from_vector(v, m, q), trace)
        if callback is not None:
            callback(len(trace), F)

    res = scipy.optimize.minimize(fun, v0[free], jac=True, method="L-BFGS-B", callback=cb,
                                  options={"maxiter": int(max_iter), "ftol": tol, "gtol": 1e-7})
    v = v0.copy()
    v[free] = res.x
    info.update(message=str(res.message), n_iterations=int(res.nit), converged=bool(res.success))
    return GlobalParams.from_vector(v, m, q), trace, info


def _validate_xy(X, y, min_rows: int):
    """numpy: checked here; dask: shapes here, finiteness in one pass over the data on the workers."""
    import dask.array as da

    if isinstance(X, da.Array) or isinstance(y, da.Array):
        X = X if isinstance(X, da.Array) else da.from_array(check_X(X))
        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y, float))
        if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
            raise ValueError(f"X must be (n, d) and y (n,) with the same n, got {X.shape} and {y.shape}")
        if X.shape[0] < min_rows:
            raise ValueError(f"X needs at least {min_rows} rows, got {X.shape[0]}")
        ok_x, ok_y = da.compute(da.isfinite(X).all(), da.isfinite(y).all())
        if not (ok_x and ok_y):
            raise ValueError(f"{'X' if not ok_x else 'y'} contains non-finite values (NaN or inf)")
        return X.astype(float), y.astype(float)
    X = check_X(X, "X", min_rows=min_rows)
    return X, check_y(y, X.shape[0])


def _moments(X, y):
    import dask.array as da

    if isinstance(X, da.Array):
        mx, sx, my, sy = da.compute(X.mean(0), X.std(0), y.mean(), y.std())
    else:
        mx, sx, my, sy = X.mean(0), X.std(0), y.mean(), y.std()
    sx = np.where(np.asarray(sx) > 0, sx, 1.0)
    return np.asarray(mx), sx, float(my), float(sy) if sy > 0 else 1.0


class SparseGPRegressor(RegressorMixin, BaseEstimator):
    """Sparse variational GP regression with an RBF-ARD kernel, fitted by maximising Titsias' collapsed
    bound with per-chunk statistics on a Dask cluster.

    n_inducing: m; max_iter: L-BFGS-B iterations; chunk_rows: rows per chunk (task); learn_inducing: also
    optimise Z; scheduler: a dask-scheduler address (default: this process's client, else a local cluster
    for the fit); noise_init: initial noise variance (units of y², relative to var y); seed: k-means seed.

    Fitted attributes: ``params_`` (GlobalParams, standardised units), ``inducing_points_`` (m, d) and
    ``lengthscales_`` (d,) in X units, ``kernel_variance_`` and ``noise_variance_`` in y units², ``bound_``
    (nats, standardised y), ``bound_trace_``, ``fit_info_``.
    """

    def __init__(self, n_inducing: int = 100, max_iter: int = 200, chunk_rows: int = 20_000,
                 learn_inducing: bool = True, scheduler: str | None = None, noise_init: float = 0.5,
                 seed: int = 0, tol: float = 1e-9):
        self.n_inducing, self.max_iter, self.chunk_rows = n_inducing, max_iter, chunk_rows
        self.learn_inducing, self.scheduler, self.noise_init = learn_inducing, scheduler, noise_init
        self.seed, self.tol = seed, tol

    def _check_params(self, n: int) -> None:
        if int(self.n_inducing) < 1:
            raise ValueError(f"n_inducing must be >= 1, got {self.n_inducing}")
        if self.n_inducing > n:
            raise ValueError(f"n_inducing={self.n_inducing} is more than the {n} training rows")
        if int(self.max_iter) < 1 or int(self.chunk_rows) < 1:
            raise ValueError("max_iter and chunk_rows must be >= 1")
        if not 0 < self.noise_init < 10:
            raise ValueError(f"noise_init must be in (0, 10) (relative to var y), got {self.noise_init}")

    def fit(self, X, y, callback=None, client=None, init: GlobalParams | None = None, on_params=None):
        """Fit on X (n, d), y (n,) (numpy or dask). ``callback(iteration, bound)`` after every L-BFGS-B
        iteration; ``client``: a distributed Client to use; ``init``: start from these parameters
        (standardised units, e.g. a checkpoint's) instead of the k-means initialisation; ``on_params(θ,
        trace)``: after every iteration (checkpointing). Returns self."""
        X, y = _validate_xy(X, y, min_rows=2)
        self._check_params(X.shape[0])
        mx, sx, my, sy = _moments(X, y)
        self.x_mean_, self.x_scale_, self.y_mean_, self.y_scale_ = mx, sx, my, sy
        Xs, ys = (X - mx) / sx, (y - my) / sy
        from ..compute.cluster import borrowed_client

        with borrowed_client(client, self.scheduler) as c:
            chunks = ChunkedRows.from_arrays(c, ys, self.chunk_rows, X=Xs)
            try:
                Xsample = Xs if isinstance(Xs, np.ndarray) else _row_sample(Xs, 20_000, self.seed)
                q = Xs.shape[1]
                theta0 = init if init is not None else GlobalParams(
                    kmeans_inducing(Xsample, int(self.n_inducing), self.seed), 1.0, np.full(q, math.sqrt(q)),
                    1.0 / self.noise_init)
                if theta0.Z.shape != (int(self.n_inducing), q):
                    raise ValueError(f"init has Z of shape {theta0.Z.shape}, expected "
                                     f"({self.n_inducing}, {q})")
                t0 = time.perf_counter()
                theta, trace, info = fit_global(chunks, theta0, self.max_iter, self.tol, callback,
                                                fixed_inducing=not self.learn_inducing, on_params=on_params)
                stats = chunks.stats(theta)
                info["seconds"] = time.perf_counter() - t0
            finally:
                chunks.release()
        from .bound import bound_and_grads

        self.params_, self.bound_trace_, self.fit_info_ = theta, trace, info
        self.bound_ = bound_and_grads(stats, theta.Z, theta.variance, theta.lengthscales, theta.beta,
                                      grads=False)
        self.posterior_ = SparsePosterior.from_stats(theta, stats)
        self.n_features_in_ = X.shape[1]
        self.n_train_ = int(X.shape[0])
        self.inducing_points_ = theta.Z * sx + mx
        self.lengthscales_ = theta.lengthscales * sx
        self.kernel_variance_ = theta.variance * sy**2
        self.noise_variance_ = sy**2 / theta.beta
        return self

    def predict(self, X, return_std: bool = False, noise: bool = True):
        """Predictive mean (n,) in y units; with ``return_std`` also the sd (n,) (of y with ``noise``,
        else of f). Dask arrays give dask arrays, computed chunk by chunk on the workers."""
        import dask.array as da

        check_is_fitted(self, "posterior_")
        if isinstance(X, da.Array):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(f"X must be (n, {self.n_features_in_}), got {X.shape}")
            X = X.rechunk((X.chunks[0], -1))
            out = X.map_blocks(self._predict_block, noise, dtype=float, chunks=(X.chunks[0], (2,)))
            mean, sd = out[:, 0], out[:, 1]
        else:
            X = check_X(X, "X", min_rows=1)
            if X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, the model was fitted with "
                                 f"{self.n_features_in_}")
            step = max(1, int(self.chunk_rows))
            out = np.concatenate([self._predict_block(X[a:a + step], noise) for a in range(0, len(X), step)])
            mean, sd = out[:, 0], out[:, 1]
        return (mean, sd) if return_std else mean

    def _predict_block(self, X, noise: bool = True) -> np.ndarray:
        Xs = (np.asarray(X, float) - self.x_mean_) / self.x_scale_
        mean, var = self.posterior_.predict_block(Xs, noise)
        return np.column_stack([mean[:, 0] * self.y_scale_ + self.y_mean_, np.sqrt(var) * self.y_scale_])

    def to_dataset(self) -> xr.Dataset:
        """The fitted model as labelled arrays (for netCDF): inducing points, lengthscales, variances, the
        bound trace; attributes: bound, fit information."""
        check_is_fitted(self, "posterior_")
        d = self.n_features_in_
        ds = xr.Dataset(
            {"inducing_points": (("inducing", "feature"), self.inducing_points_),
             "lengthscales": (("feature",), self.lengthscales_),
             "kernel_variance": ((), self.kernel_variance_),
             "noise_variance": ((), self.noise_variance_),
             "bound_trace": (("iteration",), np.asarray(self.bound_trace_, float))},
            coords={"feature": getattr(self, "feature_names_", [f"x{j}" for j in range(d)]),
                    "iteration": np.arange(1, len(self.bound_trace_) + 1)})
        ds["bound_trace"].attrs["units"] = "nats (standardised y)"
        ds.attrs.update(bound=float(self.bound_), n_train=self.n_train_, n_inducing=int(self.n_inducing),
                        **{k: (int(v) if isinstance(v, bool) else v) for k, v in self.fit_info_.items()
                           if isinstance(v, int | float | str)})
        return ds


def _row_sample(X, k: int, seed: int) -> np.ndarray:
    """At most k rows of a dask array, drawn at random without replacement (computed)."""
    n = X.shape[0]
    idx = np.sort(np.random.default_rng(seed).choice(n, size=min(n, k), replace=False))
    return np.asarray(X[idx].compute())
