"""``SparseGPClassifier``: binary GP classification with the FITC-probit model, trained by EP, stochastic EP
(SEP) or ADF with per-chunk EP sums on a Dask cluster (Hernández-Lobato et al. 2015), as a scikit-learn
classifier.

``fit(X, y)`` standardises X, places the rows as chunks on the workers, starts Z at k-means centres, σ² = 1
and every lengthscale at √d (standardised inputs), and runs ``max_iter`` iterations of the method with Adam
steps on the hyperparameters (:func:`daskgp.gpc.fit.run_ep`). ``predict_proba`` gives
p(y = classes_[1] | x) = Φ(μ(x) / √(1 + d(x) + σ²(x))) chunk-wise (dask arrays too).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ..compute.rows import RowChunks
from ..core.constraints import at_least, one_of_registered, real_in
from ..core.events import FitEvent, event_callback
from ..core.runtime import FitRuntime, fit_runtime
from ..core.validation import fit_data, new_data, seed_from, standardising_moments
from ..inducing.placement import InducingEstimator, kmeans_inducing
from ..model.kernels import ard_kernel, kernel_name
from ..model.likelihoods import Probit
from ..runs.models import Saved, SavedModel
from .checkpoint import place_sites
from .dataset import classifier_dataset
from .ep import Factor, GPCParams, Posterior
from .finish import FINISH_SHARE, in_finish, run_fit
from .fit import (
    REFINE_PASSES,
    Adam,
    EPState,
    GPCCheckpoint,
    IterationRecord,
    auto_chunk_rows,
    collapsed,
    refine_factor,
)
from .methods import get_method, method_names

log = logging.getLogger(__name__)

__all__ = ["SparseGPClassifier"]


class SparseGPClassifier(SavedModel, InducingEstimator, ClassifierMixin, BaseEstimator):
    """Sparse GP classification (probit likelihood, FITC, a stationary ARD kernel) by expectation propagation.

    n_inducing: m; method: a registered update (:func:`daskgp.gpc.methods.method_names`): 'ep' (a site per
    point, memory O(n) on the workers), 'sep' (one global factor, memory O(m²)) or 'adf' (the cheap baseline
    that underestimates the variance); max_iter: iterations (passes over the data, or minibatches);
    chunk_rows: rows per chunk (task; 'auto', the default: 20,000, in at most 16 chunks,
    :func:`daskgp.gpc.fit.auto_chunk_rows`); batch_size: rows per iteration in all (None: every row, the batch
    mode; 'auto', the default: the method's choice for the training rows,
    :meth:`daskgp.gpc.methods.GPCMethod.auto_batch` — SEP in batch mode up to 20,000 rows and on minibatches
    of 2,000 beyond, EP and ADF always in batch mode); damping: EP's site damping, SEP's step of the global
    factor, ADF's step of its factor (None: the method's, 0.5 for EP and ADF, 1 for SEP; SEP on minibatches
    ``|B|/min(n, 20,000)``, :func:`daskgp.gpc.methods.minibatch_damping`; EP and ADF refuse to learn on
    minibatches);
    learning_rate: Adam's step on (Z, log σ², log l) (0: keep the initial hyperparameters); learn_inducing:
    also move Z; scheduler: a dask-scheduler address (default: this process's client, else a local cluster);
    random_state: k-means and minibatch seed; kernel: 'rbf', 'matern32', 'matern52'
    (:data:`daskgp.model.kernels.KERNELS`) or a kernel object of those classes, one lengthscale per feature;
    refine_passes: after a fit on minibatches of a method with a tied factor (SEP), site-only passes over
    every row at the final hyperparameters that re-make the factor (:func:`daskgp.gpc.fit.refine_factor`;
    0: keep the minibatch factor); finish_share: the share of a learning SEP fit on minibatches (of its
    time budget, else of its row passes) spent on batch iterations over every row at its end
    (:mod:`daskgp.gpc.finish`; 0: none).

    Fitted: ``batch_size_`` (rows per iteration; None: every row), ``chunk_rows_`` (rows per chunk),
    ``classes_``, ``params_`` (GPCParams, standardised inputs), ``factor_`` (the k-space factor of q(u)),
    ``evidence_`` (nats; the log evidence approximation of the last iteration's q — the model is that q,
    not the parameters one Adam step past it, :class:`daskgp.gpc.state.EPState` — or of the re-made
    factor), ``refine_seconds_`` (the re-making's seconds after a minibatch fit; None when there was
    none), ``finish_iter_`` (the finish's batch iterations, the last of ``n_iter_``), ``records_`` (per
    iteration: evidence, training error, gradient norm, site passes, rows),
    ``n_iter_``, ``n_features_in_``, ``best_iteration_`` (the iteration whose q the model keeps: the last,
    unless the fit broke down or its evidence collapsed — then the best, with a ConvergenceWarning),
    ``kernel_`` (the fitted kernel object: lengthscales in X units, the variance in latent units),
    ``likelihood_`` (the :class:`Probit`).
    ``save(path)`` and ``SparseGPClassifier.load(path)`` keep a fitted model (:mod:`daskgp.runs.models`).
    """

    def __init__(self, n_inducing: int = 100, method: str = "sep", max_iter: int = 250,
                 chunk_rows: int | str = "auto", batch_size: int | str | None = "auto",
                 damping: float | None = None,
                 learning_rate: float = 0.01, learn_inducing: bool = True, scheduler: str | None = None,
                 random_state=0, kernel="rbf", refine_passes: int = REFINE_PASSES,
                 finish_share: float = FINISH_SHARE):
        self.n_inducing, self.method, self.max_iter = n_inducing, method, max_iter
        self.chunk_rows, self.kernel = chunk_rows, kernel
        self.batch_size, self.damping, self.learning_rate = batch_size, damping, learning_rate
        self.learn_inducing, self.scheduler, self.random_state = learn_inducing, scheduler, random_state
        self.refine_passes, self.finish_share = refine_passes, finish_share

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # binary: more classes are refused with a clear error
        return tags

    _parameter_constraints = {
        "n_inducing": [at_least(1)], "method": [one_of_registered(method_names)], "max_iter": [at_least(1)],
        "chunk_rows": [at_least(1), StrOptions({"auto"})],
        "batch_size": [at_least(1), StrOptions({"auto"}), None],
        "damping": [real_in(0, 1, "right"), None],
        "learning_rate": [real_in(0, 1, "left")], "learn_inducing": ["boolean"], "scheduler": [str, None],
        "random_state": ["random_state"], "refine_passes": [at_least(0)],
        "finish_share": [real_in(0, 1, "left")],
        "kernel": "no_validation",  # a name in any case or a kernel object: kernel_name() checks it
    }

    def _damping(self, n: int) -> float:
        if self.damping is not None:
            return float(self.damping)
        return get_method(self.method).damping(self.batch_size_, n)

    def _resolve_batch(self, n: int) -> int | None:
        """``batch_size_``: 'auto' resolved for ``n`` rows by the method, a count at or above n as None
        (every row is the batch mode)."""
        b = get_method(self.method).auto_batch(n) if self.batch_size == "auto" else self.batch_size
        return None if b is None or int(b) >= n else int(b)

    def _labels(self, y) -> np.ndarray:
        check_classification_targets(y)
        self.classes_, idx = np.unique(y, return_inverse=True)
        if len(self.classes_) != 2:
            what = "one class" if len(self.classes_) == 1 else f"{len(self.classes_)} classes"
            # scikit-learn's wording first: its checks (and users' code) look for it
            raise ValueError(f"Only binary classification is supported: SparseGPClassifier is a binary "
                             f"classifier: y has {what} ({self.classes_[:5].tolist()}"
                             f"{' ...' if len(self.classes_) > 5 else ''})")
        return np.where(idx == 1, 1.0, -1.0)

    def _dask_data(self, X, y):
        """Dask arrays: shapes and finiteness checked here (one pass on the workers), the two classes found,
        labels mapped to ±1 lazily; the rows are never gathered into this process."""
        import dask.array as da

        from ..core.validation import check_finite_chunks, check_known_chunks, check_X

        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        X = X if isinstance(X, da.Array) else da.from_array(check_X(X))
        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y))
        check_known_chunks(X, "X")
        check_known_chunks(y, "y")
        if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
            raise ValueError(f"X must be (n, d) and y (n,) with the same n, got {X.shape} and {y.shape}")
        check_finite_chunks(X.astype(float))  # on the workers; the error names the row chunk
        classes = da.unique(y).compute()
        self._labels(np.asarray(classes))  # two classes, or the error the numpy path gives
        return X.astype(float), da.where(y == self.classes_[1], 1.0, -1.0)

    def fit(self, X, y, client=None, callback=None, time_budget: float | None = None, checkpoint=None,
            resume: bool = False, keep_checkpoint: bool = False, *, runtime: FitRuntime | None = None):
        """Fit on X (n, d), y (n,) with two classes. ``callback(event)`` after every iteration: a
        :class:`daskgp.FitEvent` (``objective``: log Z, nats; ``values``: train_error, grad_norm;
        ``record``: the :class:`~daskgp.gpc.fit.IterationRecord`; ``model``: the
        :class:`~daskgp.gpc.fit.EPState`); ``time_budget``:
        stop after this many seconds of iterations even before ``max_iter`` (benchmarks).

        ``checkpoint``: a folder path (or :class:`~daskgp.gpc.fit.GPCCheckpoint`; :mod:`daskgp.runs.fits`:
        atomic commits, the previous one kept, locked while the fit writes it) that holds the fit's whole
        state after every iteration, tied to these data and settings; an existing one is refused unless
        ``resume``, which continues from it — exactly as the uninterrupted fit — to ``max_iter`` iterations
        in all. Removed when the fit finishes unless ``keep_checkpoint``. ``runtime``: a
        :class:`daskgp.FitRuntime` with these keywords instead (not both). Returns self."""
        rt = fit_runtime(runtime, "SparseGPClassifier", client=client, callback=callback,
                         checkpoint=checkpoint, resume=resume, keep_checkpoint=keep_checkpoint,
                         time_budget=time_budget)
        client, callback, checkpoint = rt.client, rt.callback, rt.checkpoint
        resume, keep_checkpoint, time_budget = rt.resume, rt.keep_checkpoint, rt.time_budget
        import dask.array as da

        if isinstance(X, da.Array) or isinstance(y, da.Array):
            X, ypm = self._dask_data(X, y)
            self.n_features_in_ = X.shape[1]  # (fit_data sets it for numpy input)
        else:
            X, y = fit_data(self, X, y, min_rows=2, y_numeric=False)
            ypm = self._labels(y)
        n, d = X.shape
        self._check_params(n)
        callback = event_callback(callback, lambda e: (e.record, e.model), "SparseGPClassifier")
        t_start = time.perf_counter()
        method = get_method(self.method)  # a registered one: checked with the other parameters above
        seed = seed_from(self.random_state)
        # resolved before the checkpoint's key: a checkpoint names the rows per iteration it was made with
        self.batch_size_ = batch = self._resolve_batch(n)
        self.chunk_rows_ = auto_chunk_rows(n) if self.chunk_rows == "auto" else int(self.chunk_rows)
        ckpt, key = None, None
        if checkpoint is not None:
            ckpt = checkpoint if isinstance(checkpoint, GPCCheckpoint) else GPCCheckpoint(checkpoint)
            key = self._checkpoint_key(X, ypm, seed)
            if not resume and ckpt.exists():
                raise FileExistsError(f"{ckpt.path} holds an interrupted fit: pass resume=True to continue "
                                      "it, or remove it to start afresh")
        elif resume:
            raise ValueError("resume=True needs the checkpoint to resume from")
        resumed = (ckpt.read(key, int(self.n_inducing), d, float(self.learning_rate),
                             kernel_name(self.kernel)) if resume else None)
        mx, sx, _, _ = standardising_moments(X, ypm)
        self.x_mean_, self.x_scale_ = mx, sx
        Xs = (X - mx) / sx
        m = int(self.n_inducing)
        minibatch = batch is not None
        if minibatch and self.learning_rate > 0 and not method.learns_on_minibatches:
            able = [nm for nm in method_names() if get_method(nm).learns_on_minibatches]
            raise ValueError(f"{self.method.upper()} cannot learn hyperparameters on minibatches "
                             f"({method.minibatch_refusal}): use method={able[0]!r} for minibatches, or "
                             f"method={self.method!r} with batch_size=None")
        from ..compute.cluster import borrowed_client

        refined = self.refine_seconds_ = None
        with ckpt.writing() if ckpt is not None else contextlib.nullcontext(), \
                borrowed_client(client, self.scheduler) as c:
            chunks = RowChunks.from_arrays(c, ypm, self.chunk_rows_, X=Xs)
            try:
                if resumed is None:
                    params = GPCParams(kmeans_inducing(Xs, m, seed), 1.0, np.full(d, math.sqrt(d)),
                                       kernel_name(self.kernel))
                    adam = Adam(params.to_vector().size, float(self.learning_rate))
                    state = EPState(params, Factor.zero(m), adam)
                else:
                    state, sites = resumed
                    if method.keeps_sites:
                        state.sites = place_sites(c, chunks, sites, n)

                def after(rec, st):
                    if ckpt is not None:  # an interruption loses at most the iteration in progress
                        ckpt.write(st, key, c)
                    if callback is not None:
                        callback(FitEvent(self.method, rec.iteration, rec.evidence, "log Z",
                                          time.perf_counter() - t_start, total=int(self.max_iter),
                                          values={"train_error": rec.train_error, "grad_norm": rec.grad_norm},
                                          record=rec, model=st))

                try:
                    run_fit(chunks, state, method, int(self.max_iter), share=float(self.finish_share),
                            damping=self._damping(n), learn=self.learning_rate > 0,
                            learn_inducing=bool(self.learn_inducing), batch_size=batch, seed=seed,
                            callback=after, time_budget=time_budget)
                    broke = None
                except FloatingPointError as e:
                    if not state.records:
                        raise
                    broke = e
                # the model: the q of the last record's evidence (EPState.judged); after minibatches, its
                # factor re-made from every row
                self.finish_iter_ = 0 if batch is None else len(in_finish(state.records, n))
                final = EPState(*state.judged(), state.adam)
                if broke is None and minibatch and not method.keeps_sites and self.refine_passes > 0:
                    refined = self._refine(chunks, final, method)
            finally:
                chunks.release()
        self.params_, self.factor_, self.records_ = final.params, final.factor, state.records
        self.evidence_ = state.records[-1].evidence if refined is None else refined
        self.n_iter_ = len(state.records)
        self.best_iteration_ = self.n_iter_
        self._keep_best(state, broke, batch=batch is None)
        self._set_units()
        if ckpt is not None and not keep_checkpoint:
            ckpt.remove()
        return self

    def _refine(self, chunks, state, method) -> float:
        """After a fit on minibatches: the tied factor re-made from every row at the final hyperparameters
        (:func:`daskgp.gpc.fit.refine_factor`), said in one line; the refined q's evidence (nats)."""
        ev, seconds = refine_factor(chunks, state, method, int(self.refine_passes))
        self.refine_seconds_ = seconds
        log.info("daskgp: %s's factor re-made from all %s rows at the final hyperparameters (%d pass%s, "
                 "%.1f s): evidence %.1f nats", method.name.upper(), f"{chunks.n:,}", self.refine_passes,
                 "" if self.refine_passes == 1 else "es", seconds, ev)
        return ev

    def _set_units(self) -> None:
        p = self.params_
        self.kernel_ = ard_kernel(p.kernel, p.variance, p.lengthscales * self.x_scale_)
        self.likelihood_ = Probit()

    def _fitted_state(self) -> Saved:
        p, rec = self.params_, self.records_
        arrays = {"Z": p.Z, "lengthscales": p.lengthscales, "factor_T": self.factor_.T,
                  "factor_c": self.factor_.c, "x_mean": self.x_mean_, "x_scale": self.x_scale_,
                  "record_iteration": np.array([r.iteration for r in rec], dtype=np.int64),
                  "record_evidence": np.array([r.evidence for r in rec], dtype=float),
                  "record_train_error": np.array([r.train_error for r in rec], dtype=float),
                  "record_grad_norm": np.array([r.grad_norm for r in rec], dtype=float),
                  "record_rows": np.array([r.rows for r in rec], dtype=np.int64)}
        values = {"variance": p.variance, "kernel": p.kernel, "evidence": self.evidence_,
                  "n_iter": self.n_iter_, "best_iteration": self.best_iteration_,
                  "batch_size": self.batch_size_, "finish_iter": self.finish_iter_}
        return Saved({}, arrays, values)

    def _restore_fitted(self, saved: Saved) -> None:
        a, v = saved.arrays, saved.values
        self.params_ = GPCParams(a["Z"], v["variance"], a["lengthscales"], v["kernel"])
        self.factor_ = Factor(a["factor_T"], a["factor_c"])
        self.x_mean_, self.x_scale_ = a["x_mean"], a["x_scale"]
        rows = a.get("record_rows", np.zeros(len(a["record_iteration"]), int))  # (older models: none)
        self.records_ = [IterationRecord(int(i), float(e), float(t), float(g), rows=int(r))
                         for i, e, t, g, r in zip(a["record_iteration"], a["record_evidence"],
                                                  a["record_train_error"], a["record_grad_norm"], rows,
                                                  strict=True)]
        self.evidence_, self.n_iter_, self.best_iteration_ = v["evidence"], v["n_iter"], v["best_iteration"]
        # a model saved before batch_size could be 'auto' used its batch_size as given
        self.batch_size_ = v.get("batch_size", self.batch_size)
        self.finish_iter_ = int(v.get("finish_iter", 0))
        self._set_units()

    def _checkpoint_key(self, X, ypm, seed: int) -> str:
        """What a checkpoint must match: the data (:func:`daskgp.core.fingerprint.data_token`) and every
        setting that shapes the iterations."""
        from ..core.fingerprint import data_token

        return (f"{data_token(X, ypm)}|m={int(self.n_inducing)}|{self.method}|"
                f"chunk_rows={self.chunk_rows_}|batch={self.batch_size_}|damping={self.damping}|"
                f"lr={self.learning_rate}|"
                f"learn_inducing={bool(self.learn_inducing)}|seed={seed}"
                + ("" if self.batch_size_ is None else f"|finish={float(self.finish_share)}")
                + ("" if kernel_name(self.kernel) == "rbf" else f"|kernel={kernel_name(self.kernel)}"))

    def _keep_best(self, state, broke, batch: bool) -> None:
        """A fit that broke down (non-finite) or collapsed (:func:`daskgp.gpc.fit.collapsed`; batch fits,
        whose evidence is exact) keeps its best iterate, with scikit-learn's ConvergenceWarning saying so.
        Before :data:`~daskgp.gpc.fit.SETTLE_ITERATIONS` there is no best: a breakdown keeps the last finite
        iterate."""
        if state.best is None:
            if broke is not None:
                warnings.warn(f"{broke}; the model keeps iteration {len(state.records)}, the last finite one",
                              ConvergenceWarning, stacklevel=3)
            return
        best_it, params, factor = state.best
        best, last = state.records[best_it - 1].evidence, state.records[-1].evidence
        if broke is None and not (batch and collapsed(best, last)):
            return
        why = (f"{broke}" if broke is not None else
               f"{self.method.upper()}'s evidence fell from {best:.1f} nats at iteration {best_it} to "
               f"{last:.1f} at iteration {len(state.records)} (the fit collapsed)")
        self.params_, self.factor_, self.evidence_, self.best_iteration_ = params, factor, best, best_it
        warnings.warn(f"{why}; the model keeps iteration {best_it}, its best (evidence {best:.1f} nats)",
                      ConvergenceWarning, stacklevel=3)

    def to_dataset(self, feature_names=None):
        """The fitted model as labelled arrays (:func:`daskgp.gpc.dataset.classifier_dataset`)."""
        return classifier_dataset(self, feature_names)

    def _proba_block(self, X) -> np.ndarray:
        Xs = (np.asarray(X, float) - self.x_mean_) / self.x_scale_
        mu, var = Posterior(self.params_, self.factor_).predict_latent(Xs)
        return Probit.predict_proba(mu, var)

    def predict_proba(self, X):
        """(n, 2): the probabilities of classes_[0] and classes_[1]; dask arrays chunk-wise."""
        check_is_fitted(self, "params_")
        import dask.array as da

        if isinstance(X, da.Array):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(f"X must be (n, {self.n_features_in_}), got {X.shape}")
            p1 = X.rechunk((X.chunks[0], -1)).map_blocks(self._proba_block, dtype=float, drop_axis=1)
            return da.stack([1 - p1, p1], axis=1)
        X = new_data(self, X)
        p1 = np.concatenate([self._proba_block(X[a:a + 10_000]) for a in range(0, len(X), 10_000)])
        return np.column_stack([1 - p1, p1])

    def decision_function(self, X):
        """The latent mean scaled as the probit's argument, Φ⁻¹(p(classes_[1])): positive for classes_[1]."""
        from scipy.special import ndtri

        p = self.predict_proba(X)[:, 1]
        return ndtri(np.clip(p, 1e-300, 1 - 1e-16))

    def predict(self, X):
        p = self.predict_proba(X)[:, 1]
        return self.classes_[(np.asarray(p) > 0.5).astype(int)]
