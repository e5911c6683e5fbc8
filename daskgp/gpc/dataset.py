"""A fitted :class:`~daskgp.gpc.classifier.SparseGPClassifier` as labelled arrays (xarray), for results files
and the dashboard: the model of Hernández-Lobato et al. (2015) — inducing inputs, ARD lengthscales, the
latent variance and q(u)'s k-space factor — and the fit's record per iteration.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from sklearn.utils.validation import check_is_fitted

__all__ = ["classifier_dataset"]


def classifier_dataset(est, feature_names=None) -> xr.Dataset:
    """``est``'s fitted model: inducing points (m, d) and lengthscales (d,) in X units, the latent variance,
    q(u)'s factor (T (m, m), c (m,); standardised inputs), and per iteration the evidence (nats), training
    error, gradient norm, site passes and rows of the gradient pass (n on a batch iteration; 0 where a model
    saved before they were recorded). ``feature_names``: d names (default: the fitted ones, else x0, …)."""
    check_is_fitted(est, "params_")
    p, d = est.params_, est.n_features_in_
    default = [str(c) for c in getattr(est, "feature_names_in_", [f"x{j}" for j in range(d)])]
    names = feature_names or default
    rec, x_units = est.records_, {"units": "X units"}
    batch = getattr(est, "batch_size_", None)
    return xr.Dataset(
        {"inducing_points": (("inducing", "feature"), p.Z * est.x_scale_ + est.x_mean_, x_units),
         "lengthscales": (("feature",), p.lengthscales * est.x_scale_, x_units),
         "kernel_variance": ((), p.variance, {"units": "latent units squared (probit scale)"}),
         "factor_T": (("inducing", "inducing_"), est.factor_.T),
         "factor_c": (("inducing",), est.factor_.c),
         "evidence": (("iteration",), np.array([r.evidence for r in rec]), {"units": "nats"}),
         "train_error": (("iteration",), np.array([r.train_error for r in rec])),
         "grad_norm": (("iteration",), np.array([r.grad_norm for r in rec])),
         "site_passes": (("iteration",), np.array([r.site_passes for r in rec], int)),
         "rows": (("iteration",), np.array([r.rows for r in rec], int))},
        coords={"feature": list(names), "iteration": np.arange(1, len(rec) + 1),
                "class": np.asarray(est.classes_).astype(str)},
        attrs={"model": "daskgp.SparseGPClassifier", "method": est.method,
               "best_iteration": int(getattr(est, "best_iteration_", len(rec))),
               "n_inducing": int(est.n_inducing), "positive_class": str(est.classes_[1]),
               **({} if batch is None else {"batch_size": int(batch),
                                            "finish_iterations": int(getattr(est, "finish_iter_", 0))})})
