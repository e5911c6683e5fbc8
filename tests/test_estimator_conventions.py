"""Every daskgp estimator follows one set of conventions (issue 32, item 5): its constructor parameters are
validated the scikit-learn way (``_parameter_constraints``, scikit-learn's messages and
``InvalidParameterError``), before any cluster work; ``kernel=`` is a registry name or a kernel object;
``client=`` in ``fit``; the regressors name their standardising moments alike (``x_mean_``, ``x_scale_``,
``y_mean_``, ``y_scale_``)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

import daskgp as dg
from daskgp.model.kernels import Matern32

ESTIMATORS = [dg.SparseGPRegressor, dg.ADVGPRegressor, dg.SparseGPClassifier, dg.BayesianGPRegressor,
              dg.BayesianGPLVM, dg.GPLVMClassifier]
SCHEDULER_FREE = "tcp://192.0.2.1:8786"  # TEST-NET-1: never reachable; a fit that got as far would hang


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_constructor_parameter_has_a_constraint(cls):
    """A parameter without an entry would go unvalidated (scikit-learn only checks the listed ones)."""
    assert set(cls._parameter_constraints) == set(cls().get_params(deep=False))


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_scikit_learns_own_parameter_validation_check_passes(cls):
    """scikit-learn's ``check_param_validation`` (not in check_estimator's default set): for every
    parameter, an object of no valid type and a value outside each constraint raise its
    InvalidParameterError with its wording, from fit (and fit_transform)."""
    from sklearn.utils.estimator_checks import check_param_validation

    check_param_validation(cls.__name__, cls(scheduler=SCHEDULER_FREE))


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_fit_takes_a_client(cls):
    assert "client" in inspect.signature(cls.fit).parameters


def _integer_params(cls) -> list[str]:
    from numbers import Integral

    from sklearn.utils._param_validation import Interval

    return [name for name, cons in cls._parameter_constraints.items()
            if any(isinstance(c, Interval) and c.type is Integral for c in cons)]


def _data(cls):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    y = (X[:, 0] > 0).astype(int) if cls in (dg.SparseGPClassifier, dg.GPLVMClassifier) else X @ [1.0, 2, 3]
    return X, y


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("bad", [2.7, True, "3", -1], ids=["float", "bool", "str", "negative"])
def test_integer_parameters_refuse_what_is_not_an_integer_before_any_cluster_work(cls, bad):
    """2.7 used to become 2 silently in places; True is refused although scikit-learn would take it as 1.
    The scheduler address is unreachable: a check that came after connecting would hang, not raise."""
    X, y = _data(cls)
    for name in _integer_params(cls):
        est = cls(scheduler=SCHEDULER_FREE).set_params(**{name: bad})
        with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of {cls.__name__} must be"):
            est.fit(X, y)


@pytest.mark.parametrize("cls,name,bad", [
    (dg.SparseGPRegressor, "device", "tpu"), (dg.SparseGPRegressor, "noise_init", 0.0),
    (dg.SparseGPRegressor, "noise_init", float("nan")), (dg.SparseGPRegressor, "learn_inducing", "yes"),
    (dg.ADVGPRegressor, "learning_rate", 1.0), (dg.ADVGPRegressor, "adadelta_eps", 0.0),
    (dg.SparseGPClassifier, "method", "laplace"), (dg.SparseGPClassifier, "damping", 1.5),
    (dg.BayesianGPRegressor, "level", 1.0), (dg.BayesianGPRegressor, "device", "tpu"),
    (dg.BayesianGPRegressor, "sampler_options", [("n_probes", 4)]), (dg.BayesianGPLVM, "noise_init", 1.0),
    (dg.GPLVMClassifier, "gplvm_params", "n_inducing=5"),
])
def test_other_parameters_are_refused_with_scikit_learns_message(cls, name, bad):
    X, y = _data(cls)
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of {cls.__name__} must be"):
        cls(scheduler=SCHEDULER_FREE).set_params(**{name: bad}).fit(X, y)


def test_the_gplvm_says_in_one_line_that_it_needs_the_rbf():
    X, _ = _data(dg.BayesianGPLVM)
    for kernel in ("matern32", Matern32()):
        with pytest.raises(ValueError, match="needs the RBF kernel .*psi-statistics") as e:
            dg.BayesianGPLVM(kernel=kernel, n_inducing=5, scheduler=SCHEDULER_FREE).fit(X)
        assert "\n" not in str(e.value)


def test_the_bayesian_regressor_takes_a_kernel_object_and_refuses_options_set_twice():
    est = dg.BayesianGPRegressor(kernel=Matern32(ard=True, lengthscale=[1.0, 2.0]), device="auto")
    cfg = est._config()
    assert (cfg.kernel, cfg.ard, cfg.device) == ("matern32", True, "auto")
    assert dg.BayesianGPRegressor(kernel="RBF")._config().kernel == "rbf"
    twice = r"sampler_options sets \['device', 'seed'\].*\['device', 'random_state'\]"
    with pytest.raises(ValueError, match=twice):
        dg.BayesianGPRegressor(sampler_options={"seed": 1, "device": "gpu"})._config()
    with pytest.raises(ValueError, match="kernel must be one of"):
        dg.BayesianGPRegressor(kernel="cosine")._config()


@pytest.mark.cluster
def test_the_regressors_name_their_standardising_moments_alike(client):
    """x_mean_, x_scale_ (d,), y_mean_, y_scale_ (floats) on every regressor, equal to the data's moments
    (population sd, as scikit-learn's StandardScaler)."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 2)) * [3.0, 0.5] + [10.0, -2.0]
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(60) + 5.0
    fits = [dg.SparseGPRegressor(n_inducing=5, max_iter=3), dg.ADVGPRegressor(n_inducing=5, max_iter=3),
            dg.BayesianGPRegressor(method="mh", n_chains=2, n_iter=10, n_predict_draws=3)]
    for est in fits:
        est.fit(X, y, client=client)
        np.testing.assert_allclose(est.x_mean_, X.mean(0), rtol=1e-12)
        np.testing.assert_allclose(est.x_scale_, X.std(0), rtol=1e-12)
        assert isinstance(est.y_mean_, float) and isinstance(est.y_scale_, float)
        np.testing.assert_allclose([est.y_mean_, est.y_scale_], [y.mean(), y.std()], rtol=1e-12)
