"""Posterior predictive checks and predictions of a run, in ArviZ's layout, for ``az.plot_ppc_dist``,
``az.loo`` and ``az.compare``.

From a thinned set of post-warmup draws (the same draws in every chain, evenly spaced),
:func:`predictive_tree` builds a DataTree whose groups follow ArviZ's schema:

* at the training inputs: ``posterior`` (the draws used), ``posterior_predictive`` (one replicated y per draw
  and observation, from that draw's GP predictive N(m_s, v_s), see :func:`daskgp.exact.predict.predictive`),
  ``log_likelihood`` (log p(y_i | y_−i, θ_s), the non-factorised form PSIS-LOO needs, see
  :mod:`daskgp.exact.loo`), ``observed_data`` and ``constant_data``;
* at new inputs: ``posterior``, ``predictions`` (a y per draw and new point) and
  ``predictions_constant_data``.

Every y is in the target's original units (attribute ``units``).
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from ..exact.loo import MAX_LOO_N, loo_log_density
from ..exact.predict import predictive
from ..model.kernels import make_kernel
from .diagnostics import post_warmup

__all__ = ["predictive_tree", "MAX_PPC_N"]

MAX_PPC_N = MAX_LOO_N  # the predictive at every training input is one dense solve with n right-hand sides


def _thinned_posterior(dt, n_draws: int) -> xr.Dataset:
    """The kept draws, at most ``n_draws`` in all: the same evenly spaced draw indices in every chain."""
    sampled, _ = post_warmup(dt)
    post = sampled["posterior"].to_dataset()
    per_chain = max(1, math.ceil(n_draws / post.sizes["chain"]))
    idx = np.unique(np.linspace(0, post.sizes["draw"] - 1, min(per_chain, post.sizes["draw"])).astype(int))
    return post.isel(draw=idx)


def predictive_tree(dt, dataset, *, X_new=None, n_draws: int = 100, seed: int = 0,
                    feature_names=None) -> xr.DataTree:
    """The checks (``X_new`` None) or the predictions at ``X_new`` (m, d) (original units) of the run ``dt``
    (:func:`daskgp.mcmc.diagnostics.open_run`) sampled on ``dataset`` (a :class:`daskgp.Dataset`: its
    X_std / y_std and scalers); ``n_draws``: posterior draws used (about, split evenly over the chains);
    ``seed``: the replicated y's noise."""
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws}")
    cfg = dt.attrs["config"]
    names = list(dt.attrs["param_names"])
    kernel = make_kernel(cfg["kernel"], ard=cfg["ard"], n_dims=dataset.X_std.shape[1])
    post = _thinned_posterior(dt, n_draws)
    C, D = post.sizes["chain"], post.sizes["draw"]
    log_draws = np.log(np.stack([post[nm].values for nm in names], axis=-1)).reshape(C * D, len(names))
    features = list(feature_names or dataset.feature_names)
    units = {"units": dataset.target_name}
    rng = np.random.default_rng(seed)

    def replicated(X_std):
        pred = predictive(dataset.X_std, dataset.y_std, kernel, log_draws, X_std, y_scaler=dataset.y_scaler)
        mean, var = pred["draw_mean"].values, pred["draw_var"].values  # (C·D, m)
        return (mean + np.sqrt(var) * rng.standard_normal(mean.shape)).reshape(C, D, -1)

    coords = {"chain": post["chain"].values, "draw": post["draw"].values}
    groups = {"posterior": post}
    if X_new is None:
        n = dataset.X_std.shape[0]
        if n > MAX_PPC_N:
            raise ValueError(f"posterior predictive checks at the {n} training inputs need dense solves: n "
                             f"is more than {MAX_PPC_N}; give new inputs for predictions instead")
        y_rep = replicated(dataset.X_std)
        ll = loo_log_density(dataset.X_std, dataset.y_std, kernel, log_draws,
                             float(dataset.y_scaler.scale_[0])).reshape(C, D, n)
        obs = {**coords, "obs": np.arange(n)}
        groups["posterior_predictive"] = xr.Dataset({"y": (("chain", "draw", "obs"), y_rep, units)}, obs)
        about = {"units": "nats", "description": "log p(y_i | y_-i, theta): leave-one-out, non-factorised"}
        groups["log_likelihood"] = xr.Dataset({"y": (("chain", "draw", "obs"), ll, about)}, obs)
        groups["observed_data"] = xr.Dataset({"y": ("obs", dataset.y, units)},
                                             {"obs": np.arange(n)})
        groups["constant_data"] = xr.Dataset(
            {"X": (("obs", "feature"), dataset.X)},
            {"obs": np.arange(n), "feature": features})
    else:
        X_new = np.asarray(X_new, dtype=np.float64)
        y_new = replicated(dataset.x_scaler.transform(X_new))
        m = X_new.shape[0]
        groups["predictions"] = xr.Dataset({"y": (("chain", "draw", "obs_new"), y_new, units)},
                                           {**coords, "obs_new": np.arange(m)})
        groups["predictions_constant_data"] = xr.Dataset({"X": (("obs_new", "feature"), X_new)},
                                                         {"obs_new": np.arange(m), "feature": features})
    tree = xr.DataTree.from_dict(groups)
    tree.attrs.update(source_run_fingerprint=dt.attrs.get("fingerprint", ""), n_draws=int(C * D),
                      seed=int(seed), target=dataset.target_name)
    return tree
