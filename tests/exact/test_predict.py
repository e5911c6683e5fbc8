import numpy as np
import pytest
from scipy.stats import norm

from daskgp import make_kernel
from daskgp.exact.predict import mixture_quantiles, predictive


@pytest.fixture(scope="module")
def split(concrete):
    rng = np.random.default_rng(0)
    idx = rng.permutation(concrete.X_std.shape[0])
    X, y = concrete.X_std, concrete.y_std
    return X[idx[:600]], y[idx[:600]], X[idx[600:650]], y[idx[600:650]]


def test_single_draw_equals_dense_gp(split):
    X, y, Xn, _ = split
    k = make_kernel("rbf", lengthscale=1.5, variance=0.8)
    phi = np.concatenate([k.log_params, [np.log(0.1)]])
    pred = predictive(X, y, k, phi[None], Xn)
    K = k(X) + 0.1 * np.eye(len(X))
    Ks = k(X, Xn)
    mean = Ks.T @ np.linalg.solve(K, y)
    var = 0.8 - np.einsum("ij,ij->j", Ks, np.linalg.solve(K, Ks)) + 0.1
    np.testing.assert_allclose(pred["mean"], mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(pred["variance"], var, rtol=1e-8)
    np.testing.assert_allclose(pred["lower"], mean - norm.ppf(0.975) * np.sqrt(var), rtol=1e-6, atol=1e-8)


def test_operator_path_equals_exact_path_and_mixture_moments(split):
    X, y, Xn, _ = split
    k = make_kernel("matern52", lengthscale=2.0)
    rng = np.random.default_rng(1)
    draws = np.column_stack([rng.normal(0, 0.2, 4), rng.normal(0.5, 0.2, 4), rng.normal(-2, 0.2, 4)])
    a = predictive(X, y, k, draws, Xn, exact=True)
    b = predictive(X, y, k, draws, Xn, exact=False, tol=1e-10)
    np.testing.assert_allclose(b["mean"], a["mean"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(b["variance"], a["variance"], rtol=1e-6, atol=1e-7)
    # law of total variance over the mixture
    dm, dv = a["draw_mean"].values, a["draw_var"].values
    np.testing.assert_allclose(a["variance"], dv.mean(0) + dm.var(0), rtol=1e-10)
    assert np.all(a["lower"] < a["mean"]) and np.all(a["mean"] < a["upper"])


def test_original_units_and_coverage(concrete, split):
    X, y, Xn, yn = split
    k = make_kernel("rbf", lengthscale=2.0)
    phi = np.array([[0.0, np.log(2.0), np.log(0.1)]])
    pred = predictive(X, y, k, phi, Xn, y_scaler=concrete.y_scaler)
    truth = concrete.y_original(yn)
    assert 10 < float(pred["mean"].mean()) < 60  # MPa
    inside = np.mean((truth >= pred["lower"].values) & (truth <= pred["upper"].values))
    assert inside > 0.8  # 95% intervals on 50 held-out points


def test_mixture_quantiles_against_sampling():
    rng = np.random.default_rng(2)
    means, var = np.array([[0.0], [3.0]]), np.array([[1.0], [0.25]])
    q = mixture_quantiles(means, var, 0.9)
    comp = rng.integers(0, 2, 400_000)
    samples = rng.normal(means[comp, 0], np.sqrt(var[comp, 0]))
    assert q[0] == pytest.approx(np.quantile(samples, 0.9), abs=0.02)


def test_predictive_input_errors(split):
    X, y, Xn, _ = split
    k = make_kernel("rbf")
    with pytest.raises(ValueError, match="columns"):
        predictive(X, y, k, np.zeros((1, 3)), Xn[:, :3])
    with pytest.raises(ValueError, match="log_draws"):
        predictive(X, y, k, np.zeros((1, 2)), Xn)
    with pytest.raises(ValueError, match="non-finite"):
        predictive(X, y, k, np.zeros((1, 3)), np.full_like(Xn, np.nan))
