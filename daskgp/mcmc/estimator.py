"""A scikit-learn regressor whose GP hyperparameters are sampled, not optimised.

``BayesianGPRegressor().fit(X, y)`` standardises the data, samples p(θ | y) with chains on the Dask cluster
(:func:`daskgp.mcmc.chains.sample`, SGLD by default), and ``predict(X, return_std=True)`` returns the
posterior predictive that mixes over the sampled θ (:func:`daskgp.exact.predict.predictive`), in the
units of y.
"""

from __future__ import annotations

import math
import os
import tempfile
import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from ..core.constraints import ValidatedParams, at_least, real_in
from ..core.events import FitEvent
from ..core.runtime import FitRuntime, fit_runtime
from ..core.validation import fit_data, new_data, seed_from
from ..datasets import fitted_scaler, scaler_meta
from ..exact.predict import predictive
from ..model.kernels import Kernel, ard_kernel, kernel_name, make_kernel
from ..model.likelihoods import Gaussian
from ..model.params import ExactParams
from ..runs.models import Saved, SavedModel, plain
from .chains import sample
from .config import SamplerConfig, fingerprint
from .diagnostics import open_run, post_warmup, run_fidelity, run_summary

__all__ = ["BayesianGPRegressor", "thinned_log_draws", "run_event", "run_progress"]


def run_event(status, method: str) -> FitEvent:
    """A run's status (:class:`daskgp.mcmc.diagnostics.RunStatus`) as the one progress event every fit
    reports: step — iterations per chain (the running chains' least count when beyond the committed one);
    objective — the smallest bulk or tail ESS of the kept draws (NaN before there are any), named 'min ESS';
    values — R-hat, the phase and the ETA (s)."""
    ess = [v for v in (status.ess_bulk, status.ess_tail) if v is not None]
    return FitEvent(method, int(status.running or status.done), float(min(ess)) if ess else math.nan,
                    "min ESS", float(status.elapsed), total=int(status.n_iter),
                    values={"r_hat": status.rhat, "phase": status.phase, "eta": status.eta}, record=status)


def run_progress(progress, callback, method: str):
    """One function of the run's status that calls ``progress(status)`` and ``callback(event)`` (either
    may be None; None when both are)."""
    if callback is None:
        return progress

    def both(status):
        if progress is not None:
            progress(status)
        callback(run_event(status, method))
    return both


def thinned_log_draws(dt, n_draws: int) -> np.ndarray:
    """(S, p) log-parameters, S ≤ n_draws, evenly spaced over the post-warmup draws of all chains."""
    sampled, _ = post_warmup(dt)
    post = sampled["posterior"].to_dataset()
    names = dt.attrs["param_names"]
    flat = np.column_stack([post[nm].values.reshape(-1) for nm in names])  # (chains·draws, p)
    idx = np.unique(np.linspace(0, len(flat) - 1, min(n_draws, len(flat))).astype(int))
    return np.log(flat[idx])


class BayesianGPRegressor(SavedModel, ValidatedParams, RegressorMixin, BaseEstimator):
    """Zero-mean GP regression with hyperparameters integrated out by MCMC.

    kernel: 'rbf' | 'matern32' | 'matern52' (``ard``: one lengthscale per input) or a kernel object of
    :mod:`daskgp.model.kernels` (its type and its ``ard`` count; its hyperparameters are sampled); method: a
    registered sampler (:func:`daskgp.mcmc.samplers.sampler_names`: 'sghmc', 'sgld', 'mh', 'hmc') or 'auto',
    the default: the one the data's size calls for by the samplers' measured crossovers (today HMC up to 1,300
    rows, SGHMC beyond; the fitted run's configuration names it);
    n_chains, n_iter: chains and iterations per chain (default 2,000); target_ess: instead sample until every
    parameter's bulk and tail ESS reach it and every R-hat < 1.01 (n_iter, default 50,000, is then a cap);
    n_predict_draws: posterior draws the predictive mixes over; level: central interval of
    :meth:`predict_interval`; random_state: seeds the chains (an int for a reproducible run); out: zarr store
    for the run (default: a temporary folder); scheduler: a dask-scheduler address (default: this process's
    current client, else a local cluster started for the fit); device: where each chain's kernel products
    run: 'cpu', 'gpu' (cupy; an error on a worker without one) or 'auto'; sampler_options: further
    :class:`daskgp.mcmc.config.SamplerConfig` fields (e.g. n_probes; not the ones above) and the method's own
    settings by name (e.g. SGLD's step_start, SGHMC's friction: see its ``settings`` dataclass).

    Fitted attributes: ``run_`` (ArviZ DataTree of the run), ``log_draws_`` (S, p), ``x_mean_`` and
    ``x_scale_`` (d,), ``y_mean_`` and ``y_scale_`` (the standardising moments, named as in every daskgp
    regressor; also as scikit-learn scalers ``x_scaler_``, ``y_scaler_``), ``X_train_``/``y_train_``
    (standardised), ``param_names_``, ``n_iter_`` (iterations per chain, warmup included),
    ``n_features_in_`` and, for DataFrames, ``feature_names_in_``, ``kernel_`` (the kernel at the posterior
    median of the hyperparameters, X and y units, one lengthscale per feature), ``noise_variance_`` (its
    noise, y units²), ``likelihood_`` (the Gaussian of that noise) and ``params_`` (those medians in the
    standardised units, a :class:`daskgp.model.params.ExactParams`, as every estimator's ``params_`` is its
    family's :class:`~daskgp.model.params.Parameters`).
    ``save(path)`` and ``BayesianGPRegressor.load(path)`` keep a fitted model with its run's draws in one
    file (:mod:`daskgp.runs.models`); :meth:`from_run` reads a run's store.
    """

    def __init__(self, kernel="rbf", ard: bool = False, method: str = "auto", n_chains: int = 4,
                 n_iter: int | None = None, target_ess: int | None = None, n_predict_draws: int = 50,
                 level: float = 0.95, random_state=0, out: str | None = None, scheduler: str | None = None,
                 sampler_options: dict | None = None, device: str = "cpu"):
        self.kernel, self.ard, self.method = kernel, ard, method
        self.n_chains, self.n_iter, self.target_ess = n_chains, n_iter, target_ess
        self.n_predict_draws = n_predict_draws
        self.level, self.random_state, self.out, self.scheduler = level, random_state, out, scheduler
        self.sampler_options, self.device = sampler_options, device

    _parameter_constraints = {
        "kernel": "no_validation",  # a name in any case or a kernel object: kernel_name() checks it
        "ard": ["boolean"],
        "method": "no_validation",  # the registry's names, which entry points can extend: SamplerConfig
        "n_chains": [at_least(1)], "n_iter": [at_least(1), None], "target_ess": [at_least(1), None],
        "n_predict_draws": [at_least(1)], "level": [real_in(0, 1)], "random_state": ["random_state"],
        "out": [str, os.PathLike, None], "scheduler": [str, None], "sampler_options": [dict, None],
        "device": [StrOptions({"auto", "cpu", "gpu"})],
    }

    # the SamplerConfig fields that constructor parameters set (sampler_options may not set them too)
    _OWN = {"kernel": "kernel", "ard": "ard", "method": "method", "n_chains": "n_chains", "n_iter": "n_iter",
            "target_ess": "target_ess", "seed": "random_state", "device": "device"}

    def _config(self) -> SamplerConfig:
        self._validate_params()
        options = dict(self.sampler_options or {})
        both = sorted(set(options) & set(self._OWN))
        if both:
            raise ValueError(f"sampler_options sets {both}, which BayesianGPRegressor takes as "
                             f"{[self._OWN[k] for k in both]}: give them there")
        obj = isinstance(self.kernel, Kernel)
        return SamplerConfig.from_dict({**options, "kernel": kernel_name(self.kernel),
                                        "ard": bool(self.kernel.ard) if obj else self.ard,
                                        "method": self.method, "n_chains": self.n_chains,
                                        "n_iter": self.n_iter, "target_ess": self.target_ess,
                                        "seed": seed_from(self.random_state), "device": self.device})

    def fit(self, X, y, progress=None, client=None, callback=None, *, runtime: FitRuntime | None = None):
        """Sample the hyperparameter posterior for X (n, d), y (n,); ``client``: a distributed Client to use
        (default: ``scheduler``, else this process's current client, else a local cluster started for the
        fit), as every daskgp estimator's ``fit`` takes it; ``callback``: called with a
        :class:`daskgp.FitEvent` after every committed block and as the running chains report (``step``:
        iterations per chain, ``objective``: the smallest bulk or tail ESS of the kept draws, NaN before
        there are any, ``values``: R-hat, phase, ETA; ``record``: the run's
        :class:`daskgp.mcmc.diagnostics.RunStatus`); ``progress``: 0.4's callback of the RunStatus alone.
        ``runtime``: a :class:`daskgp.FitRuntime` with ``client`` and ``callback`` instead of the keywords.
        Returns self."""
        rt = fit_runtime(runtime, "BayesianGPRegressor", client=client, callback=callback)
        client, callback = rt.client, rt.callback
        X, y = fit_data(self, X, y)
        cfg = self._config()
        progress = run_progress(progress, callback, cfg.for_rows(X.shape[0]).method)
        self._set_scalers(StandardScaler().fit(X), StandardScaler().fit(y[:, None]))
        Xs, ys = self.x_scaler_.transform(X), self.y_scaler_.transform(y[:, None])[:, 0]
        out = self.out
        if out is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="daskgp-run-")
            out = os.path.join(self._tmp.name, "run.zarr")
        from ..compute.cluster import borrowed_client

        meta = scaler_meta(self.x_scaler_, self.y_scaler_)
        if hasattr(self, "feature_names_in_"):
            meta["feature_names"] = [str(c) for c in self.feature_names_in_]
        with borrowed_client(client, self.scheduler) as client:
            self.run_ = sample(Xs, ys, cfg, out=out, client=client, overwrite=self.out is None,
                               progress=progress, data_meta=meta)
        self._set_posterior(Xs, ys)
        fid = run_fidelity(self.run_)
        if fid is not None and fid.judged and not fid.trustworthy:  # scikit-learn's way to say "not right"
            warnings.warn(f"the sampled posterior is not trustworthy: {'; '.join(fid.reasons)}",
                          ConvergenceWarning, stacklevel=2)
        return self

    @classmethod
    def from_run(cls, path, dataset=None, n_predict_draws: int = 50, level: float = 0.95):
        """A fitted estimator from a run on disk. ``dataset``: the :class:`daskgp.Dataset` it was sampled on
        (default: the copy stored in the run; a run of daskgp ≤ 0.2 stored none, and its data are then
        reloaded from the spec it recorded)."""
        from ..datasets import load_spec
        from ..runs.draws import stored_dataset

        dt = open_run(path)
        ds = dataset if dataset is not None else stored_dataset(dt) or load_spec(dt.attrs["data"])
        if fingerprint(ds.X_std, ds.y_std) != dt.attrs["fingerprint"]:
            raise ValueError(f"the data set differs from the one the run at {path} was sampled on")
        cfg = dt.attrs["config"]
        est = cls(kernel=cfg["kernel"], ard=cfg["ard"], method=cfg["method"], n_chains=cfg["n_chains"],
                  n_iter=cfg["n_iter"], target_ess=cfg.get("target_ess"), n_predict_draws=n_predict_draws,
                  level=level, random_state=cfg["seed"], out=str(path), device=cfg.get("device", "cpu"))
        est._set_scalers(ds.x_scaler, ds.y_scaler)
        est.run_ = dt
        est._set_posterior(ds.X_std, ds.y_std)
        est.n_features_in_ = ds.X.shape[1]
        names = list(ds.feature_names)
        if names != [f"x{j}" for j in range(len(names))]:  # real column names: predict checks them
            est.feature_names_in_ = np.asarray(names, dtype=object)
        return est

    def _set_scalers(self, x_scaler, y_scaler) -> None:
        self.x_scaler_, self.y_scaler_ = x_scaler, y_scaler
        self.x_mean_, self.x_scale_ = np.asarray(x_scaler.mean_, float), np.asarray(x_scaler.scale_, float)
        self.y_mean_, self.y_scale_ = float(y_scaler.mean_[0]), float(y_scaler.scale_[0])

    def _set_posterior(self, Xs, ys) -> None:
        self.X_train_, self.y_train_ = Xs, ys
        self.param_names_ = list(self.run_.attrs["param_names"])
        self.log_draws_ = thinned_log_draws(self.run_, self.n_predict_draws)
        self.n_iter_ = int(self.run_["posterior"].sizes["draw"])
        if "warmup_posterior" in self.run_.children:
            self.n_iter_ += int(self.run_["warmup_posterior"].sizes["draw"])
        self._set_units()

    def _set_units(self) -> None:
        """``kernel_`` and ``noise_variance_`` at the posterior median of the kept draws, in the data's units
        (the run's parameters are log variance, log lengthscale(s) and log noise of the standardised data),
        and ``params_``, the same medians in the standardised units the chains sampled."""
        cfg = self.run_.attrs["config"]
        post = post_warmup(self.run_)[0]["posterior"].to_dataset()
        med = {nm: float(np.nanmedian(post[nm].values)) for nm in self.param_names_}
        ls = np.array([med[nm] for nm in self.param_names_ if nm.startswith("lengthscale")])
        # one lengthscale per feature: an isotropic kernel of standardised inputs is ARD in X's units
        self.kernel_ = ard_kernel(cfg["kernel"], med["variance"] * self.y_scale_**2, ls * self.x_scale_)
        self.noise_variance_ = med["noise"] * self.y_scale_**2
        self.likelihood_ = Gaussian(self.noise_variance_)
        self.params_ = ExactParams(med["variance"], ls, med["noise"], kernel=cfg["kernel"])

    def _fitted_state(self) -> Saved:
        groups = {g: self.run_[g].to_dataset() for g in self.run_.children}
        values = {"y_mean": self.y_mean_, "y_scale": self.y_scale_, "n_iter": self.n_iter_,
                  "param_names": self.param_names_, "run_attrs": plain(dict(self.run_.attrs))}
        arrays = {"X_train": self.X_train_, "y_train": self.y_train_, "log_draws": self.log_draws_,
                  "x_mean": self.x_mean_, "x_scale": self.x_scale_}
        return Saved({}, arrays, values, groups)

    def _restore_fitted(self, saved: Saved) -> None:
        import xarray as xr

        a, v = saved.arrays, saved.values
        n = len(a["y_train"])
        self._set_scalers(fitted_scaler(a["x_mean"], a["x_scale"], n),
                          fitted_scaler([v["y_mean"]], [v["y_scale"]], n))
        self.run_ = xr.DataTree.from_dict({f"/{g}": ds for g, ds in saved.groups.items()})
        self.run_.attrs.update(v["run_attrs"])
        self.X_train_, self.y_train_, self.log_draws_ = a["X_train"], a["y_train"], a["log_draws"]
        self.param_names_, self.n_iter_ = list(v["param_names"]), int(v["n_iter"])
        self._set_units()

    def predictive(self, X):
        """The mixture predictive at X (m, d) as an xarray Dataset (mean, sd, lower, upper, …; y units)."""
        check_is_fitted(self, "log_draws_")
        X = new_data(self, X)
        cfg = self.run_.attrs["config"]  # the kernel the run sampled with
        kernel = make_kernel(cfg["kernel"], ard=cfg["ard"], n_dims=self.n_features_in_)
        return predictive(self.X_train_, self.y_train_, kernel, self.log_draws_, self.x_scaler_.transform(X),
                          y_scaler=self.y_scaler_, level=self.level)

    def predict(self, X, return_std: bool = False):
        """Predictive mean (m,) in y units; with ``return_std`` also the predictive sd (m,)."""
        pred = self.predictive(X)
        mean = pred["mean"].values
        return (mean, pred["sd"].values) if return_std else mean

    def predict_interval(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) (m,) of the central ``level`` interval of the mixture predictive."""
        pred = self.predictive(X)
        return pred["lower"].values, pred["upper"].values

    def summary(self):
        """ArviZ summary of the post-warmup draws with seconds per effective sample, and notes."""
        check_is_fitted(self, "run_")
        return run_summary(self.run_)
