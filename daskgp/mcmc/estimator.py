"""A scikit-learn regressor whose GP hyperparameters are sampled, not optimised.

``BayesianGPRegressor().fit(X, y)`` standardises the data, samples p(θ | y) with chains on the Dask cluster
(:func:`daskgp.mcmc.chains.sample`, SGLD by default), and ``predict(X, return_std=True)`` returns the
posterior predictive that mixes over the sampled θ (:func:`daskgp.exact.predict.predictive`), in the
units of y.
"""

from __future__ import annotations

import os
import tempfile
import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from ..core.kernels import make_kernel
from ..core.validation import fit_data, new_data, seed_from
from ..datasets import scaler_meta
from ..exact.predict import predictive
from .chains import sample
from .config import SamplerConfig, fingerprint
from .diagnostics import open_run, post_warmup, run_fidelity, run_summary

__all__ = ["BayesianGPRegressor", "thinned_log_draws"]


def thinned_log_draws(dt, n_draws: int) -> np.ndarray:
    """(S, p) log-parameters, S ≤ n_draws, evenly spaced over the post-warmup draws of all chains."""
    sampled, _ = post_warmup(dt)
    post = sampled["posterior"].to_dataset()
    names = dt.attrs["param_names"]
    flat = np.column_stack([post[nm].values.reshape(-1) for nm in names])  # (chains·draws, p)
    idx = np.unique(np.linspace(0, len(flat) - 1, min(n_draws, len(flat))).astype(int))
    return np.log(flat[idx])


class BayesianGPRegressor(RegressorMixin, BaseEstimator):
    """Zero-mean GP regression with hyperparameters integrated out by MCMC.

    kernel: 'rbf' | 'matern32' | 'matern52' (``ard``: one lengthscale per input); method: a registered
    sampler (:func:`daskgp.mcmc.samplers.sampler_names`: 'sghmc', the default, 'sgld', 'mh'); n_chains,
    n_iter: chains and iterations per chain (default 2,000); target_ess: instead sample until every
    parameter's bulk and tail ESS reach it and every R-hat < 1.01 (n_iter, default 50,000, is then a cap);
    n_predict_draws: posterior draws the predictive mixes over; level: central interval of
    :meth:`predict_interval`; random_state: seeds the chains (an int for a reproducible run); out: zarr store
    for the run (default: a temporary folder); scheduler: a dask-scheduler address (default: this process's
    current client, else a local cluster started for the fit); sampler_options: further
    :class:`daskgp.mcmc.config.SamplerConfig` fields (e.g. step_start, n_probes).

    Fitted attributes: ``run_`` (ArviZ DataTree of the run), ``log_draws_`` (S, p), ``x_scaler_``,
    ``y_scaler_``, ``X_train_``/``y_train_`` (standardised), ``param_names_``, ``n_iter_`` (iterations
    per chain, warmup included), ``n_features_in_`` and, for DataFrames, ``feature_names_in_``.
    """

    def __init__(self, kernel: str = "rbf", ard: bool = False, method: str = "sghmc", n_chains: int = 4,
                 n_iter: int | None = None, target_ess: int | None = None, n_predict_draws: int = 50,
                 level: float = 0.95, random_state=0, out: str | None = None, scheduler: str | None = None,
                 sampler_options: dict | None = None):
        self.kernel, self.ard, self.method = kernel, ard, method
        self.n_chains, self.n_iter, self.target_ess = n_chains, n_iter, target_ess
        self.n_predict_draws = n_predict_draws
        self.level, self.random_state, self.out, self.scheduler = level, random_state, out, scheduler
        self.sampler_options = sampler_options

    def _config(self) -> SamplerConfig:
        return SamplerConfig.from_dict({**(self.sampler_options or {}), "kernel": self.kernel,
                                        "ard": self.ard, "method": self.method, "n_chains": self.n_chains,
                                        "n_iter": self.n_iter, "target_ess": self.target_ess,
                                        "seed": seed_from(self.random_state)})

    def fit(self, X, y, progress=None, client=None):
        """Sample the hyperparameter posterior for X (n, d), y (n,); ``client``: a distributed Client to use
        (default: ``scheduler``, else this process's current client, else a local cluster started for the
        fit), as every daskgp estimator's ``fit`` takes it. Returns self."""
        X, y = fit_data(self, X, y)
        cfg = self._config()
        if self.n_predict_draws < 1:
            raise ValueError(f"n_predict_draws must be >= 1, got {self.n_predict_draws}")
        self.x_scaler_ = StandardScaler().fit(X)
        self.y_scaler_ = StandardScaler().fit(y[:, None])
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
                  level=level, random_state=cfg["seed"], out=str(path))
        est.x_scaler_, est.y_scaler_, est.run_ = ds.x_scaler, ds.y_scaler, dt
        est._set_posterior(ds.X_std, ds.y_std)
        est.n_features_in_ = ds.X.shape[1]
        names = list(ds.feature_names)
        if names != [f"x{j}" for j in range(len(names))]:  # real column names: predict checks them
            est.feature_names_in_ = np.asarray(names, dtype=object)
        return est

    def _set_posterior(self, Xs, ys) -> None:
        self.X_train_, self.y_train_ = Xs, ys
        self.param_names_ = list(self.run_.attrs["param_names"])
        self.log_draws_ = thinned_log_draws(self.run_, self.n_predict_draws)
        self.n_iter_ = int(self.run_["posterior"].sizes["draw"])
        if "warmup_posterior" in self.run_.children:
            self.n_iter_ += int(self.run_["warmup_posterior"].sizes["draw"])

    def predictive(self, X):
        """The mixture predictive at X (m, d) as an xarray Dataset (mean, sd, lower, upper, …; y units)."""
        check_is_fitted(self, "log_draws_")
        X = new_data(self, X)
        kernel = make_kernel(self.kernel, ard=self.ard, n_dims=self.n_features_in_)
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
