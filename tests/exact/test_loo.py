"""Leave-one-out log densities (Bürkner, Gabry & Vehtari 2021, eq. 8) against the brute-force definition:
for every i, the GP predictive of y_i from the other n − 1 observations by a dense solve."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from daskgp.exact.loo import MAX_LOO_N, loo_log_density
from daskgp.model.kernels import make_kernel


def test_closed_form_equals_refitting_without_each_point(concrete):
    X, y = concrete.X_std[:80], concrete.y_std[:80]
    kernel = make_kernel("matern52", ard=True, n_dims=X.shape[1])
    rng = np.random.default_rng(3)
    draws = np.column_stack([rng.normal(0, 0.3, (3, kernel.n_params)), np.log([0.05, 0.1, 0.3])])
    scale = 16.7  # y units per standardised unit: the Jacobian enters every value
    got = loo_log_density(X, y, kernel, draws, y_scale=scale)
    for s, phi in enumerate(draws):
        k = kernel.with_log_params(phi[:-1])
        K = np.asarray(k(X, X)) + math.exp(phi[-1]) * np.eye(len(y))
        for i in range(len(y)):
            rest = np.arange(len(y)) != i
            w = np.linalg.solve(K[np.ix_(rest, rest)], K[rest, i])
            mean, var = w @ y[rest], K[i, i] - w @ K[rest, i]
            ref = norm.logpdf(y[i], mean, math.sqrt(var)) - math.log(scale)
            assert got[s, i] == pytest.approx(ref, abs=1e-9)


def test_refuses_sizes_beyond_the_dense_limit():
    kernel = make_kernel("rbf", n_dims=1)
    X = np.linspace(0, 1, MAX_LOO_N + 1)[:, None]
    with pytest.raises(ValueError, match="more than 5000"):
        loo_log_density(X, np.sin(X[:, 0]), kernel, np.zeros((1, 3)))
