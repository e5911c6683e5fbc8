"""Classification by per-class Bayesian GPLVM densities (Gal, van der Wilk & Rasmussen 2014, the MNIST
experiment): one :class:`daskgp.sparse.gplvm.BayesianGPLVM` per class, and a new row goes to the class whose
model gains most in its bound from it (the gain approximates log p(x | class), section 4 of the paper) plus
the log prior of the class.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from ..core.constraints import ValidatedParams, at_least
from ..core.runtime import FitRuntime, fit_runtime
from ..core.validation import fit_data, new_data
from ..runs.models import Saved, SavedModel, params_from_plain, plain_params
from .gplvm import BayesianGPLVM

__all__ = ["GPLVMClassifier"]


def _fit_in_process(params: dict, Y) -> BayesianGPLVM:
    return BayesianGPLVM(**params).fit(Y, client="in-process")


class GPLVMClassifier(SavedModel, ValidatedParams, ClassifierMixin, BaseEstimator):
    """One Bayesian GPLVM density model per class; a new row goes to the class whose model gains most in its
    bound from it, plus the log prior of the class (Gal et al. 2014, MNIST). ``gplvm_params``: keyword
    arguments of every :class:`BayesianGPLVM`.

    Fitted: ``classes_``, ``log_prior_`` (K,), ``models_`` (one fitted :class:`BayesianGPLVM` per class, each
    with its ``kernel_``), ``n_features_in_``. ``save(path)`` and ``GPLVMClassifier.load(path)`` keep a
    fitted model, every class's GPLVM in the one file (:mod:`daskgp.runs.models`)."""

    def __init__(self, gplvm_params: dict | None = None, n_iter: int = 30, scheduler: str | None = None):
        self.gplvm_params, self.n_iter, self.scheduler = gplvm_params, n_iter, scheduler

    _parameter_constraints = {"gplvm_params": [dict, None], "n_iter": [at_least(1)], "scheduler": [str, None]}

    def fit(self, X, y, client=None, *, runtime: FitRuntime | None = None):
        """Fit one GPLVM per class on X (n, p) with class labels y (n,). ``runtime``: a
        :class:`daskgp.FitRuntime` with these keywords instead (not both). Returns self."""
        from sklearn.utils.multiclass import check_classification_targets

        client = fit_runtime(runtime, "GPLVMClassifier", client=client).client
        self._validate_params()
        X, y = fit_data(self, X, y, min_rows=2, y_numeric=False)
        check_classification_targets(y)
        self.classes_, counts = np.unique(y, return_counts=True)
        if len(self.classes_) < 2:
            raise ValueError("GPLVMClassifier needs at least two classes")
        self.log_prior_ = np.log(counts / counts.sum())
        params = {"scheduler": self.scheduler, **(self.gplvm_params or {})}
        unknown = sorted(set(params) - set(BayesianGPLVM().get_params()))
        if unknown:
            raise ValueError(f"gplvm_params has unknown key(s) {unknown}; BayesianGPLVM takes "
                             f"{sorted(BayesianGPLVM().get_params())}")
        BayesianGPLVM(**params).check_fits(int(counts.min()), X.shape[1])  # here, not in a worker's log
        from ..compute.cluster import borrowed_client

        # one task per class, each fitting its model inside the task: K small fits in parallel
        with borrowed_client(client, self.scheduler) as c:
            futures = [c.submit(_fit_in_process, params, X[y == k], pure=False) for k in self.classes_]
            self.models_ = c.gather(futures)
        return self

    def _fitted_state(self) -> Saved:
        arrays, models = {"log_prior": self.log_prior_}, []
        for k, m in enumerate(self.models_):
            saved = m._fitted_state()
            arrays.update({f"class{k}.{name}": a for name, a in saved.arrays.items()})
            models.append({"params": plain_params({name: v for name, v in m.get_params().items()
                                                   if name != "scheduler"}),
                           "values": saved.values})
        values = {"models": models}
        return Saved({}, arrays, values)

    def _restore_fitted(self, saved: Saved) -> None:
        a, v = saved.arrays, saved.values
        self.log_prior_ = a["log_prior"]
        self.models_ = []
        for k, spec in enumerate(v["models"]):
            m = BayesianGPLVM(**params_from_plain(spec["params"]), scheduler=self.scheduler)
            prefix = f"class{k}."
            mine = {name[len(prefix):]: x for name, x in a.items() if name.startswith(prefix)}
            m._restore_fitted(Saved({}, mine, spec["values"]))
            m.n_features_in_ = int(v["n_features_in"])
            self.models_.append(m)
        if len(self.models_) != len(self.classes_):
            raise ValueError(f"{len(self.models_)} models for {len(self.classes_)} classes")

    def _joint_log_scores(self, X, client=None) -> np.ndarray:
        """(n, K) approximate log p(x | class) + log p(class) (nats)."""
        check_is_fitted(self, "models_")
        X = new_data(self, X)
        from ..compute.cluster import borrowed_client

        with borrowed_client(client, self.scheduler) as c:  # every (class, block of rows) pair in parallel
            futures = [[c.submit(m.score_block, b, self.n_iter, pure=False) for b in m.row_blocks(X)]
                       for m in self.models_]
            scores = [np.concatenate(c.gather(fs)) for fs in futures]
        return np.column_stack(scores) + self.log_prior_

    def predict_log_proba(self, X, client=None) -> np.ndarray:
        """(n, K) log posterior class probabilities by Bayes' rule over the per-class densities."""
        from scipy.special import log_softmax

        return log_softmax(self._joint_log_scores(X, client), axis=1)

    def predict_proba(self, X, client=None) -> np.ndarray:
        """(n, K) posterior class probabilities, columns in the order of ``classes_``."""
        return np.exp(self.predict_log_proba(X, client))

    def decision_function(self, X, client=None) -> np.ndarray:
        """scikit-learn's convention: (n, K) log posterior odds up to a per-row constant (the joint log
        scores); for two classes (n,), the log odds of ``classes_[1]``."""
        scores = self._joint_log_scores(X, client)
        return scores[:, 1] - scores[:, 0] if len(self.classes_) == 2 else scores

    def predict(self, X, client=None) -> np.ndarray:
        """(n,) the most probable class of each row."""
        scores = self._joint_log_scores(X, client)
        return self.classes_[np.argmax(scores, axis=1)]
