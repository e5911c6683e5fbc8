"""ADVGP's weight-space model (Peng, Zhe & Qi 2017) against references: the collapsed Titsias bound of
daskgp.sparse at the optimal q(w), finite differences of every gradient, and a numerical argmin for the
proximal operator."""

import numpy as np
import pytest
import scipy.optimize

from daskgp.advgp.model import (
    ADVGPParams,
    collapsed_objective,
    negative_elbo,
    optimal_q,
    partition_objective,
    prox_h,
    regulariser,
)
from daskgp.sparse.bound import bound_and_grads, chunk_stats


@pytest.fixture
def data(concrete):
    return concrete.X_std[:120], concrete.y_std[:120]


def _params(X, fmap, groups, rng, m=8, kernel="rbf"):
    Z = X[rng.choice(len(X), m, replace=False)] + 0.05 * rng.standard_normal((m, X.shape[1]))
    k = m // groups
    U = np.triu(rng.standard_normal((k, k)) * 0.1) + 0.5 * np.eye(k)
    return ADVGPParams(Z, 1.3, rng.uniform(1.5, 3.0, X.shape[1]), 0.25, 0.3 * rng.standard_normal(k), U, fmap,
                       groups, kernel)


@pytest.mark.parametrize("kernel", ["rbf", "matern32", "matern52"])
def test_at_the_optimal_q_the_elbo_is_titsias_collapsed_bound(data, kernel):
    """With φ of eq. 11 and q(w) at its closed-form optimum, −L is −F of the collapsed bound (same jitter;
    that bound is tested against the dense Titsias bound for every kernel in tests/sparse)."""
    X, y = data
    rng = np.random.default_rng(1)
    p = _params(X, "cholesky", 1, rng, kernel=kernel)
    stats = chunk_stats(y[:, None], p.inducing, X)
    p.mu, p.U = optimal_q(stats, p)
    titsias = -bound_and_grads(stats, p.inducing, grads=False)
    assert negative_elbo(X, y, p) == pytest.approx(titsias, rel=1e-10)
    # and any other q(w) is worse
    other = ADVGPParams(p.Z, p.variance, p.lengthscales, p.noise, p.mu + 0.05, p.U * 1.1, kernel=kernel)
    assert negative_elbo(X, y, other) > titsias


@pytest.mark.parametrize("fmap,groups", [("cholesky", 1), ("ensemble", 2)])
def test_the_collapsed_objective_and_its_envelope_gradient(fmap, groups, data):
    """collapsed_objective: −L at the optimal q(w) — Titsias' −F for the Cholesky map — and its gradient
    w.r.t. the kernel part, taken at fixed q by the envelope theorem, equals central differences of the
    collapsed value itself (q re-optimised at every point; step 1e-6, 1e-4 relative plus absolute). Power:
    the same differences of −L at the fixed q (not re-optimised) differ from them."""
    X, y = data
    p = _params(X, fmap, groups, np.random.default_rng(4))
    f, g = collapsed_objective(X, y, p)
    stats = chunk_stats(y[:, None], p.inducing, X)
    if fmap == "cholesky":
        assert f == pytest.approx(-bound_and_grads(stats, p.inducing, grads=False), rel=1e-10)
    v, o = p.to_vector(), p.n_kernel
    assert g.shape == (o,)
    num, fixed = np.empty(o), np.empty(o)
    mu, U = optimal_q(stats, p)
    q = ADVGPParams(p.Z, p.variance, p.lengthscales, p.noise, mu, U, fmap, groups)
    vq = q.to_vector()
    for i in range(o):
        e = np.zeros_like(v)
        e[i] = 1e-6
        num[i] = (collapsed_objective(X, y, p.with_vector(v + e))[0]
                  - collapsed_objective(X, y, p.with_vector(v - e))[0]) / 2e-6
        fixed[i] = (partition_objective(X, y, q.with_vector(vq + e), grad=False)
                    - partition_objective(X, y, q.with_vector(vq - e), grad=False)) / 2e-6
    np.testing.assert_allclose(g, num, rtol=1e-4, atol=1e-4)
    # at the optimal q both agree too (the envelope theorem): the power check is a q away from the optimum
    away = ADVGPParams(p.Z, p.variance, p.lengthscales, p.noise, mu + 0.3, U, fmap, groups)
    _, g_away = partition_objective(X, y, away)
    assert not np.allclose(g_away[:o], num, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(fixed, num, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fmap,groups,kernel", [("cholesky", 1, "rbf"), ("nystrom", 1, "rbf"),
                                                ("ensemble", 2, "rbf"), ("cholesky", 1, "matern32"),
                                                ("nystrom", 1, "matern52")])
def test_partition_gradient_matches_finite_differences(fmap, groups, kernel, data):
    """Every coordinate: Z, log σ², log l, log β, μ and the upper triangle of U, for the three feature maps
    and the Matérn kernels (central differences, step 1e-6; tolerance 1e-4 relative plus 1e-4 absolute: the
    eigen-decomposition's derivative divides by eigenvalue gaps)."""
    X, y = data
    p = _params(X, fmap, groups, np.random.default_rng(2), kernel=kernel)
    _, g = partition_objective(X, y, p)
    v = p.to_vector()
    num = np.empty_like(v)
    for i in range(len(v)):
        e = np.zeros_like(v)
        e[i] = 1e-6
        num[i] = (partition_objective(X, y, p.with_vector(v + e), grad=False)
                  - partition_objective(X, y, p.with_vector(v - e), grad=False)) / 2e-6
    np.testing.assert_allclose(g, num, rtol=1e-4, atol=1e-4)


def test_the_objective_sums_over_partitions(data):
    X, y = data
    p = _params(X, "cholesky", 1, np.random.default_rng(3))
    whole, gw = partition_objective(X, y, p)
    parts = [partition_objective(X[a:a + 40], y[a:a + 40], p) for a in range(0, 120, 40)]
    assert sum(G for G, _ in parts) == pytest.approx(whole, rel=1e-12)
    np.testing.assert_allclose(sum(g for _, g in parts), gw, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("gamma", [0.01, 0.3, 2.0])
def test_the_proximal_operator_is_the_numerical_argmin(gamma):
    """eqs. 18–20 against L-BFGS-B on h(μ*, U*) + ‖(μ*, U*) − (μ, U)‖²/(2γ), U* upper triangular with a
    positive diagonal, from random (μ, U) (the diagonal of U of either sign)."""
    rng = np.random.default_rng(4)
    k = 4
    mu, U = rng.standard_normal(k), np.triu(rng.standard_normal((k, k)))
    iu = np.triu_indices(k)
    diag = np.array([i == j for i, j in zip(*iu, strict=True)])

    def objective(x):
        m, Uv = x[:k], np.zeros((k, k))
        Uv[iu] = x[k:]
        return regulariser(m, Uv) + (np.sum((m - mu) ** 2) + np.sum((Uv - U)[iu] ** 2)) / (2 * gamma)

    x0 = np.concatenate([mu, np.where(diag, np.abs(U[iu]) + 0.5, U[iu])])
    bounds = [(None, None)] * k + [(1e-9, None) if d else (None, None) for d in diag]
    res = scipy.optimize.minimize(objective, x0, method="L-BFGS-B", bounds=bounds,
                                  options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000})
    m_star, U_star = prox_h(mu, U, gamma)
    np.testing.assert_allclose(m_star, res.x[:k], atol=1e-6)
    np.testing.assert_allclose(U_star[iu], res.x[k:], atol=1e-6)
    # per-coordinate steps (ADADELTA's): each coordinate as if alone with its own γ
    g_mu, g_U = np.full(k, gamma), np.full((k, k), gamma)
    m2, U2 = prox_h(mu, U, (g_mu, g_U))
    np.testing.assert_allclose(m2, m_star, rtol=1e-14)
    np.testing.assert_allclose(U2, U_star, rtol=1e-14)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="feature_map"):
        ADVGPParams(np.zeros((4, 2)), 1.0, 1.0, 1.0, np.zeros(4), np.eye(4), "fourier")
    with pytest.raises(ValueError, match="do not split into 3 groups"):
        ADVGPParams(np.zeros((4, 2)), 1.0, 1.0, 1.0, np.zeros(4), np.eye(4), "ensemble", 3)
    with pytest.raises(ValueError, match="mu must be"):
        ADVGPParams(np.zeros((4, 2)), 1.0, 1.0, 1.0, np.zeros(3), np.eye(4))


@pytest.mark.parametrize("fmap,groups", [("cholesky", 1), ("nystrom", 1), ("ensemble", 2)])
def test_a_full_natural_step_is_the_optimal_q_and_a_partial_one_improves(fmap, groups, data):
    """natural_step with ρ = 1 from the partition's statistics (partition_objective(natural=True)) is the
    closed-form optimum optimal_q, for any starting q(w); a step of ρ = 0.3 lowers −L from the start (the
    ELBO is concave in the natural parameters along the step) and lands between the start and the optimum
    in natural parameters, exactly (1 − ρ)Λ₀ + ρΛ*."""
    from daskgp.advgp.model import appended_statistics, natural_step

    X, y = data
    p = _params(X, fmap, groups, np.random.default_rng(5))
    stats = chunk_stats(y[:, None], p.inducing, X)
    G, g = partition_objective(X, y, p, natural=True)
    _, grad = partition_objective(X, y, p)
    o = p.n_kernel
    np.testing.assert_allclose(g[:o], grad[:o], rtol=1e-12)  # the kernel part is the gradient as before
    C, D = appended_statistics(g, p)
    np.testing.assert_allclose(C, stats.C[:, 0], rtol=1e-12)
    np.testing.assert_allclose(D, stats.D, rtol=1e-12)
    mu_star, U_star = optimal_q(stats, p)
    mu1, U1 = natural_step(p, C, D, 1.0)
    np.testing.assert_allclose(mu1, mu_star, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(U1.T @ U1, U_star.T @ U_star, rtol=1e-8, atol=1e-10)
    mu3, U3 = natural_step(p, C, D, 0.3)
    step = ADVGPParams(p.Z, p.variance, p.lengthscales, p.noise, mu3, U3, fmap, groups)
    assert negative_elbo(X, y, step) < negative_elbo(X, y, p)
    lam = [np.linalg.inv(U.T @ U) for U in (p.U, U3, U_star)]
    np.testing.assert_allclose(lam[1], 0.7 * lam[0] + 0.3 * lam[2], rtol=1e-7, atol=1e-8)
