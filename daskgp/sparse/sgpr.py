"""Distributed sparse variational GP regression (Titsias' collapsed bound in the map-reduce form of Gal et
al. 2014) as a scikit-learn regressor.

``SparseGPRegressor(n_inducing=100).fit(X, y)`` standardises X and y, places the row chunks on the Dask
workers, initialises Z by k-means, and maximises the bound over (Z, σ², l, β) with scipy's L-BFGS-B, each
evaluation being two map-reduces over the chunks (:class:`daskgp.sparse.chunks.ChunkedRows`). X and y may be
numpy or dask arrays; dask arrays are read chunk by chunk on the workers. ``fit(..., checkpoint=path)``
keeps the optimiser's whole state after every iteration (:class:`daskgp.sparse.fit.FitCheckpoint`) and
``resume=True`` continues an interrupted fit exactly as the uninterrupted one (its evaluations replayed).
``save(path)`` / ``SparseGPRegressor.load(path)`` keep a fitted model in netCDF or zarr: labelled arrays
and JSON only, nothing that executes on opening.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
import warnings

import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from ..core.constraints import at_least, real_in
from ..core.events import FitEvent, event_callback
from ..core.files import MANIFEST, MARK, array_digest, check_destination, replaced_atomically
from ..core.runtime import FitRuntime, fit_runtime
from ..core.validation import fit_data_or_dask, new_data, seed_from, standardising_moments
from ..inducing.features import GlobalParams
from ..inducing.placement import InducingEstimator, kmeans_centres, sample_rows
from ..model.kernels import ard_kernel, kernel_name
from ..model.likelihoods import Gaussian
from ..runs.models import store_format
from .bound import bound_and_grads
from .chunks import ChunkedRows
from .fit import INITS, FitCheckpoint, ReplayDiverged, SparsePosterior, fit_global, subset_start
from .sgpr_file import MODEL_FORMAT, attrs_digest, read_saved

__all__ = ["SparseGPRegressor"]



class SparseGPRegressor(InducingEstimator, RegressorMixin, BaseEstimator):
    """Sparse variational GP regression with a stationary ARD kernel (RBF or Matérn), fitted by maximising
    Titsias' collapsed bound with per-chunk statistics on a Dask cluster.

    n_inducing: m; max_iter: L-BFGS-B iterations; chunk_rows: rows per chunk (task); learn_inducing: also
    optimise Z; scheduler: a dask-scheduler address (default: this process's client, else a local cluster
    for the fit); noise_init: initial noise variance (units of y², relative to var y); random_state: seeds
    the k-means initialisation of Z (an int for a reproducible fit); tol: L-BFGS-B's relative tolerance;
    device: where the chunks' statistics are computed: 'cpu' (numpy), 'gpu' (cupy on every worker; an error
    on a worker without one) or 'auto' (each worker's GPU when it has one). The statistics are summed on the
    workers' devices and the m × m centre runs where their sum arrives; the optimiser's vector is numpy;
    kernel: 'rbf', 'matern32', 'matern52' (:data:`daskgp.model.kernels.KERNELS`) or a kernel object of
    those classes, with one lengthscale per feature; init: where the fit starts — 'kmeans' (Z at k-means
    centres of a 2·10⁴-row sample, σ² = 1, lengthscales √d, the noise at ``noise_init``, standardised
    units) or 'subset' (that start moved first to the optimum of the same sample's collapsed bound, in
    this process: fewer passes over all rows when each is minutes; :func:`daskgp.sparse.fit.subset_start`).

    Fitted attributes: ``params_`` (GlobalParams, standardised units), ``inducing_points_`` (m, d) and
    ``lengthscales_`` (d,) in X units, ``kernel_variance_`` and ``noise_variance_`` in y units², ``kernel_``
    (the fitted kernel object in those units), ``likelihood_`` (the Gaussian of that noise), ``bound_``
    (nats, standardised y), ``bound_trace_``, ``iteration_seconds_`` (the fit's wall seconds at each
    iteration, s; NaN where an older checkpoint did not record them), ``n_iter_`` (L-BFGS-B iterations,
    those before a resume included), ``converged_`` (L-BFGS-B stopped by its own rule; when not — at
    ``max_iter``, or an abnormal line search — a ConvergenceWarning says so), ``fit_info_``,
    ``start_info_`` (the subset start's bound per row before and after, its iterations), ``n_features_in_``
    and, for DataFrames, ``feature_names_in_``.
    """

    def __init__(self, n_inducing: int = 100, max_iter: int = 1000, chunk_rows: int = 20_000,
                 learn_inducing: bool = True, scheduler: str | None = None, noise_init: float = 0.5,
                 random_state=0, tol: float = 1e-9, device: str = "cpu", kernel="rbf", init: str = "kmeans"):
        self.n_inducing, self.max_iter, self.chunk_rows = n_inducing, max_iter, chunk_rows
        self.learn_inducing, self.scheduler, self.noise_init = learn_inducing, scheduler, noise_init
        self.random_state, self.tol, self.device, self.kernel = random_state, tol, device, kernel
        self.init = init

    _parameter_constraints = {
        "n_inducing": [at_least(1)], "max_iter": [at_least(1)], "chunk_rows": [at_least(1)],
        "learn_inducing": ["boolean"], "scheduler": [str, None],
        "noise_init": [real_in(0, 10)],  # relative to var y
        "random_state": ["random_state"], "tol": [real_in(0, None, "left")],
        "device": [StrOptions({"auto", "cpu", "gpu"})],
        "kernel": "no_validation",  # a name in any case or a kernel object: kernel_name() checks it
        "init": [StrOptions(set(INITS))],
    }

    def fit(self, X, y, callback=None, client=None, init: GlobalParams | None = None, on_params=None,
            checkpoint=None, resume: bool = False, keep_checkpoint: bool = False, on_posterior=None, *,
            runtime: FitRuntime | None = None):
        """Fit on X (n, d), y (n,) (numpy or dask). ``callback(event)`` after every L-BFGS-B iteration: a
        :class:`daskgp.FitEvent` (``step``: iterations, those before a resume included; ``objective``: the
        bound, nats); ``client``: a distributed Client to use;
        ``init``: start from these parameters (standardised units) instead of the estimator's ``init``;
        ``on_params(θ, trace)``: after every iteration.

        ``on_posterior(iteration, seconds, predict)``: after every iteration whose q(u) is at hand without a
        pass over the rows (L-BFGS-B's accepted point is its last evaluation, whose statistics are kept;
        not for iterations replayed from a checkpoint): ``predict(X)`` gives that iterate's predictive
        (mean (b,), sd (b,) of y) in y units at X (b, d) (numpy, in this process) — a held-out metric
        against the fit's wall ``seconds`` at no cost to the fit.

        ``checkpoint``: a folder path (or :class:`FitCheckpoint`) that holds the parameters after every
        finished iteration (:mod:`daskgp.runs.fits`: atomic commits, the previous one kept, locked while
        the fit writes it), tied to these data and settings; an existing one is refused unless ``resume``,
        which continues from it to ``max_iter`` iterations in all (``bound_trace_`` keeps the earlier
        ones). It is removed when the fit finishes unless ``keep_checkpoint`` (remove it yourself once the
        results are saved). ``runtime``: a :class:`daskgp.FitRuntime` with these keywords instead (not both).
        Returns self."""
        rt = fit_runtime(runtime, "SparseGPRegressor", client=client, callback=callback,
                         checkpoint=checkpoint, resume=resume, keep_checkpoint=keep_checkpoint)
        client, callback, checkpoint = rt.client, rt.callback, rt.checkpoint
        resume, keep_checkpoint = rt.resume, rt.keep_checkpoint
        X, y = fit_data_or_dask(self, X, y, min_rows=2)
        self._check_params(X.shape[0])
        callback = event_callback(callback, lambda e: (e.step, e.objective), "SparseGPRegressor")
        seed = seed_from(self.random_state)
        m, q, kern = int(self.n_inducing), X.shape[1], kernel_name(self.kernel)
        ckpt, resumed, key = None, None, None
        if checkpoint is not None:
            ckpt = checkpoint if isinstance(checkpoint, FitCheckpoint) else FitCheckpoint(checkpoint)
            key = self._checkpoint_key(X, y, seed)
            if resume:
                if init is not None:
                    raise ValueError("give init or resume=True, not both")
                resumed = ckpt.read(key, m, q, kern)
            elif ckpt.exists():
                raise FileExistsError(f"{ckpt.path} holds an interrupted fit: pass resume=True to continue "
                                      "it, or remove it to start afresh")
        elif resume:
            raise ValueError("resume=True needs the checkpoint to resume from")
        mx, sx, my, sy = standardising_moments(X, y)
        self.x_mean_, self.x_scale_, self.y_mean_, self.y_scale_ = mx, sx, my, sy
        Xs, ys = (X - mx) / sx, (y - my) / sy
        from ..compute.cluster import borrowed_client

        with ckpt.writing() if ckpt is not None else contextlib.nullcontext(), \
                borrowed_client(client, self.scheduler) as c:
            self.start_info_ = {"init": self.init if init is None and resumed is None else None}
            if resumed is None and init is None:
                # Z at k-means centres of the sample (sample_rows with this seed; the subset start takes its
                # y too). Every start is drawn before the rows are placed: the graphs share keys, and
                # distributed warns of overlaps
                subset = self.init == "subset"
                Xb, *yb = sample_rows(seed, Xs, *((ys,) if subset else ()))
                init = GlobalParams(kmeans_centres(Xb, m, seed), 1.0, np.full(q, math.sqrt(q)),
                                    noise=self.noise_init, kernel=kern)
                if subset:
                    init, info = subset_start(Xb, yb[0], init, self.chunk_rows,
                                              fixed_inducing=not self.learn_inducing)
                    self.start_info_.update(info)
            if resumed is None:
                if init.Z.shape != (m, q):
                    raise ValueError(f"init has Z of shape {init.Z.shape}, expected ({m}, {q})")
                if init.kernel != kern:
                    raise ValueError(f"init is for kernel {init.kernel!r}, the estimator's is {kern!r}")
            chunks = ChunkedRows.from_arrays(c, ys, self.chunk_rows, X=Xs,
                                             device=None if self.device == "cpu" else self.device)
            try:
                t0 = time.perf_counter()
                try:
                    theta, trace, info = self._global(chunks, init, resumed, ckpt, key, callback, on_params,
                                                      exact=True, on_posterior=on_posterior)
                except ReplayDiverged as e:  # another scipy: continue from the parameters instead
                    warnings.warn(f"{ckpt.path} cannot be replayed exactly ({e}); the fit continues from "
                                  "its last parameters with a fresh L-BFGS-B memory", RuntimeWarning,
                                  stacklevel=2)
                    theta, trace, info = self._global(chunks, init, resumed, ckpt, key, callback, on_params,
                                                      exact=False, on_posterior=on_posterior)
                stats = chunks.stats(theta)
                info["seconds"] = time.perf_counter() - t0
            finally:
                chunks.release()
        info["resumed_after"] = len(resumed.trace) if resumed is not None else 0
        info.pop("evaluations", None)
        self.bound_trace_, self.fit_info_ = list(trace), info
        self.n_train_ = int(X.shape[0])
        self.converged_ = bool(info.get("converged"))
        if not self.converged_:
            self._warn_unconverged(info)
        self._set_fitted(SparsePosterior.from_stats(theta, stats), bound_and_grads(stats, theta, grads=False))
        if ckpt is not None and not keep_checkpoint:
            ckpt.remove()
        return self

    def _warn_unconverged(self, info: dict) -> None:
        """The fit stopped before L-BFGS-B's own rule (a relative change of the bound below ``tol``, or a
        projected gradient below 1e-7): one line with why and how far the bound was still moving."""
        trace, n = self.bound_trace_, self.n_train_
        k, moving = min(10, len(trace) - 1), ""
        if k > 0:
            rise = (trace[-1] - trace[-1 - k]) / n * 1000
            moving = f"; the bound rose {rise:.3g} nats per 1,000 rows over its last {k} iterations"
        why = (f"at max_iter={int(self.max_iter)} L-BFGS-B iterations" if len(trace) >= int(self.max_iter)
               else f"by L-BFGS-B ({info.get('message', '?')})")
        warnings.warn(f"SparseGPRegressor stopped {why} before its convergence rule (relative change of the "
                      f"bound < tol={float(self.tol):g}){moving}; the model keeps its last iterate (raise "
                      "max_iter, or resume a kept checkpoint with a larger one, to continue)",
                      ConvergenceWarning, stacklevel=3)

    def _global(self, chunks, init, resumed, ckpt, key, callback, on_params, exact: bool, on_posterior=None):
        """The global L-BFGS-B fit from ``init``, or continuing ``resumed``: ``exact`` replays its
        evaluations from its start (bit for bit the uninterrupted fit), else (a checkpoint of daskgp <= 0.5,
        or one this scipy cannot replay) restarts from its last parameters with a fresh curvature memory.
        Writes ``ckpt`` after every iteration. Returns (θ, the whole bound trace, info)."""
        replay, previous, start = None, [], init
        if resumed is not None and exact and resumed.evaluations is not None:
            start, replay = resumed.theta0, (resumed.evaluations, len(resumed.trace))
        elif resumed is not None:
            start, previous = resumed.theta, list(resumed.trace)

        # the fit's wall seconds at each iteration, across resumes (NaN for iterations of a checkpoint that
        # did not record them), for readers of the checkpoint such as the dashboard
        secs = list(resumed.seconds or []) if resumed is not None else []
        t_start = time.perf_counter() - (secs[-1] if secs else 0.0)
        self.iteration_seconds_ = list(secs)

        def after_iteration(theta, trace, log, posterior):
            done = len(previous) + len(trace)
            secs.extend([math.nan] * (done - 1 - len(secs)) + [time.perf_counter() - t_start])
            self.iteration_seconds_ = secs[:done]
            if ckpt is not None:  # an interruption loses at most the iteration in progress
                exact_state = (start, log) if not previous else (None, None)
                ckpt.write(theta, previous + list(trace), key, *exact_state, seconds=secs[:done])
            if on_params is not None:
                on_params(theta, previous + list(trace))
            if on_posterior is not None and posterior is not None:
                post = posterior()
                on_posterior(done, secs[done - 1], lambda X: self._predict_with(post, X))

        def progress(it, F):
            if callback is not None:
                callback(FitEvent("sgpr", len(previous) + it, F, "bound", time.perf_counter() - t_start,
                                  total=int(self.max_iter)))

        theta, trace, info = fit_global(chunks, start, max(1, int(self.max_iter) - len(previous)), self.tol,
                                        progress, fixed_inducing=not self.learn_inducing,
                                        on_params=after_iteration, replay=replay)
        return theta, previous + list(trace), info

    def _set_fitted(self, posterior: SparsePosterior, bound: float) -> None:
        """The fitted attributes that follow from q(u) and the scalers (by ``fit`` and ``load``)."""
        theta, sx, sy = posterior.theta, self.x_scale_, self.y_scale_
        self.params_, self.posterior_, self.bound_ = theta, posterior, float(bound)
        self.n_iter_ = len(self.bound_trace_)
        self.inducing_points_ = theta.Z * sx + self.x_mean_
        self.lengthscales_ = theta.lengthscales * sx
        self.kernel_variance_ = theta.variance * sy**2
        self.noise_variance_ = sy**2 * theta.noise
        self.likelihood_ = Gaussian(self.noise_variance_)
        self.kernel_ = ard_kernel(theta.kernel, self.kernel_variance_, self.lengthscales_)

    def _checkpoint_key(self, X, y, seed: int) -> str:
        """What a checkpoint must match: the data (:func:`daskgp.core.fingerprint.data_token`) and the
        settings that shape the parameters."""
        from ..core.fingerprint import data_token

        kern = kernel_name(self.kernel)  # RBF keys stay as daskgp <= 0.3 wrote them, so they still resume
        return (f"{data_token(X, y)}|m={int(self.n_inducing)}|seed={seed}|"
                f"learn_inducing={bool(self.learn_inducing)}" + ("" if kern == "rbf" else f"|kernel={kern}")
                + ("" if self.init == "kmeans" else f"|init={self.init}"))

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
            out = self._predict_rows(new_data(self, X), noise)
            mean, sd = out[:, 0], out[:, 1]
        return (mean, sd) if return_std else mean

    def _predict_block(self, X, noise: bool = True, posterior: SparsePosterior | None = None) -> np.ndarray:
        Xs = (np.asarray(X, float) - self.x_mean_) / self.x_scale_
        mean, var = (posterior or self.posterior_).predict_block(Xs, noise)
        return np.column_stack([mean[:, 0] * self.y_scale_ + self.y_mean_, np.sqrt(var) * self.y_scale_])

    def _predict_rows(self, X, noise: bool = True, posterior: SparsePosterior | None = None) -> np.ndarray:
        """(n, 2) mean and sd at the rows of X (n, d), ``chunk_rows`` at a time in this process, under the
        fitted q(u) or ``posterior``."""
        step = max(1, int(self.chunk_rows))
        blocks = [self._predict_block(X[a:a + step], noise, posterior) for a in range(0, len(X), step)]
        return np.concatenate(blocks) if blocks else np.zeros((0, 2))

    def _predict_with(self, posterior: SparsePosterior, X) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sd) of y at X (b, d) under ``posterior`` (an iterate's q(u))."""
        out = self._predict_rows(np.asarray(X, float), True, posterior)
        return out[:, 0], out[:, 1]

    def to_dataset(self) -> xr.Dataset:
        """The fitted model as labelled arrays: inducing points, lengthscales and variances in X and y units,
        the bound trace, and the state :meth:`load` needs (q(u) and the parameters in the standardised units
        of the fit, the scalers); attributes: the bound, the estimator's parameters and fit information
        (JSON). Every unit is in the variables' ``units`` attributes."""
        check_is_fitted(self, "posterior_")
        d, post, theta = self.n_features_in_, self.posterior_, self.params_
        names = [str(c) for c in getattr(self, "feature_names_in_", [f"x{j}" for j in range(d)])]
        ind, feat, ind2 = ("inducing", "feature"), ("feature",), ("inducing", "inducing_")
        ds = xr.Dataset(
            {"inducing_points": (ind, self.inducing_points_, {"units": "X units"}),
             "lengthscales": (feat, self.lengthscales_, {"units": "X units"}),
             "kernel_variance": ((), self.kernel_variance_, {"units": "y units squared"}),
             "noise_variance": ((), self.noise_variance_, {"units": "y units squared"}),
             "bound_trace": (("iteration",), np.asarray(self.bound_trace_, float),
                             {"units": "nats (standardised y)"}),
             # the fit's wall seconds at each iteration (NaN where a resumed checkpoint did not record them)
             "iteration_seconds": (("iteration",), self._iteration_seconds(), {"units": "s"}),
             # the state load() rebuilds the model from, in the standardised units of the fit
             "x_mean": (feat, np.asarray(self.x_mean_, float), {"units": "X units"}),
             "x_scale": (feat, np.asarray(self.x_scale_, float), {"units": "X units"}),
             "inducing_std": (ind, theta.Z, {"units": "standardised X"}),
             "lengthscales_std": (feat, theta.lengthscales, {"units": "standardised X"}),
             "q_mean_weights": (("inducing",), post.a[:, 0], {"description": "a = beta P^-1 C: mean k*^T a"}),
             "q_var_matrix": (ind2, post.Q, {"description": "Kmm^-1 - P^-1: var sigma2 - k*^T Q k*"})},
            coords={"feature": names, "iteration": np.arange(1, len(self.bound_trace_) + 1)})
        info = {k: (int(v) if isinstance(v, bool) else v) for k, v in self.fit_info_.items()
                if isinstance(v, int | float | str)}
        params = {k: v for k, v in self.get_params().items() if k != "scheduler"}
        params["kernel"] = kernel_name(self.kernel)  # a name: a saved file holds plain data
        ds.attrs.update(model="daskgp.SparseGPRegressor", model_format=MODEL_FORMAT, bound=float(self.bound_),
                        n_train=self.n_train_, n_inducing=int(self.n_inducing), variance_std=theta.variance,
                        noise_std=theta.noise, y_mean=float(self.y_mean_), y_scale=float(self.y_scale_),
                        params=json.dumps(params), fit_info=json.dumps(info), **info)
        if getattr(self, "start_info_", {}).get("init") == "subset":  # where the fit started, as JSON
            ds.attrs["start_info"] = json.dumps(self.start_info_)
        ds.attrs[MARK] = ds.attrs["model"]
        ds.attrs["digests"] = json.dumps({str(k): array_digest(v.values) for k, v in ds.variables.items()})
        ds.attrs["attrs_digest"] = attrs_digest(ds.attrs)
        return ds

    def _iteration_seconds(self) -> np.ndarray:
        n = len(self.bound_trace_)
        secs = np.asarray(getattr(self, "iteration_seconds_", []), float)[:n]
        return np.concatenate([secs, np.full(n - len(secs), np.nan)])

    def save(self, path, overwrite: bool = False) -> None:
        """Write the fitted model to ``path``: netCDF (``.nc``) or zarr (``.zarr``), atomically (a finished
        file or none). :meth:`load` reads it back as a fitted estimator."""
        path = os.fspath(path)
        fmt = store_format(path)
        check_destination(path, "daskgp.SparseGPRegressor", overwrite=overwrite, flag="path")
        ds = self.to_dataset()
        if fmt == "zarr":  # the nodes it writes: an overwrite later replaces a store holding these only
            ds.attrs[MANIFEST] = sorted(str(k) for k in ds.variables)
        with replaced_atomically(path) as tmp:
            ds.to_netcdf(tmp) if fmt == "netcdf" else ds.to_zarr(tmp, mode="w", consolidated=True)

    @classmethod
    def load(cls, path) -> SparseGPRegressor:
        """A fitted estimator from :meth:`save` (or ``daskgp sgpr``'s results file). Raises ValueError, naming
        the file, for anything else."""
        ds, fmt_no = read_saved(path)
        try:
            est = cls(**json.loads(ds.attrs["params"]))
            # format 1 (daskgp 0.3) kept the noise as its precision
            noise = ds.attrs["noise_std"] if fmt_no >= 2 else 1.0 / float(ds.attrs["beta_std"])
            theta = GlobalParams(ds["inducing_std"].values, ds.attrs["variance_std"],
                                 ds["lengthscales_std"].values, noise=noise, kernel=kernel_name(est.kernel))
            post = SparsePosterior(theta, ds["q_mean_weights"].values[:, None], ds["q_var_matrix"].values)
            est.x_mean_, est.x_scale_ = ds["x_mean"].values, ds["x_scale"].values
            est.y_mean_, est.y_scale_ = float(ds.attrs["y_mean"]), float(ds.attrs["y_scale"])
            est.bound_trace_, est.fit_info_ = list(ds["bound_trace"].values), json.loads(ds.attrs["fit_info"])
            est.converged_ = bool(est.fit_info_.get("converged", False))
            if "iteration_seconds" in ds:  # saved by daskgp >= 0.6
                est.iteration_seconds_ = [float(t) for t in ds["iteration_seconds"].values]
            est.n_train_, est.n_features_in_ = int(ds.attrs["n_train"]), ds.sizes["feature"]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path} is an incomplete daskgp model ({type(e).__name__}: {e})") from None
        names = [str(c) for c in ds["feature"].values]
        if names != [f"x{j}" for j in range(len(names))]:
            est.feature_names_in_ = np.asarray(names, dtype=object)
        est._set_fitted(post, ds.attrs["bound"])
        return est
