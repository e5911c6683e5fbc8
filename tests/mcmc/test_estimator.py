"""The scikit-learn estimator: fit on concrete, predict with uncertainty, score, clone, reload from disk."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler

from daskgp import make_kernel
from daskgp.exact.predict import predictive
from daskgp.mcmc.estimator import BayesianGPRegressor

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def split(concrete):
    X, y = concrete.X, concrete.y  # original units
    rng = np.random.default_rng(7)
    idx = rng.permutation(len(y))
    return X[idx[:300]], y[idx[:300]], X[idx[300:400]], y[idx[300:400]]


@pytest.fixture(scope="module")
def fitted(split, client, tmp_path_factory):
    Xtr, ytr, _, _ = split
    est = BayesianGPRegressor(method="mh", n_chains=2, n_iter=1500, n_predict_draws=30,
                              out=str(tmp_path_factory.mktemp("est") / "run.zarr"), random_state=1)
    return est.fit(Xtr, ytr, client=client)  # every estimator takes the cluster in fit


def test_predict_score_and_intervals_on_held_out_concrete(fitted, split):
    """Held-out concrete (100 rows, strength in MPa): R² above 0.75 (a GP on 300 rows; linear regression
    gets ≈ 0.6 here), and the 95% intervals cover between 85% and 100% of the points (binomial sd 2.2 points
    at 95%)."""
    _, _, Xte, yte = split
    mean, sd = fitted.predict(Xte, return_std=True)
    assert mean.shape == sd.shape == (100,) and np.all(sd > 0)
    assert fitted.score(Xte, yte) > 0.75
    lo, hi = fitted.predict_interval(Xte)
    cover = np.mean((yte >= lo) & (yte <= hi))
    assert 0.85 <= cover <= 1.0
    from sklearn.linear_model import LinearRegression

    Xtr, ytr = split[0], split[1]
    assert fitted.score(Xte, yte) > LinearRegression().fit(Xtr, ytr).score(Xte, yte) + 0.1


def test_prediction_is_the_mixture_over_the_kept_draws(fitted, split):
    _, _, Xte, _ = split
    kernel = make_kernel("rbf")
    ref = predictive(fitted.X_train_, fitted.y_train_, kernel, fitted.log_draws_,
                     fitted.x_scaler_.transform(Xte[:10]), y_scaler=fitted.y_scaler_, exact=True)
    mean, sd = fitted.predict(Xte[:10], return_std=True)
    np.testing.assert_allclose(mean, ref["mean"].values, rtol=1e-10)
    np.testing.assert_allclose(sd, ref["sd"].values, rtol=1e-10)
    assert fitted.log_draws_.shape == (30, 3)


def test_from_run_reproduces_the_fitted_estimator(fitted, split, concrete):
    Xtr, ytr, Xte, _ = split
    from daskgp.datasets import Dataset

    # the training data in their own units with the fit's scalers: X_std / y_std are what the run holds
    ds = Dataset("custom", Xtr, ytr, fitted.x_scaler_, fitted.y_scaler_, concrete.feature_names,
                 concrete.target_name, None)
    again = BayesianGPRegressor.from_run(fitted.out, dataset=ds, n_predict_draws=30)
    # the data set names its columns: the estimator keeps them (feature_names_in_) and checks them
    import pandas as pd

    names = list(concrete.feature_names)
    assert list(again.feature_names_in_) == names and again.n_iter_ == 1500
    new = pd.DataFrame(Xte[:5], columns=names)
    np.testing.assert_allclose(again.predict(new), fitted.predict(Xte[:5]), rtol=1e-12)
    with pytest.raises(ValueError, match="feature names"):
        again.predict(new[names[::-1]])


def test_sklearn_conventions(fitted, split, client):
    est = clone(fitted)
    assert est.get_params()["n_chains"] == 2 and not hasattr(est, "run_")
    with pytest.raises(Exception, match="not fitted"):
        est.predict(split[2])
    with pytest.raises(ValueError, match="features"):
        fitted.predict(split[2][:, :3])
    with pytest.raises(ValueError, match="contains NaN"):
        fitted.predict(np.full((2, 8), np.nan))
    with pytest.raises(ValueError, match="method"):
        BayesianGPRegressor(method="gibbs").fit(split[0], split[1])
    pipe = make_pipeline(MinMaxScaler(), BayesianGPRegressor(method="mh", n_chains=2, n_iter=200,
                                                             n_predict_draws=5))
    pipe.fit(split[0][:120], split[1][:120])
    assert pipe.predict(split[2][:4]).shape == (4,)


def test_misspelt_options_raise_before_any_work(split, tmp_path):
    """A misspelt sampler option is refused with the closest name, by the estimator and by dg.sample, before
    a cluster or a run folder is touched (it used to be dropped silently)."""
    import daskgp as dg

    Xtr, ytr = split[0][:50], split[1][:50]
    with pytest.raises(ValueError, match="unknown sampler option 'n_probe' \\(did you mean 'n_probes'\\?\\)"):
        BayesianGPRegressor(sampler_options={"n_probe": 8}, out=str(tmp_path / "r.zarr")).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="unknown sampler option 'n_iters' \\(did you mean 'n_iter'\\?\\)"):
        dg.sample(Xtr, ytr, out=str(tmp_path / "s.zarr"), n_iters=5)
    assert not list(tmp_path.iterdir())
