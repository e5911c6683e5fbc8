import numpy as np
import pytest
from scipy.stats import multivariate_normal

from daskgp import KernelOperator, PivotedCholesky, exact_log_marginal, log_marginal_gradient, make_kernel

THETA = dict(variance=1.0, lengthscale=2.0)  # with noise 0.3: the benchmark's point, standardised data


@pytest.fixture(scope="module")
def problem(concrete):
    k = make_kernel("rbf", **THETA)
    op = KernelOperator(concrete.X_std, k, 0.3, mode="local")
    value, grad = exact_log_marginal(concrete.X_std, concrete.y_std, k, 0.3)
    return op, concrete.y_std, value, grad


def test_exact_value_matches_scipy(concrete):
    X, y = concrete.X_std[:200], concrete.y_std[:200]
    k = make_kernel("matern52", variance=0.7, lengthscale=[1.0] * 8, ard=True)
    K = k(X) + 0.2 * np.eye(200)
    assert exact_log_marginal(X, y, k, 0.2, gradient=False) == pytest.approx(
        multivariate_normal(np.zeros(200), K).logpdf(y), rel=1e-10)


@pytest.mark.parametrize("name,ard,block_rows,single_thread,dense", [
    ("rbf", False, 1024, False, True), ("matern32", True, 64, False, True),
    ("matern52", True, 64, False, True), ("rbf", False, 1024, False, False),
    ("matern32", True, 64, False, False), ("rbf", False, 97, True, False)])
def test_exact_gradient_matches_finite_differences(concrete, name, ard, block_rows, single_thread, dense,
                                                   monkeypatch):
    """Both forms of the exact gradient (whole arrays up to 4,096 rows, row blocks beyond: exercised at
    small n by lowering the switch) against central differences of the exact value."""
    if single_thread:  # the branch large n takes (one BLAS thread), exercised at small n
        monkeypatch.setattr("daskgp.exact.marginal._SAFE_THREADED_N", 10)
    if not dense:
        monkeypatch.setattr("daskgp.exact.marginal._DENSE_GRADIENT_MAX_N", 10)
    X, y = concrete.X_std[:250], concrete.y_std[:250]
    k = make_kernel(name, variance=1.2, lengthscale=np.linspace(1, 2, 8) if ard else 1.5, ard=ard)
    noise = 0.25
    _, g = exact_log_marginal(X, y, k, noise, block_rows=block_rows)
    lp = np.concatenate([k.log_params, [np.log(noise)]])

    def f(p):
        return exact_log_marginal(X, y, k.with_log_params(p[:-1]), float(np.exp(p[-1])), gradient=False)

    h = 1e-5
    fd = [(f(lp + h * e) - f(lp - h * e)) / (2 * h) for e in np.eye(lp.size)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["rbf", "matern32", "matern52"])
@pytest.mark.parametrize("ard", [False, True])
def test_the_two_forms_of_the_exact_gradient_agree(concrete, name, ard):
    """The whole-array gradient (traces reduced to products with one derivative block, K⁻¹ read from one
    triangle) equals the blocked one (every derivative block formed) on 1,030 rows, to 1e-10 relative."""
    from daskgp.exact.marginal import _exact_blocked, _exact_dense

    k = make_kernel(name, variance=1.7, lengthscale=np.linspace(0.8, 2.5, 8) if ard else 1.3, ard=ard)
    X, y = concrete.X_std, concrete.y_std
    v, g = _exact_dense(X, y, k, 0.07)
    v_ref, g_ref = _exact_blocked(X, y, k, 0.07, True, 1024)
    assert v == pytest.approx(v_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10)


@pytest.mark.parametrize("name", ["rbf", "matern52"])
@pytest.mark.parametrize("ard", [False, True])
def test_the_single_precision_gradient_is_within_its_stated_error(concrete, name, ard):
    """``single=True`` (HMC's inner force) on concrete's 1,030 rows against the double-precision gradient:
    every component within b = 2⁻²⁴·n·variance/noise of the largest (compute.precision's rounding bound,
    the one single precision is allowed under; 1.5e-3 here) — the error a backward-stable float32 Cholesky
    and inverse may make. Power: the double gradient at a lengthscale 1 % off is outside the same band.
    Beyond the bound's limit, or asked for a value only, single precision is refused."""
    from daskgp.exact.marginal import single_precision_ok

    X, y = concrete.X_std, concrete.y_std
    k = make_kernel(name, variance=1.7, lengthscale=np.linspace(0.8, 2.5, 8) if ard else 1.3, ard=ard)
    noise = 0.07
    assert single_precision_ok(len(y), k.variance, noise)
    _, g = exact_log_marginal(X, y, k, noise)
    _, g32 = exact_log_marginal(X, y, k, noise, single=True)
    band = len(y) * k.variance / noise * 2.0**-24 * np.abs(g).max()
    assert np.abs(g32 - g).max() < band, (np.abs(g32 - g).max(), band)
    off = k.with_log_params(k.log_params + np.r_[0.0, np.full(k.log_params.size - 1, 0.01)])
    assert np.abs(exact_log_marginal(X, y, off, noise)[1] - g).max() > band
    assert not single_precision_ok(len(y), 1.0, 1e-4)
    with pytest.raises(ValueError, match="single precision"):
        exact_log_marginal(X, y, k, noise, gradient=False, single=True)


def test_the_posterior_keeps_double_precision_where_single_is_not_allowed(concrete):
    """``exact_log_posterior(single=True)`` at a noise that puts the rounding bound past its limit
    (compute.precision.FLOAT32_MAX_BOUND) returns the double-precision value and gradient, bit for bit."""
    from daskgp.core.priors import GammaPrior
    from daskgp.exact.posterior import exact_log_posterior

    X, y = concrete.X_std[:300], concrete.y_std[:300]
    k, prior = make_kernel("rbf"), GammaPrior()
    phi = np.array([0.5, 0.3, np.log(1e-4)])
    v, g = exact_log_posterior(X, y, k, prior, phi, single=True)
    v64, g64 = exact_log_posterior(X, y, k, prior, phi)
    assert v == v64 and np.array_equal(g, g64)


def test_exact_refuses_too_large_n(concrete):
    with pytest.raises(MemoryError, match="refused for n=1030"):
        exact_log_marginal(concrete.X_std, concrete.y_std, make_kernel("rbf"), 0.3, max_n=1000)


def test_stochastic_gradient_is_unbiased(problem):
    """100 independent ULISSE gradients (N_r = 4, the defaults). Tolerance: the mean is within 4.5
    standard errors of the exact Cholesky gradient in each of the 3 components (false alarm ≈ 2e-5).

    What this can see: an error in the estimator's assembly (a wrong probe scaling, a dropped term, the wrong
    θ) larger than ≈ 4.5 se. What it cannot see: a solver bias, which the Hutchinson noise of independent
    probes swamps (CG stopped at 1e-2 passes it); tests/exact/test_unbiased.py compares each draw with the
    exact gradient on the same probes for that."""
    op, y, _, exact = problem
    M = 100
    G = np.array([log_marginal_gradient(op, y, n_probes=4, rng=s).grad for s in range(M)])
    se = G.std(axis=0, ddof=1) / np.sqrt(M)
    assert np.all(np.abs(G.mean(axis=0) - exact) < 4.5 * se), (G.mean(axis=0), exact, se)
    assert np.all(G.std(axis=0) > 0)


Z_CRIT = 3.59  # two-sided normal quantile for a family-wise false alarm of 1e-3 over the 3 parameters


def _z_against_exact(est, exact) -> np.ndarray:
    """(3,) each component's error in standard errors of this gradient's own Hutchinson noise: the gradient
    is −½·mean of N_r per-probe trace samples + ½·(exact-to-tol quadratic term), so its standard error is
    ½·sd(trace samples)/√N_r (Rademacher probes, N_r = 256: the sample sd is accurate to ≈ 5 %)."""
    se = 0.5 * est.trace_samples.std(axis=1, ddof=1) / np.sqrt(est.trace_samples.shape[1])
    return (est.grad - exact) / se


def test_cg_gradient_with_many_probes_is_close(problem):
    """CG to 1e-6 with 256 probes: every component within Z_CRIT of its own standard error of the exact
    Cholesky gradient (a solver error of 1e-6 is far below that error). Power: the same estimator at a
    noise 3 % off (0.31 for 0.3) fails — measured |z| ≈ 12 on the noise component."""
    op, y, _, exact = problem
    est = log_marginal_gradient(op, y, n_probes=256, solver="cg", rng=0)
    assert np.all(np.abs(_z_against_exact(est, exact)) < Z_CRIT), _z_against_exact(est, exact)
    assert est.warm_start.shape == (op.n, 257) and est.probes.shape == (op.n, 256)
    wrong = KernelOperator(op.X, op.kernel, 0.31, mode="local")
    z = _z_against_exact(log_marginal_gradient(wrong, y, n_probes=256, solver="cg", rng=0), exact)
    assert np.max(np.abs(z)) > Z_CRIT, z


def test_relative_error_shrinks_with_more_probes(problem):
    """Mean relative error over 20 gradients: 16 probes must beat 1 probe by a factor > 1.6 (the
    Hutchinson part of the error shrinks like 1/sqrt(N_r), i.e. by 4)."""
    op, y, _, exact = problem

    def err(nr):
        return np.mean([np.linalg.norm(log_marginal_gradient(op, y, n_probes=nr, rng=100 + s).grad - exact)
                        for s in range(20)]) / np.linalg.norm(exact)

    e1, e16 = err(1), err(16)
    assert e16 < e1 / 1.6, (e1, e16)


def test_preconditioned_control_variate_gradient_is_unbiased(problem):
    """60 gradients with the pivoted-Cholesky preconditioner and trace control variate: mean within 4.5
    standard errors of the exact gradient. Like the test above, this checks the control variate's
    assembly, not a solver bias (tests/exact/test_unbiased.py, paired on probes, does)."""
    op, y, _, exact = problem
    M = 60
    G = np.array([log_marginal_gradient(op, y, n_probes=4, rng=s, precond="pivchol", precond_rank=100,
                                        control_variate=True).grad for s in range(M)])
    se = G.std(axis=0, ddof=1) / np.sqrt(M)
    assert np.all(np.abs(G.mean(axis=0) - exact) < 4.5 * se)


def test_nystrom_derivative_traces_match_dense(problem):
    """tr(P⁻¹∂_jP) and (P⁻¹r)ᵀ∂_jP r of the pivoted-Cholesky preconditioner with its pivots fixed, against
    dense matrices and central finite differences of P(θ)."""
    op, _, _, _ = problem
    P = PivotedCholesky(op, rank=60)
    cv = P.derivative_control(op)
    X, S, lp = op.X, P.pivots, op.log_params

    def dense_P(p):
        k = op.kernel.with_log_params(p[:-1])
        return k(X, X[S]) @ np.linalg.solve(k(X[S], X[S]), k(X[S], X)) + np.exp(p[-1]) * np.eye(op.n)

    Pd = dense_P(lp)
    np.testing.assert_allclose(Pd, P.L @ P.L.T + op.noise * np.eye(op.n), atol=1e-8)
    R = np.random.default_rng(3).standard_normal((op.n, 2))
    quad = cv.quad(R)
    for j in range(op.n_params):
        e = np.zeros(op.n_params)
        e[j] = 1e-6
        dP = (dense_P(lp + e) - dense_P(lp - e)) / 2e-6
        assert cv.traces[j] == pytest.approx(np.trace(np.linalg.solve(Pd, dP)), rel=1e-5, abs=1e-4)
        np.testing.assert_allclose(quad[j], np.einsum("ik,ik->k", np.linalg.solve(Pd, R), dP @ R),
                                   rtol=1e-5, atol=1e-4)


def test_fixed_probes_and_warm_start(problem):
    op, y, _, exact = problem
    first = log_marginal_gradient(op, y, n_probes=4, rng=1)
    again = log_marginal_gradient(op, y, probes=first.probes, x0=first.warm_start, rng=2)
    np.testing.assert_array_equal(again.probes, first.probes)
    assert again.cg_iterations.max() < first.cg_iterations.max()


@pytest.mark.parametrize("kw,msg", [
    (dict(n_probes=0), "n_probes"), (dict(solver="lu"), "solver"), (dict(probes=np.ones((5, 2))), "probes"),
    (dict(control_variate=True), "preconditioner"), (dict(precond="nystrom"), "precond"),
])
def test_gradient_input_errors(problem, kw, msg):
    op, y, _, _ = problem
    with pytest.raises(ValueError, match=msg):
        log_marginal_gradient(op, y, **kw)


def test_gradient_rejects_bad_y(problem):
    op, y, _, _ = problem
    with pytest.raises(ValueError, match="non-finite"):
        log_marginal_gradient(op, np.where(np.arange(op.n) == 3, np.nan, y))
    with pytest.raises(ValueError, match="rows"):
        log_marginal_gradient(op, y[:-1])


@pytest.mark.slow
def test_within_iteration_noise_covariance_is_unbiased(problem):
    """300 gradients with fresh probes (CG to 1e-8, so the probes are the only noise): the mean of the
    per-gradient noise_cov estimates equals the empirical covariance of the gradients. Tolerance: every
    variance within 30 % (the empirical variance of 300 draws has a relative sd near 8 %, the estimates'
    mean about 6 %; 30 % is beyond 3 combined sd)."""
    op, y, _, _ = problem
    rng = np.random.default_rng(5)
    ests = [log_marginal_gradient(op, y, n_probes=4, solver="cg", tol=1e-8, rng=rng) for _ in range(300)]
    G = np.array([e.grad for e in ests])
    V_hat = np.mean([e.noise_cov for e in ests], axis=0)
    V_emp = np.cov(G.T)
    np.testing.assert_allclose(np.diag(V_hat), np.diag(V_emp), rtol=0.3)
    assert ests[0].noise_cov.shape == (3, 3) and ests[0].trace_samples.shape == (3, 4)
    assert log_marginal_gradient(op, y, n_probes=1, solver="cg", rng=0).noise_cov is None


@pytest.mark.parametrize("solver", ["cg", "cg-ulisse"])
def test_k_inverse_y_to_its_own_tolerance_moves_the_gradient_by_under_a_percent_of_its_noise(problem, solver):
    """K⁻¹y solved to the samplers' ``mean_tol`` (1e-4) instead of far beyond: the quadratic form's error
    is deterministic, a bias, so it is held to 1 % of the gradient's probe-noise sd (32 probes; the same
    probes and roulette draws on both sides, so the difference is K⁻¹y's alone). Power: at 1e-2 the bias
    exceeds that."""
    from daskgp.mcmc.config import MEAN_TOL

    op, y, _, _ = problem
    pc = PivotedCholesky(op, rank=300)

    def grad(mean_tol):
        return log_marginal_gradient(op, y, n_probes=32, solver=solver, rng=3, precond=pc, tol=1e-6,
                                     mean_tol=mean_tol)

    ref, sd = grad(1e-11), np.sqrt(np.diag(grad(1e-11).noise_cov))
    bias = grad(MEAN_TOL).grad - ref.grad
    assert np.all(np.abs(bias) <= 0.01 * sd), bias / sd
    loose = grad(1e-2).grad - ref.grad
    assert np.any(np.abs(loose) > 0.01 * sd), loose / sd
