"""``ADVGPRegressor``: asynchronous distributed variational GP regression (Peng, Zhe & Qi 2017) as a
scikit-learn regressor on a Dask cluster.

``fit(X, y)`` standardises X and y, places the rows as partitions on the workers, starts Z at k-means
centres of a sample of the rows and the kernel at the sample's collapsed-bound optimum
(:mod:`daskgp.advgp.start`), q(w) at its closed-form optimum for that kernel (one synchronous map-reduce of
the statistics), then runs the parameter server (:class:`daskgp.advgp.server.ParameterServer`) with staleness
bound ``tau`` until its stopping rule on the objective (``tol``) or ``max_iter`` updates. ``predict`` gives
the mean φ(x*)ᵀμ and the variance φᵀΣφ + k** − φᵀφ (+ 1/β for y), chunk-wise for dask arrays.
"""

from __future__ import annotations

import contextlib
import logging
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

from ..compute.cluster import cluster_workers
from ..compute.rows import RowChunks
from ..core.constraints import at_least, one_of_registered, real_in
from ..core.events import FitEvent, event_callback
from ..core.fingerprint import data_token
from ..core.runtime import FitRuntime, fit_runtime
from ..core.validation import fit_data_or_dask, new_data, seed_from, standardising_moments
from ..inducing.features import kmn
from ..inducing.placement import InducingEstimator, kmeans_centres, sample_rows
from ..inducing.stats import summed_stats
from ..inference.settings import checked_settings
from ..model.kernels import ard_kernel, kernel_name
from ..model.likelihoods import Gaussian
from ..runs.commit import RunDamaged
from ..runs.models import Saved, SavedModel
from .model import FEATURE_MAPS, ADVGPParams, optimal_q, stats_objective, weight_map
from .server import ParameterServer, ServerCheckpoint, UpdateRecord, auto_batch_size
from .start import INITS, subset_start
from .updates import get_update, update_names

__all__ = ["ADVGPRegressor"]

log = logging.getLogger(__name__)


class ADVGPRegressor(SavedModel, InducingEstimator, RegressorMixin, BaseEstimator):
    """Sparse variational GP regression with a stationary ARD kernel (RBF or Matérn) in ADVGP's weight space,
    fitted by asynchronous delayed proximal gradients on a Dask cluster.

    n_inducing: m; max_iter: the most server updates; tol: stop earlier when the objective's mean over a
    window of updates improves by less than tol times its size (:meth:`ParameterServer.converged_at
    <daskgp.advgp.server.ParameterServer.converged_at>`; None: run ``max_iter`` updates); tau: staleness
    bound (0: synchronous); n_partitions: row partitions (default: two per worker); feature_map: 'cholesky'
    (eq. 11), 'nystrom' (eq. 21) or 'ensemble' (eq. 22, with ``groups``); optimizer: 'adam' (Adam with its
    own step size for the inducing inputs, ``inducing_rate``, and for log σ², log l, log σ²_n,
    ``learning_rate``; natural-gradient steps of size ``q_step`` on q(w)) or 'adadelta' (the paper's
    Algorithm 1: ADADELTA with ε = ``adadelta_eps`` and the proximal step on q(w)) — or any update
    registered in :mod:`daskgp.advgp.updates` (``learning_rate``, ``inducing_rate``, ``q_step`` and
    ``adadelta_eps`` set the chosen update's settings of those names, ``eps`` for the last; the others
    are inert); update_options: the chosen update's settings by name (its settings dataclass's fields,
    checked against their declarations; they win over the keywords above: how a registered update's own
    settings are given); scheduler: a
    dask-scheduler address (default: this process's client, else a local cluster); noise_init: initial noise
    variance relative to var y; batch_size: rows per gradient task, drawn afresh from the task's partition
    at every version and scaled to an unbiased estimate of the partition's sum ('auto', the default: from
    m, the partitions and the workers, :func:`daskgp.advgp.server.auto_batch_size` — 16,384 rows at
    m = 100, divided among the partitions beyond two a worker, the whole partition when it is smaller;
    None: the whole partition, exact gradients, however large);
    random_state: the k-means and minibatch seed; kernel: 'rbf', 'matern32', 'matern52'
    (:data:`daskgp.model.kernels.KERNELS`) or a kernel object of those classes, with one lengthscale per
    feature; init: where the kernel starts — 'subset' (its collapsed bound on a sample of 2·10⁴ rows
    maximised by L-BFGS-B first, :mod:`daskgp.advgp.start`) or 'kmeans' (the paper's: Z at k-means centres,
    σ² = 1, lengthscales √d, the noise at ``noise_init``, in standardised units); refine: after the last
    update, q(w) re-made at its closed-form optimum for the final kernel from every row (one map-reduce of
    the statistics, as at the start; outside ``time_budget``, as the set-up is). The server's q(w) is a
    natural-gradient average of minibatch estimates; the optimum's −L is the collapsed bound, never above
    the last q(w)'s (measured: the ADVGP guide's "q(w) re-made at the end").

    Fitted: ``params_`` (ADVGPParams, standardised units), ``n_iter_`` (updates), ``converged_`` (stopped by
    ``tol``; a fit with ``tol`` cut at ``max_iter`` or ``time_budget`` says so in a ConvergenceWarning),
    ``records_`` (per update: version, staleness, objective, seconds), ``objective_`` (nats,
    standardised y: −L over every row after ``refine``; else the last update's, with minibatches an
    estimate), ``refine_seconds_`` (None without ``refine``), ``gradients_per_partition_``, ``batch_size_``
    (rows per gradient task used; None: whole partitions), ``lost_partitions_``,
    ``start_info_`` (the subset start's bound per row before and after, its iterations), ``kernel_`` (the
    fitted kernel object, X and y units), ``noise_variance_`` (y units²) and ``likelihood_`` (its
    :class:`~daskgp.model.likelihoods.Gaussian`), ``n_features_in_``. ``save(path)``
    and ``ADVGPRegressor.load(path)`` keep a fitted model (:mod:`daskgp.runs.models`).
    """

    def __init__(self, n_inducing: int = 100, max_iter: int = 5000, tol: float | None = 1e-4, tau: int = 0,
                 n_partitions: int | None = None, feature_map: str = "cholesky", groups: int = 1,
                 optimizer: str = "adam", learning_rate: float = 0.02, inducing_rate: float = 0.02,
                 q_step: float = 0.5, scheduler: str | None = None, noise_init: float = 0.5,
                 adadelta_eps: float = 1e-6, batch_size: int | str | None = "auto", random_state=0,
                 kernel="rbf", init: str = "subset", update_options: dict | None = None, refine: bool = True):
        self.n_inducing, self.max_iter, self.tau, self.n_partitions = n_inducing, max_iter, tau, n_partitions
        self.tol = tol
        self.feature_map, self.groups, self.scheduler = feature_map, groups, scheduler
        self.optimizer, self.learning_rate, self.inducing_rate = optimizer, learning_rate, inducing_rate
        self.q_step = q_step
        self.noise_init, self.adadelta_eps, self.random_state = noise_init, adadelta_eps, random_state
        self.batch_size, self.kernel, self.init = batch_size, kernel, init
        self.update_options, self.refine = update_options, refine

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # τ > 0: gradients arrive in the order the workers finish, so two fits with one seed can differ
        tags.non_deterministic = not (isinstance(self.tau, int) and self.tau == 0)
        return tags

    _parameter_constraints = {
        "n_inducing": [at_least(1)], "max_iter": [at_least(1)], "tol": [real_in(0, None, "left"), None],
        "tau": [at_least(0)], "n_partitions": [at_least(1), None],
        "feature_map": [StrOptions(set(FEATURE_MAPS))], "groups": [at_least(1)],
        "optimizer": [one_of_registered(update_names)], "learning_rate": [real_in(0, 1, "left")],
        "inducing_rate": [real_in(0, 1, "left")], "q_step": [real_in(0, 1, "right")],
        "scheduler": [str, None], "noise_init": [real_in(0, 10)],  # relative to var y
        "adadelta_eps": [real_in(0, None)], "batch_size": [at_least(1), StrOptions({"auto"}), None],
        "random_state": ["random_state"],
        "kernel": "no_validation",  # a name in any case or a kernel object: kernel_name() checks it
        "init": [StrOptions(set(INITS))], "update_options": [dict, None], "refine": ["boolean"],
    }

    def _check_params(self, n: int) -> None:
        super()._check_params(n)
        # the chosen update's own settings, checked against its declarations before any cluster or data
        update = get_update(self.optimizer)
        checked_settings(update.settings, self.update_options, f"the {update.name!r} update")

    def fit(self, X, y, client=None, callback=None, delays=None, checkpoint=None, resume: bool = False,
            keep_checkpoint: bool = False, time_budget: float | None = None, *,
            runtime: FitRuntime | None = None):
        """Fit on X (n, d), y (n,): numpy, DataFrames, or dask arrays with known chunk sizes (a
        :class:`daskgp.Table`'s), which are read where they are, never gathered here, their row chunks the
        partitions unless ``n_partitions`` is set. ``callback(event)`` after every server update: a
        :class:`daskgp.FitEvent` (``objective``: −ELBO, nats; ``values``: staleness, partition; ``record``:
        the :class:`~daskgp.advgp.server.UpdateRecord`; ``model``: the current :class:`ADVGPParams`);
        ``delays``: artificial seconds per partition task (the straggler experiment).

        ``checkpoint``: a folder path (:mod:`daskgp.runs.fits`) that holds the server's state every 10
        updates (atomic commits, the previous one kept, locked while the fit writes it), tied to these data
        and settings; an existing one is refused unless ``resume``, which continues from it to ``max_iter``
        updates in all. It is removed when the fit finishes unless ``keep_checkpoint``. ``time_budget``: stop
        after this many seconds of updates even before ``max_iter`` (benchmarks at a fixed wall time).
        ``runtime``: a :class:`daskgp.FitRuntime` with these keywords instead (not both). Returns self."""
        rt = fit_runtime(runtime, "ADVGPRegressor", client=client, callback=callback,
                         checkpoint=checkpoint, resume=resume, keep_checkpoint=keep_checkpoint,
                         time_budget=time_budget)
        client, callback, checkpoint = rt.client, rt.callback, rt.checkpoint
        resume, keep_checkpoint, time_budget = rt.resume, rt.keep_checkpoint, rt.time_budget
        X, y = fit_data_or_dask(self, X, y)
        n, d = X.shape
        lazy = not isinstance(X, np.ndarray)
        self._check_params(n)
        callback = event_callback(callback, lambda e: (e.record, e.model), "ADVGPRegressor")
        seed = seed_from(self.random_state)
        ckpt = None if checkpoint is None else ServerCheckpoint(os.fspath(checkpoint))
        if resume and ckpt is None:
            raise ValueError("resume=True needs the checkpoint to resume from")
        if ckpt is not None and not resume and ckpt.exists():
            raise FileExistsError(f"{ckpt.path} holds an interrupted fit: pass resume=True to continue it, "
                                  "or remove it to start afresh")
        if resume and not ckpt.exists():
            raise FileNotFoundError(f"no checkpoint to resume at {ckpt.path}")
        mx, sx, my, sy = standardising_moments(X, y)
        self.x_mean_, self.x_scale_, self.y_mean_, self.y_scale_ = mx, sx, my, sy
        Xs, ys = (X - mx) / sx, (y - my) / sy
        from ..compute.cluster import borrowed_client

        with ckpt.writing() if ckpt is not None else contextlib.nullcontext(), \
                borrowed_client(client, self.scheduler) as c:
            # dask input: the data's own row chunks are the partitions (read where they are), unless
            # n_partitions asks for others
            workers = len(cluster_workers(c))  # one scheduler query: the partitions and 'auto' both ask
            r = self.n_partitions or (Xs.numblocks[0] if lazy else 2 * max(1, workers))
            rows = Xs.chunks[0] if lazy and not self.n_partitions else max(1, -(-n // r))
            # 'auto' resolved from the partitions' size and m before the key: a checkpoint names the rows
            # per task it was made with, so a later rule for 'auto' cannot resume it with others
            self.batch_size_ = (auto_batch_size(max(rows) if isinstance(rows, tuple) else rows,
                                                int(self.n_inducing), r, workers)
                                if self.batch_size == "auto" else self.batch_size)
            key = f"{data_token(X, y)}|{self._settings_key(seed, r)}"
            state = ckpt.read(key) if resume else None
            # one sample of the rows (drawn where they are) for k-means and the subset start; before the
            # rows are placed: the two graphs share keys that the scheduler would otherwise see twice
            Xsub, ysub = sample_rows(seed, Xs, ys)
            chunks = RowChunks.from_arrays(c, ys, rows, X=Xs)
            try:
                m, k = int(self.n_inducing), int(self.n_inducing) // int(self.groups)
                p0 = ADVGPParams(kmeans_centres(Xsub, m, seed), 1.0, np.full(d, math.sqrt(d)),
                                 self.noise_init, np.zeros(k), np.eye(k), self.feature_map, int(self.groups),
                                 kernel_name(self.kernel))
                self.start_info_ = {"init": self.init}
                if state is None:
                    if self.init == "subset":
                        p0, info = subset_start(Xsub, ysub, p0)
                        self.start_info_.update(info)
                    p0.mu, p0.U = optimal_q(summed_stats(chunks, p0.inducing), p0)
                # the step settings of every built-in update; the chosen update takes those it declares
                server = ParameterServer(chunks, p0, int(self.tau), delays, eps=float(self.adadelta_eps),
                                         batch_size=self.batch_size_, seed=seed, optimizer=self.optimizer,
                                         learning_rate=float(self.learning_rate),
                                         inducing_rate=float(self.inducing_rate), q_step=float(self.q_step),
                                         options=self.update_options)
                if state is not None:
                    try:
                        server.restore(state)
                    except (KeyError, TypeError, ValueError) as e:
                        raise RunDamaged(f"{ckpt.path} cannot be resumed: {e}") from None
                step = None if callback is None else (lambda rec: callback(FitEvent(
                    "advgp", rec.version, rec.objective, "-ELBO", rec.seconds, total=int(self.max_iter),
                    values={"staleness": max(rec.staleness), "partition": rec.partition}, record=rec,
                    model=server.current)))
                server.run(int(self.max_iter), callback=step, checkpoint=ckpt, key=key,
                           time_budget=time_budget, tol=None if self.tol is None else float(self.tol))
                self.params_, self.records_ = server.current, server.records
                self.objective_ = self.records_[-1].objective if self.records_ else math.nan
                self.refine_seconds_ = self._refine(chunks) if self.refine else None
            finally:
                chunks.release()
        self.n_iter_ = server.version
        self.converged_ = server.converged
        self.lost_partitions_ = server.lost
        self.gradients_per_partition_ = list(server.gradients)
        self.n_train_ = n
        if self.tol is not None and not self.converged_:
            cut = (f"max_iter={int(self.max_iter)} updates" if self.n_iter_ >= int(self.max_iter)
                   else f"its time_budget of {float(time_budget):g} s ({self.n_iter_} updates)")
            warnings.warn(f"ADVGPRegressor stopped at {cut} before its stopping rule (the objective's window "
                          f"mean improving by less than tol={float(self.tol):g} of the window) was met; the "
                          "model keeps its last update (raise max_iter, or resume a kept checkpoint with a "
                          "larger one, to continue)", ConvergenceWarning, stacklevel=2)
        self._set_units()
        if ckpt is not None and not keep_checkpoint:
            ckpt.remove()
        return self

    def _refine(self, chunks) -> float:
        """q(w) of ``params_`` re-made at its optimum for the kernel of ``params_`` from the summed statistics
        of every row in ``chunks``, and ``objective_`` set to the exact −L there; said in one line. Returns
        the seconds it took."""
        t0 = time.perf_counter()
        p = self.params_
        stats = summed_stats(chunks, p.inducing)
        p.mu, p.U = optimal_q(stats, p)
        self.objective_ = stats_objective(stats, p)
        seconds = time.perf_counter() - t0
        log.info("daskgp: ADVGP's q(w) re-made at its optimum for the final kernel from all %s rows "
                 "(%.1f s): -ELBO %.1f nats", f"{chunks.n:,}", seconds, self.objective_)
        return seconds

    def _set_units(self) -> None:
        """``kernel_`` and ``noise_variance_`` in the data's units, from ``params_`` (standardised)."""
        p = self.params_
        self.kernel_ = ard_kernel(p.kernel, p.variance * self.y_scale_**2, p.lengthscales * self.x_scale_)
        self.noise_variance_ = p.noise * self.y_scale_**2
        self.likelihood_ = Gaussian(self.noise_variance_)

    def _fitted_state(self) -> Saved:
        p, rec = self.params_, self.records_
        arrays = {"Z": p.Z, "lengthscales": p.lengthscales, "mu": p.mu, "U": p.U,
                  "x_mean": self.x_mean_, "x_scale": self.x_scale_,
                  "gradients_per_partition": np.asarray(self.gradients_per_partition_, dtype=np.int64),
                  "record_version": np.array([r.version for r in rec], dtype=np.int64),
                  "record_objective": np.array([r.objective for r in rec], dtype=float),
                  "record_seconds": np.array([r.seconds for r in rec], dtype=float),
                  "record_partition": np.array([r.partition for r in rec], dtype=np.int64),
                  "record_staleness": np.array([s for r in rec for s in r.staleness], dtype=np.int64),
                  "record_contributions": np.array([len(r.staleness) for r in rec], dtype=np.int64)}
        values = {"variance": p.variance, "noise": p.noise, "feature_map": p.feature_map, "groups": p.groups,
                  "kernel": p.kernel, "y_mean": self.y_mean_, "y_scale": self.y_scale_,
                  "n_iter": self.n_iter_,
                  "converged": bool(self.converged_), "objective": self.objective_,
                  "lost_partitions": int(self.lost_partitions_), "n_train": self.n_train_,
                  "start_info": getattr(self, "start_info_", {}),
                  "batch_size": getattr(self, "batch_size_", self.batch_size),
                  "refine_seconds": getattr(self, "refine_seconds_", None)}
        return Saved({}, arrays, values)

    def _restore_fitted(self, saved: Saved) -> None:
        a, v = saved.arrays, saved.values
        self.params_ = ADVGPParams(a["Z"], v["variance"], a["lengthscales"], v["noise"], a["mu"], a["U"],
                                   v["feature_map"], v["groups"], v["kernel"])
        self.x_mean_, self.x_scale_ = a["x_mean"], a["x_scale"]
        self.y_mean_, self.y_scale_ = v["y_mean"], v["y_scale"]
        ends = np.cumsum(a["record_contributions"])
        self.records_ = [UpdateRecord(int(ver), [int(s) for s in a["record_staleness"][e - c:e]], float(obj),
                                      float(sec), int(part))
                         for ver, obj, sec, part, c, e in zip(a["record_version"], a["record_objective"],
                                                              a["record_seconds"], a["record_partition"],
                                                              a["record_contributions"], ends, strict=True)]
        self.gradients_per_partition_ = [int(g) for g in a["gradients_per_partition"]]
        self.n_iter_, self.converged_, self.objective_ = v["n_iter"], v["converged"], v["objective"]
        self.lost_partitions_, self.n_train_ = v["lost_partitions"], v["n_train"]
        self.start_info_ = v["start_info"]
        # a model saved before batch_size could be 'auto' used its batch_size as given
        self.batch_size_ = v.get("batch_size", self.batch_size)
        self.refine_seconds_ = v.get("refine_seconds")  # None: refine=False, or saved before there was one
        self._set_units()

    def _settings_key(self, seed: int, r: int) -> str:
        return (f"m={int(self.n_inducing)}|map={self.feature_map}|groups={int(self.groups)}|partitions={r}"
                f"|seed={seed}|tau={int(self.tau)}|noise_init={float(self.noise_init)!r}"
                f"|eps={float(self.adadelta_eps)!r}|batch={self.batch_size_}|opt={self.optimizer}"
                f"|lr={self.learning_rate!r}|zlr={self.inducing_rate!r}|q_step={self.q_step!r}"
                + ("" if kernel_name(self.kernel) == "rbf" else f"|kernel={kernel_name(self.kernel)}")
                + ("" if self.init == "kmeans" else f"|init={self.init}")
                + ("" if not self.update_options else f"|options={sorted(self.update_options.items())!r}"))

    def to_dataset(self) -> xr.Dataset:
        """The fitted model as labelled arrays: inducing points and lengthscales (X units), variances (y units
        squared), q(w) (μ, U; standardised), and the server's record per update (objective, largest
        staleness, wall seconds, the partition whose gradient triggered it) and how many contributions
        arrived at each staleness, all updates together."""
        check_is_fitted(self, "params_")
        p, d = self.params_, self.n_features_in_
        names = [str(c) for c in getattr(self, "feature_names_in_", [f"x{j}" for j in range(d)])]
        rec, x_units = self.records_, {"units": "X units"}
        stale = np.bincount(np.concatenate([np.asarray(r.staleness, int) for r in rec] or [np.zeros(0, int)]),
                            minlength=1)
        return xr.Dataset(
            {"inducing_points": (("inducing", "feature"), p.Z * self.x_scale_ + self.x_mean_, x_units),
             "lengthscales": (("feature",), p.lengthscales * self.x_scale_, x_units),
             "kernel_variance": ((), p.variance * self.y_scale_**2, {"units": "y units squared"}),
             "noise_variance": ((), self.y_scale_**2 * p.noise, {"units": "y units squared"}),
             "q_mean": (("weight",), p.mu), "q_chol_upper": (("weight", "weight_"), p.U),
             "objective": (("update",), np.array([r.objective for r in rec]),
                           {"units": "nats (standardised y)"}),
             "max_staleness": (("update",), np.array([max(r.staleness) for r in rec], dtype=int)),
             "seconds": (("update",), np.array([r.seconds for r in rec]), {"units": "s"}),
             "partition": (("update",), np.array([r.partition for r in rec], dtype=int)),
             "contributions": (("staleness",), stale,
                               {"description": "gradients applied this many updates after their θ"})},
            coords={"feature": names, "update": np.array([r.version for r in rec], dtype=int),
                    "staleness": np.arange(len(stale))},
            attrs={"model": "daskgp.ADVGPRegressor", "tau": int(self.tau), "n_inducing": int(self.n_inducing),
                   "optimizer": self.optimizer, "converged": int(bool(getattr(self, "converged_", False))),
                   "feature_map": self.feature_map, "n_train": int(self.n_train_), "init": self.init,
                   "lost_partitions": int(self.lost_partitions_),
                   "gradients_per_partition": np.asarray(self.gradients_per_partition_, dtype=int),
                   **({} if self.batch_size_ is None else {"batch_size": int(self.batch_size_)}),
                   **({} if self.refine_seconds_ is None
                      else {"refine_seconds": float(self.refine_seconds_)})})

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

    def _predict_block(self, X, noise: bool = True, params: ADVGPParams | None = None) -> np.ndarray:
        p = self.params_ if params is None else params
        Xs = (np.asarray(X, float) - self.x_mean_) / self.x_scale_
        W, _, _, _ = weight_map(p)
        Phi = kmn(p.inducing, Xs).T @ W  # (b, k)
        mean = Phi @ p.mu
        var = np.sum((Phi @ p.U.T) ** 2, axis=1) + p.variance - np.sum(Phi**2, axis=1)
        var = np.maximum(var, 1e-12 * p.variance) + (p.noise if noise else 0.0)
        return np.column_stack([mean * self.y_scale_ + self.y_mean_, np.sqrt(var) * self.y_scale_])
