import numpy as np
import pytest
import scipy.linalg

from daskgp import KernelOperator, PivotedCholesky, cg, make_kernel, ulisse


@pytest.fixture(scope="module")
def system(concrete):
    op = KernelOperator(concrete.X_std, make_kernel("rbf", lengthscale=2.0), 0.3, mode="local")
    K = op.to_dense()
    return op, K, concrete.y_std


def test_cg_equals_cholesky_on_concrete(system):
    op, K, y = system
    exact = scipy.linalg.cho_solve(scipy.linalg.cho_factor(K), y)
    res = cg(op, y, tol=1e-10)
    assert res.converged.all()
    assert np.linalg.norm(res.x - exact) / np.linalg.norm(exact) < 1e-8
    assert res.residuals.shape == (res.iterations[0] + 1, 1)
    assert res.residuals[-1, 0] <= 1e-10 < res.residuals[0, 0]


def test_multi_rhs_equals_column_by_column(system, rng):
    op, K, y = system
    B = np.column_stack([y, rng.standard_normal((op.n, 3))])
    many = cg(op, B, tol=1e-9)
    for j in range(B.shape[1]):
        one = cg(op, B[:, j], tol=1e-9)
        # same algorithm per column; only BLAS rounding differs (matrix vs vector products)
        np.testing.assert_allclose(many.x[:, j], one.x, rtol=1e-7, atol=1e-9)
        assert abs(int(many.iterations[j]) - int(one.iterations[0])) <= 3
    assert many.n_products == many.iterations.max()  # every column shares each pass


def test_warm_start_and_preconditioner(system, rng):
    op, K, y = system
    cold = cg(op, y, tol=1e-9)
    warm = cg(op, y, x0=cold.x + 1e-4 * rng.standard_normal(op.n), tol=1e-9)
    assert warm.iterations[0] < cold.iterations[0]
    P = PivotedCholesky(op, rank=200)
    assert P.rank == 200 and P.residual_trace < 0.2 * op.n
    pre = cg(op, y, tol=1e-9, precond=P)
    np.testing.assert_allclose(pre.x, cold.x, rtol=1e-6, atol=1e-7)
    assert pre.iterations[0] < cold.iterations[0] / 2
    # the preconditioner's Woodbury solve and log-determinant equal the dense ones
    Pd = P.L @ P.L.T + op.noise * np.eye(op.n)
    np.testing.assert_allclose(P.solve(y), np.linalg.solve(Pd, y), rtol=1e-8)
    assert P.logdet() == pytest.approx(np.linalg.slogdet(Pd)[1], rel=1e-10)


def test_a_float32_preconditioner_apply_changes_neither_the_answer_nor_the_iterations(system, rng):
    """Issue 55: the preconditioner's low-rank correction W WᵀR (W = L C⁻ᵀ) in float32 halves its cost; P is
    then P32, within float32 rounding (~1e-7 relative) of the float64 one. CG solves K x = b whatever fixed
    preconditioner it is given, so the answer is CG's to its tolerance either way, in the same iterations
    (± 1: a preconditioner that close does not change CG's path until the residual is near its rounding).
    Power: the float32 apply is not the float64 one (it differs at float32 rounding, not at float64's)."""
    op, K, y = system
    B = np.column_stack([y, rng.choice([-1.0, 1.0], size=(op.n, 8))])
    p64 = PivotedCholesky(op, rank=200)
    p32 = PivotedCholesky(op, rank=200, apply_dtype="float32")
    assert p32.solve(B).dtype == np.float64
    rel = np.linalg.norm(p32.solve(B) - p64.solve(B)) / np.linalg.norm(p64.solve(B))
    assert 1e-10 < rel < 1e-5, rel
    a, b = cg(op, B, tol=1e-8, precond=p64), cg(op, B, tol=1e-8, precond=p32)
    assert a.converged.all() and b.converged.all()
    np.testing.assert_allclose(b.x, a.x, rtol=0, atol=1e-6 * np.abs(a.x).max())
    assert np.abs(a.iterations - b.iterations).max() <= 1
    with pytest.raises(ValueError, match="apply_dtype"):
        PivotedCholesky(op, rank=20, apply_dtype="float16")


def test_ulisse_is_unbiased(system):
    """4000 independent ULISSE estimates (one CG run, 4000 identical columns with their own uniform draws).
    Tolerance: every component's mean within 5 standard errors of the CG solution (per-component false
    alarm probability ~6e-7 under the CLT; 1030 components). β is small enough that every continuation
    length up to the full solution is reached by many of the runs, so the CLT applies (with the paper's
    larger β the estimator is still unbiased but so heavy-tailed that no finite sample shows it)."""
    op, K, y = system
    M = 4000
    full = cg(K, y, tol=1e-5)
    res = ulisse(K, np.repeat(y[:, None], M, axis=1), es_tol=1e-3, tol=1e-5, beta=0.01, rng=1)
    assert full.iterations[0] - res.es_iteration.max() >= 10  # a real stretch of randomised steps
    est = res.estimates[0]
    assert np.all(res.es_iteration > 0) and res.iterations.mean() < full.iterations[0]
    spread = est.std(axis=1, ddof=1)
    assert spread.max() > 1e-4  # really random
    z = (est.mean(axis=1) - full.x) / (spread / np.sqrt(M) + 1e-300)
    assert np.abs(z).max() < 5.0
    # and it is an estimate of the CG solution, not of the early-stopped iterate
    early = cg(K, y, tol=1e-3).x
    z_early = (est.mean(axis=1) - early) / (spread / np.sqrt(M))
    assert np.abs(z_early).max() > 5.0


@pytest.fixture(scope="module")
def slow_system():
    """A 300 × 300 SPD matrix with eigenvalues spread evenly (log scale) over [1, 1e4]: unpreconditioned CG
    takes ~230 steps to the early stop at 1e-2 and ~300 more to 1e-6, the slow tail where an early stop's
    roulette is tested hardest. (n, A, b, CG solution to 1e-6)."""
    rng = np.random.default_rng(0)
    n = 300
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * np.geomspace(1.0, 1e4, n)) @ Q.T
    A = 0.5 * (A + A.T)
    b = rng.standard_normal(n)
    return n, A, b, cg(A, b, tol=1e-6).x


@pytest.mark.parametrize("roulette,unbiased", [("residual", True), ("increment", True),
                                               ("exponential", False)])
def test_ulisse_at_the_default_beta_on_a_slow_system(slow_system, roulette, unbiased):
    """4,000 estimates of bᵀA⁻¹b at the default β = 1 and es_tol 1e-2 → tol 1e-6 (one CG run shared). The
    mean must lie within 4 standard errors (two-sided false alarm 6e-5) of the CG value for the roulettes
    whose survival follows CG's convergence; the paper's p_i = exp(−βi) is the known-wrong variant: its
    survival falls as exp(−i²/2) while CG's increments shrink geometrically, so the draws that carry its
    mean have probabilities far below 1/4,000 and its sample mean sits tens of standard errors low
    (measured: z = −27 and −29 for two seeds; the residual and increment roulettes ±0.5)."""
    n, A, b, x = slow_system
    M = 4000
    res = ulisse(A, b, es_tol=1e-2, tol=1e-6, n_estimates=M, rng=3, roulette=roulette)
    f = res.estimates @ b
    z = (f.mean() - x @ b) / (f.std(ddof=1) / np.sqrt(M))
    assert (abs(z) < 4.0) == unbiased, (roulette, z)


def test_ulisse_two_estimates_are_independent(system):
    """Two estimates from one run: their errors are uncorrelated (|corr| < 4/sqrt(M), M = 2000 runs)."""
    op, K, y = system
    M = 2000
    full = cg(K, y, tol=1e-5).x
    res = ulisse(K, np.repeat(y[:, None], M, axis=1), es_tol=1e-3, tol=1e-5, beta=0.01, n_estimates=2,
                 rng=2)
    ea = res.estimates[0] - full[:, None]
    eb = res.estimates[1] - full[:, None]
    a, b = ea.T @ y, eb.T @ y  # one scalar summary per run
    corr = np.corrcoef(a, b)[0, 1]
    assert abs(corr) < 4 / np.sqrt(M)
    assert not np.allclose(res.estimates[0], res.estimates[1])


def test_ulisse_per_column_estimate_counts(system, rng):
    op, K, y = system
    B = np.column_stack([y, rng.standard_normal(op.n)])
    res = ulisse(op, B, es_tol=1e-1, tol=1e-8, n_estimates=[2, 1], rng=0)
    assert np.isfinite(res.estimates[:, :, 0]).all()
    assert np.isfinite(res.estimates[0, :, 1]).all() and np.isnan(res.estimates[1, :, 1]).all()


def test_ulisse_per_column_thresholds_leave_an_infinite_ones_column_to_plain_cg(system, rng):
    """es_tol (k,): a column whose threshold is inf is solved by CG to tol (its estimates are that solution,
    deterministic); the others stop early as with a scalar threshold, their estimates random."""
    op, K, y = system
    B = np.column_stack([y, rng.standard_normal((op.n, 2))])
    res = ulisse(op, B, es_tol=[np.inf, 1e-2, 1e-2], tol=1e-8, rng=0)
    plain = cg(op, B[:, 0], tol=1e-8)
    # the same algorithm on that column; only BLAS rounding differs (block against vector products)
    np.testing.assert_allclose(res.estimates[0, :, 0], plain.x, rtol=1e-6, atol=1e-8)
    assert np.array_equal(res.estimates[0, :, 0], res.x[:, 0])
    assert res.es_iteration[0] == -1 and res.converged[0]
    assert abs(res.iterations[0] - plain.iterations[0]) <= 3
    assert np.all(res.es_iteration[1:] >= 0) and np.all(res.iterations[1:] < res.iterations[0])
    scalar = ulisse(op, B[:, 1:], es_tol=1e-2, tol=1e-8, rng=0)
    assert np.array_equal(scalar.es_iteration, res.es_iteration[1:])
    with pytest.raises(ValueError, match="es_tol > tol"):
        ulisse(op, B, es_tol=[np.inf, 1e-9, 1e-2], tol=1e-8)


def test_a_warm_start_costs_a_product_only_for_its_nonzero_columns(system, rng):
    """A sampler keeps K⁻¹y's iterate and starts its fresh probes from zero: no product for those, and a
    warm start of all zeros is a cold start."""
    op, K, y = system
    B = np.column_stack([y, rng.standard_normal(op.n)])
    cold = cg(op, B, tol=1e-9)
    zero = cg(op, B, x0=np.zeros_like(B), tol=1e-9)
    assert zero.n_products == cold.n_products and np.array_equal(zero.x, cold.x)
    x0 = np.column_stack([cold.x[:, 0] + 1e-6 * rng.standard_normal(op.n), np.zeros(op.n)])
    warm = cg(op, B, x0=x0, tol=1e-9)
    assert warm.n_products == 1 + warm.iterations.max() and warm.iterations[0] < cold.iterations[0]
    np.testing.assert_allclose(warm.x, cold.x, rtol=1e-6, atol=1e-8)


def test_zero_right_hand_side_gives_zero(system, rng):
    op, K, y = system
    B = np.column_stack([np.zeros(op.n), y])
    res = cg(op, B, x0=rng.standard_normal((op.n, 2)), tol=1e-8)
    assert np.all(res.x[:, 0] == 0) and res.iterations[0] == 0 and res.converged.all()
    est = ulisse(op, B, es_tol=1e-2, tol=1e-6, rng=0).estimates
    assert np.all(est[0, :, 0] == 0)


def test_solver_input_errors(system):
    op, K, y = system
    with pytest.raises(ValueError, match="es_tol > tol"):
        ulisse(op, y, es_tol=1e-9, tol=1e-8)
    with pytest.raises(ValueError, match="beta"):
        ulisse(op, y, beta=0.0)
    with pytest.raises(ValueError, match="shape"):
        cg(op, y[:10])
    with pytest.raises(ValueError, match="square"):
        cg(np.ones((3, 4)), np.ones(3))
    with pytest.raises(FloatingPointError, match="positive definite"):
        cg(-np.eye(3), np.ones(3))


def test_preconditioner_from_pivots_equals_pivoted_cholesky(system):
    """The pivoted Cholesky with pivot set S is the Nyström approximation on S: rebuilding from the pivots
    gives the same L Lᵀ, and after a θ change it equals a dense Nyström at the new θ."""
    op, K, y = system
    P = PivotedCholesky(op, rank=80)
    Q = PivotedCholesky.from_pivots(op, P.pivots)
    np.testing.assert_allclose(Q.L @ Q.L.T, P.L @ P.L.T, atol=1e-7)
    assert Q.residual_trace == pytest.approx(P.residual_trace, rel=1e-6, abs=1e-6)
    op2 = KernelOperator(op.X, op.kernel.with_log_params(op.kernel.log_params + 0.3), 0.2, mode="local")
    Q2 = PivotedCholesky.from_pivots(op2, P.pivots)
    k, S, X = op2.kernel, P.pivots, op.X
    nys = k(X, X[S]) @ np.linalg.solve(k(X[S], X[S]), k(X[S], X))
    # K_SS is ill-conditioned: the dense solve and the jittered Cholesky differ at ~1e-5
    np.testing.assert_allclose(Q2.L @ Q2.L.T, nys, atol=1e-4)
    assert Q2.noise == 0.2


def test_each_column_stops_at_its_own_tolerance(system, rng):
    """``tol`` per column (K⁻¹y's own tolerance beside the probes'): a loose column stops early, a tight
    one runs on, and each matches its own solve alone; a tolerance list of the wrong length is refused."""
    op, K, y = system
    B = np.column_stack([y, rng.standard_normal(op.n)])
    both = cg(op, B, tol=np.array([1e-3, 1e-9]))
    assert both.converged.all() and both.iterations[0] < both.iterations[1]
    for j, tol in enumerate((1e-3, 1e-9)):
        alone = cg(op, B[:, j], tol=tol)
        assert abs(int(alone.iterations[0]) - int(both.iterations[j])) <= 2
        assert both.residuals[int(both.iterations[j]), j] <= tol
    with pytest.raises(ValueError):
        cg(op, B, tol=np.array([1e-3, 1e-6, 1e-9]))
