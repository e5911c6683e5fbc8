"""The Gaussian likelihood object (issue 57, item 1) against closed forms computed another way: scipy's
normal density for the predictive log density, and the Monte Carlo mean of log N(y | f, σ²) over draws of f
for the variational expectation, its tolerance five standard errors of that mean (computed from the draws),
with a wrong variant (the expectation without the −var/2σ² term) shown to fail the same check."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from daskgp.model.likelihoods import Gaussian


def test_the_predictive_adds_the_noise_and_its_density_is_the_normals():
    lik = Gaussian(0.3)
    mean, var = np.array([0.0, 1.5, -2.0]), np.array([0.1, 0.5, 2.0])
    m, v = lik.predict(mean, var)
    assert np.array_equal(m, mean) and np.array_equal(v, var + 0.3)
    y = np.array([0.2, 1.0, -4.0])
    np.testing.assert_allclose(lik.log_predictive_density(y, mean, var),
                               norm.logpdf(y, mean, np.sqrt(var + 0.3)), rtol=1e-13)


def test_the_variational_expectation_is_the_mean_log_density_over_q():
    rng = np.random.default_rng(3)
    lik = Gaussian(0.4)
    y, mean, var = 0.7, -0.2, 0.9
    f = mean + np.sqrt(var) * rng.standard_normal(200_000)
    logs = norm.logpdf(y, f, np.sqrt(0.4))
    se = logs.std(ddof=1) / np.sqrt(len(logs))
    assert abs(lik.variational_expectation(y, mean, var) - logs.mean()) < 5 * se

    def without_the_variance_term(y, mean, var):  # a known-wrong variant: the check has the power to see it
        return -0.5 * np.log(2 * np.pi * 0.4) - 0.5 * (y - mean) ** 2 / 0.4

    assert abs(without_the_variance_term(y, mean, var) - logs.mean()) > 5 * se


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_noise_that_is_no_variance_is_refused(bad):
    with pytest.raises(ValueError, match="noise_variance must be finite and > 0"):
        Gaussian(bad)
