"""The Bayesian GPLVM (Titsias & Lawrence 2010) in the distributed form of Gal, van der Wilk & Rasmussen
(2014): the latent inputs' q(x_i) = N(μ_i, diag S_i) live with their chunk of rows on the Dask workers.

Fitting alternates the paper's two map-reduce steps:

- **global**: L-BFGS-B over (Z, σ², l, β) with the local parameters fixed, every evaluation a map of the
  chunks' psi-statistics, a tree reduce, and a map of their gradient contributions
  (:func:`daskgp.sparse.fit.fit_global`);
- **local**: every chunk optimises its own (μ_i, S_i) on its worker, all chunks in parallel, the other
  chunks' statistics fixed (:meth:`daskgp.sparse.chunks.ChunkedRows.local_step`). A parallel block step
  could lower the joint bound, so a local step that does is undone (the bound trace never decreases).

The q(x_i) live only on the workers and are never gathered whole (:mod:`daskgp.sparse.gplvm_latent`):
after every round each chunk's q(x_i) is copied to another worker, and a worker lost mid-round takes only
copies that survive elsewhere (the chunks are placed again from them and the data, and the round is
redone, ending where an undisturbed fit ends); with ``checkpoint=`` they are streamed chunk by chunk into the
commit a SIGINT or a crash resumes from (:class:`GPLVMCheckpoint`, a :class:`daskgp.runs.fits.FitStore`).
Client memory is one chunk's q(x_i), flat in n; a dask Y fitted on a cluster that outlives the fit keeps
its embedding there too (dask arrays).

New points (:meth:`BayesianGPLVM.transform`, :meth:`~BayesianGPLVM.impute`,
:meth:`~BayesianGPLVM.score_samples`) get their q(x*) by maximising the bound of the training set plus that
point on its observed output dimensions; the gain in the bound approximates log p(y* | Y), which
:class:`daskgp.sparse.gplvm_classifier.GPLVMClassifier` compares across per-class models (the paper's MNIST
experiment).
"""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..core.constraints import ValidatedParams, at_least, real_in
from ..core.events import FitEvent, event_callback
from ..core.runtime import FitRuntime, fit_runtime
from ..core.validation import check_X, is_constant, new_data, seed_from
from ..inducing.placement import SAMPLE_ROWS, kmeans_centres
from ..inducing.stats import SuffStats
from ..model.kernels import ard_kernel, kernel_name
from ..model.likelihoods import Gaussian
from ..runs.models import Saved, SavedModel
from .bound import GlobalParams, bound_and_grads
from .chunks import ChunkedRows, LocalRows
from .fit import SparsePosterior
from .gplvm_checkpoint import GPLVMCheckpoint
from .gplvm_latent import RestartCopies, embedding, latent_blocks, place_latent, take_rows
from .gplvm_points import new_points
from .gplvm_rounds import run_rounds
from .gplvm_start import principal_latents

__all__ = ["BayesianGPLVM", "GPLVMCheckpoint"]


class BayesianGPLVM(SavedModel, ValidatedParams, TransformerMixin, BaseEstimator):
    """Bayesian GPLVM with an RBF-ARD kernel over ``n_components`` latent dimensions, fitted on a Dask
    cluster with the local parameters kept on the workers.

    n_inducing: m; n_outer: global/local rounds; global_iter, local_iter: L-BFGS-B iterations per step;
    chunk_rows: rows per chunk, which are also the blocks of the local step (at 10⁶ rows 1,000 reached the
    best bound for the iterations, for at most an eighth more time than larger chunks:
    benchmarks/gplvm_chunks.py); noise_init: initial noise variance relative to the (scalar) variance of Y;
    scheduler: a dask-scheduler address (default: this process's client, else a local cluster);
    random_state: seeds the initial inducing inputs; kernel: 'rbf' or an RBF kernel object, the one kernel
    whose psi-statistics are closed-form (any other is refused in one line).

    Fitted: ``embedding_`` (n, q) latent means and ``embedding_var_`` (n, q) variances (numpy; dask arrays
    held on the workers for a dask Y fitted on a cluster that outlives the fit), ``params_``,
    ``bound_`` and ``bound_trace_`` (nats, standardised Y; one entry per global iteration and per local
    step), ``trace_seconds_`` (the fit's wall seconds at each entry of the trace, s; NaN for entries of a
    resumed checkpoint that did not record them), ``lengthscales_`` (q,) (large = a latent dimension
    switched off), ``noise_variance_`` (Y units²) and ``likelihood_``, ``kernel_`` (the kernel over the latent
    space: variance in Y units², lengthscales in latent units), ``fit_info_``. ``save(path)`` and
    ``BayesianGPLVM.load(path)`` keep a fitted model (:mod:`daskgp.runs.models`).
    """

    def __init__(self, n_components: int = 2, n_inducing: int = 30, n_outer: int = 10, global_iter: int = 20,
                 local_iter: int = 20, chunk_rows: int = 1000, noise_init: float = 0.01,
                 scheduler: str | None = None, random_state=0, kernel="rbf"):
        self.n_components, self.n_inducing, self.n_outer = n_components, n_inducing, n_outer
        self.global_iter, self.local_iter, self.chunk_rows = global_iter, local_iter, chunk_rows
        self.noise_init, self.scheduler, self.random_state = noise_init, scheduler, random_state
        self.kernel = kernel

    _parameter_constraints = {
        "n_components": [at_least(1)], "n_inducing": [at_least(1)], "n_outer": [at_least(1)],
        "global_iter": [at_least(1)], "local_iter": [at_least(0)],  # 0: no local steps
        "chunk_rows": [at_least(1)], "noise_init": [real_in(0, 1)],  # relative to the variance of Y
        "scheduler": [str, None], "random_state": ["random_state"],
        "kernel": "no_validation",  # checked in check_fits: only the RBF has closed-form psi-statistics
    }

    def check_fits(self, n: int, p: int) -> None:
        """Raise ValueError, before any work, where this configuration cannot fit n rows of p features: the
        constructor's parameters (scikit-learn's validation), then what depends on the data."""
        self._validate_params()
        if kernel_name(self.kernel) != "rbf":
            raise ValueError(f"the Bayesian GPLVM needs the RBF kernel (its psi-statistics, the expectations "
                             f"of the kernel under q(x), are closed-form only for it), got {self.kernel!r}")
        if not self.n_components <= p:
            raise ValueError(f"n_components={self.n_components} needs at least as many output dimensions; "
                             f"Y has {p} feature(s)")
        if not self.n_inducing <= n:
            raise ValueError(f"n_inducing must be in 1..{n} (the number of rows), got {self.n_inducing}")

    def fit(self, Y, y=None, callback=None, client=None, checkpoint=None, resume: bool = False,
            keep_checkpoint: bool = False, *, runtime: FitRuntime | None = None):
        """Fit on Y (n, p): numpy (no missing values), or a dask array with known chunk sizes (e.g. a Parquet
        table read on the workers, :func:`daskgp.datasets.read_table`), whose rows are then checked,
        standardised, projected and fitted where its chunks are, never gathered here; the two give the same
        fit for the same rows. ``callback(event)`` (a :class:`daskgp.FitEvent`: step, bound in nats) after
        every global iteration and local step;
        ``client``: a distributed Client, or "in-process" to compute every chunk in this process (used
        inside a Dask task; numpy only).

        The latent means start at the leading principal components of the standardised rows, scaled to
        unit variance: the p × p Gram matrix summed over row chunks in a fixed order, then its
        eigenvectors (each signed so that its largest entry is positive). A worker lost mid-round takes its
        chunks' q(x_i) with it: they are placed again from the copies kept on other workers after the last
        round and the round is redone (at most ``MAX_REPLACEMENTS`` times). ``checkpoint``: a folder path (or
        :class:`GPLVMCheckpoint`) committed after every round, tied to these data and settings; an existing
        one is refused unless ``resume``, which continues from it to ``n_outer`` rounds in all. Removed when
        the fit finishes unless ``keep_checkpoint``. ``runtime``: a :class:`daskgp.FitRuntime` with these
        keywords instead (not both). Returns self. Client memory: one chunk's q(x_i) at a time, whatever n
        (a checkpoint streams them to its array file); ``embedding_`` and ``embedding_var_`` (n, q) are
        numpy arrays for a numpy Y, and dask arrays held on the workers for a dask Y fitted on a cluster
        that outlives the fit (a client given, or the process's default one)."""
        import dask.array as da

        from ..core.validation import column_moments, rows_or_dask

        rt = fit_runtime(runtime, "BayesianGPLVM", client=client, callback=callback,
                         checkpoint=checkpoint, resume=resume, keep_checkpoint=keep_checkpoint)
        client, callback, checkpoint = rt.client, rt.callback, rt.checkpoint
        resume, keep_checkpoint = rt.resume, rt.keep_checkpoint

        lazy = isinstance(Y, da.Array)
        if lazy and isinstance(client, str) and client == "in-process":
            raise ValueError('client="in-process" fits numpy rows; a dask Y needs a cluster')
        Y = rows_or_dask(self, Y, min_rows=2)
        n, p = Y.shape
        self.check_fits(n, p)
        callback = event_callback(callback, lambda e: (e.step, e.objective), "BayesianGPLVM")
        seed = seed_from(self.random_state)
        q = int(self.n_components)
        mean, sd, overall = column_moments(Y)
        if is_constant(sd, mean).all():  # every row the same point: no latent structure
            raise ValueError("every row of Y is the same point: a GPLVM has no latent structure to find "
                             "(check the data)")
        self.y_mean_, self.y_scale_ = mean, overall or 1.0
        Ys = (Y - self.y_mean_) / self.y_scale_  # lazy for a dask Y: standardised where its chunks are read
        m = int(self.n_inducing)
        trace: list[float] = []
        info = {"n_evaluations": 0, "seconds_evaluating": 0.0, "local_steps_undone": 0,
                "seconds_local": 0.0, "workers_lost": 0}
        ckpt, key, start = self._open_checkpoint(checkpoint, resume, Y, seed)
        resumed = ckpt.read(key, n, q, m) if resume else None

        secs: list[float] = []  # the fit's wall seconds at each point of the trace, across resumes

        def record(F):
            trace.append(float(F))
            del secs[len(trace) - 1:]  # a redone round cut the trace back
            secs.extend([math.nan] * (len(trace) - 1 - len(secs)) + [clock[0] + time.perf_counter()])
            if callback is not None:
                callback(FitEvent("gplvm", len(trace), float(F), "bound", secs[-1]))

        def commit(rounds, theta, rows):
            if ckpt is not None:  # an interruption loses at most the round in progress
                # q(x_i) streamed from the workers chunk by chunk into the checkpoint's array file
                ckpt.write(key, rounds, theta, latent_blocks(rows), n, q, trace, info,
                           seconds=secs[:len(trace)])

        def begin(rows):
            """(the round to start from, θ): the checkpoint's, with its q(x_i) placed on the chunks, or the
            principal components of the rows, which the chunks get where they are. ``rows[0]`` (the rows
            without latent state) is replaced by the chunks with it."""
            if resumed is not None:
                start, theta, latent, done_trace, done = resumed
                trace.extend(done_trace)
                secs.extend(ckpt.seconds())
                clock[0] = (secs[-1] if secs else 0.0) - time.perf_counter()
                info.update(done)
                rows[0] = place_latent(rows[0], latent)
                return start, theta
            principal_latents(rows, q)
            # k-means on a sample of the latent means, gathered alone (kmeans_inducing's sample, row for row)
            idx = np.sort(np.random.default_rng(seed).choice(n, size=min(n, SAMPLE_ROWS), replace=False))
            Z = kmeans_centres(take_rows(rows[0], "mu", idx), m, seed)
            return 0, GlobalParams(Z + 1e-3, 1.0, np.ones(q), noise=self.noise_init)

        from ..compute.cluster import borrowed_client

        t_start = time.perf_counter()
        clock = [-t_start]  # seconds of the fit = clock[0] + perf_counter(); a resume moves it on
        with ckpt.writing() if ckpt is not None else contextlib.nullcontext():
            if client == "in-process":  # inside one task (GPLVMClassifier): no scheduler round trips
                rows = [LocalRows.from_arrays(Ys, self.chunk_rows)]
                start, theta = begin(rows)
                theta, stats = run_rounds(rows, theta, self._round_settings(), info, record, trace, start,
                                          commit, None)
                self.embedding_, self.embedding_var_ = (rows[0].field(k) for k in ("mu", "S"))
            else:
                lent = borrowed_client(client, self.scheduler)
                with lent as c:
                    source = ChunkedRows.from_arrays(c, Ys, self.chunk_rows)
                    rows = [source]
                    try:
                        start, theta = begin(rows)
                        source.release()  # its rows live on in the latent chunks; lost ones: from the data
                        def committed(round_):  # the checkpoint's q(x_i), if it holds that round
                            if ckpt is None or ckpt.iterations() != round_:
                                return None
                            return ckpt.read(key, n, q, m)[2]

                        theta, stats = run_rounds(rows, theta, self._round_settings(), info, record, trace,
                                                  start, commit, RestartCopies(source, committed))
                        # a dask Y on a cluster that outlives the fit: the embedding stays where it is
                        self.embedding_, self.embedding_var_ = embedding(rows[0], q, lazy and not lent.owned)
                    finally:
                        rows[0].release()
        info["seconds"] = time.perf_counter() - t_start
        self.params_, self.bound_trace_, self.fit_info_ = theta, trace, info
        self.trace_seconds_ = secs[:len(trace)]
        self.stats_ = stats
        self.A_cols_ = n * (sd / self.y_scale_) ** 2  # Σ_i Ys_ij², from the moments
        self.n_features_in_ = p
        self._set_fitted()
        if ckpt is not None and not keep_checkpoint:
            ckpt.remove()
        return self

    def _set_fitted(self) -> None:
        """What follows from ``params_``, ``stats_`` and the moments: the bound, q(u), the units."""
        theta = self.params_
        self.bound_ = bound_and_grads(self.stats_, theta, grads=False)
        self.posterior_ = SparsePosterior.from_stats(theta, self.stats_)
        self.lengthscales_ = theta.lengthscales
        self.noise_variance_ = self.y_scale_**2 * theta.noise
        self.likelihood_ = Gaussian(self.noise_variance_)
        self.kernel_ = ard_kernel(theta.kernel, theta.variance * self.y_scale_**2, theta.lengthscales)

    def _fitted_state(self) -> Saved:
        theta, st = self.params_, self.stats_
        arrays = {"Z": theta.Z, "lengthscales": theta.lengthscales,
                  "embedding": np.asarray(self.embedding_), "embedding_var": np.asarray(self.embedding_var_),
                  "y_mean": self.y_mean_, "A_cols": self.A_cols_,
                  "stats_C": st.C, "stats_D": st.D, "bound_trace": np.asarray(self.bound_trace_, float),
                  "trace_seconds": np.asarray(self.trace_seconds_, float)}
        values = {"variance": theta.variance, "noise": theta.noise, "kernel": theta.kernel,
                  "y_scale": self.y_scale_, "stats": [st.n, st.A, st.B, st.KL], "fit_info": self.fit_info_}
        return Saved({}, arrays, values)

    def _restore_fitted(self, saved: Saved) -> None:
        a, v = saved.arrays, saved.values
        self.params_ = GlobalParams(a["Z"], v["variance"], a["lengthscales"], noise=v["noise"],
                                    kernel=v["kernel"])
        n, A, B, KL = v["stats"]
        self.stats_ = SuffStats(int(n), A, B, a["stats_C"], a["stats_D"], KL)
        self.embedding_, self.embedding_var_ = a["embedding"], a["embedding_var"]
        self.y_mean_, self.y_scale_, self.A_cols_ = a["y_mean"], v["y_scale"], a["A_cols"]
        self.bound_trace_ = [float(b) for b in a["bound_trace"]]
        self.trace_seconds_ = [float(t) for t in a["trace_seconds"]]
        self.fit_info_ = v["fit_info"]
        self._set_fitted()

    def _round_settings(self) -> tuple[int, int, int]:
        """(rounds, global iterations, local iterations) of a fit."""
        return int(self.n_outer), int(self.global_iter), int(self.local_iter)

    def _open_checkpoint(self, checkpoint, resume: bool, Y, seed: int):
        """(the checkpoint or None, its key, 0) after checking ``checkpoint`` against ``resume``."""
        if checkpoint is None:
            if resume:
                raise ValueError("resume=True needs the checkpoint to resume from")
            return None, None, 0
        from ..core.fingerprint import data_token

        ckpt = checkpoint if isinstance(checkpoint, GPLVMCheckpoint) else GPLVMCheckpoint(checkpoint)
        key = (f"{data_token(Y, None)}|q={int(self.n_components)}|m={int(self.n_inducing)}|seed={seed}"
               f"|global={int(self.global_iter)}|local={int(self.local_iter)}|chunk={int(self.chunk_rows)}"
               f"|noise_init={float(self.noise_init)!r}")
        if not resume and ckpt.exists():
            raise FileExistsError(f"{ckpt.path} holds an interrupted fit: pass resume=True to continue it, "
                                  "or remove it to start afresh")
        return ckpt, key, 0

    def fit_transform(self, Y, y=None, **fit_params):
        return self.fit(Y, **fit_params).embedding_

    def _check_new(self, Y, allow_missing: bool = False) -> np.ndarray:
        check_is_fitted(self, "posterior_")
        Y = new_data(self, Y, allow_nan=allow_missing)
        if allow_missing and np.isnan(Y).all(axis=1).any():
            raise ValueError("a row of Y has no observed value: nothing to condition on")
        return Y

    def _points_block(self, Y, n_iter: int):
        """(μ, S, gain, filled Y in y units) for a block of new rows, computed in this process."""
        mu, S, gain, filled = new_points((Y - self.y_mean_) / self.y_scale_, self.stats_, self.A_cols_,
                                         self.posterior_, n_iter)
        return mu, S, gain, filled * self.y_scale_ + self.y_mean_

    def row_blocks(self, Y) -> list[np.ndarray]:
        """New rows Y (n, p) in the blocks that are scored as one task each (a tenth of ``chunk_rows``:
        every row is its own small optimisation, so blocks smaller than the training chunks spread better)."""
        step = max(1, int(self.chunk_rows) // 10)
        return [Y[a:a + step] for a in range(0, len(Y), step)]

    def score_block(self, Y, n_iter: int = 50) -> np.ndarray:
        """:meth:`score_samples` of one block of already validated rows Y (n, p), computed in this process
        (what a task on a worker runs: the fitted model travels with it)."""
        return self._log_density(self._points_block(Y, n_iter)[2])

    def _new_points(self, Y, n_iter: int, client=None, allow_missing: bool = False):
        Y = self._check_new(Y, allow_missing)
        from ..compute.cluster import borrowed_client

        with borrowed_client(client, self.scheduler) as c:  # blocks of rows in parallel on the workers
            parts = c.gather([c.submit(self._points_block, b, n_iter, pure=False)
                              for b in self.row_blocks(Y)])
        return tuple(np.concatenate([pt[k] for pt in parts]) for k in range(4))

    def transform(self, Y, n_iter: int = 50, client=None):
        """Latent means (n, q) of new rows Y (n, p), q(x*) optimised against the fitted model."""
        return self._new_points(Y, n_iter, client)[0]

    def impute(self, Y, n_iter: int = 50, client=None) -> np.ndarray:
        """Y (n, p) with NaN for missing entries → Y with those filled by the predictive mean, given q(x*)
        fitted to each row's observed entries (y units)."""
        filled = self._new_points(Y, n_iter, client, allow_missing=True)[3]
        Y = np.asarray(Y, dtype=float).reshape(filled.shape)
        return np.where(np.isnan(Y), filled, Y)  # observed entries exactly as given

    def score_samples(self, Y, n_iter: int = 50, client=None) -> np.ndarray:
        """Approximate log density (n,) of each new row in the units of Y (nats): the gain in the bound when
        the row joins the training set, minus p·log(scale) for the standardisation."""
        return self._log_density(self._new_points(Y, n_iter, client)[2])

    def _log_density(self, gain) -> np.ndarray:
        """Bound gains (standardised units) → log densities in the units of Y: the standardisation's
        Jacobian, −p·log(scale)."""
        return gain - self.n_features_in_ * math.log(self.y_scale_)

    def predict_latent(self, mu) -> np.ndarray:
        """The predictive mean of Y (n, p) at latent points mu (n, q) (y units)."""
        check_is_fitted(self, "posterior_")
        mean, _ = self.posterior_.predict_block(check_X(mu, "mu", min_rows=1))
        return mean * self.y_scale_ + self.y_mean_


def __getattr__(name: str):
    # the classifier's old path (before its own module): pickles and imports made then still find it
    if name == "GPLVMClassifier":
        from .gplvm_classifier import GPLVMClassifier

        return GPLVMClassifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
