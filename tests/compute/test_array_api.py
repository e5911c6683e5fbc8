"""One array code path: every numerical routine on ``array_api_strict`` arrays (the CI stand-in for cupy)
against the numpy path on real data (concrete, standardised).

Each test asserts the type of every array it gets back: a silent conversion to numpy anywhere in the path
fails it. The numpy and strict paths draw the same probes and the same ULISSE uniforms from the same seeds,
so they compute the same numbers in a different order of floating-point operations: tolerances are a few
hundred units of round-off, not statistical.
"""

import array_api_strict as xps
import numpy as np
import pytest

from daskgp import KernelOperator, make_kernel
from daskgp.compute.backend import gpu_available
from daskgp.compute.solvers import PivotedCholesky, cg, ulisse
from daskgp.exact.marginal import log_marginal_gradient
from daskgp.exact.posterior import GPPosterior
from daskgp.mcmc.samplers import StepSchedule, sgld
from daskgp.sparse.bound import GlobalParams, bound_and_grads
from daskgp.sparse.chunks import LocalRows

N = 400  # rows of concrete: the generic path allocates per tile, so keep it small


def strict(a):
    return xps.asarray(np.asarray(a))


def is_strict(*arrays) -> bool:
    return all(type(a).__module__.startswith("array_api_strict") for a in arrays)


@pytest.fixture(scope="module")
def data():
    import daskgp

    ds = daskgp.load("concrete")
    return ds.X_std[:N], ds.y_std[:N]


def _pair(X, name="matern52", ard=True, **kw):
    k = make_kernel(name, variance=1.3, lengthscale=np.linspace(1.5, 3.0, X.shape[1]) if ard else 2.0,
                    ard=ard)
    return (KernelOperator(X, k, 0.25, mode="local", **kw),
            KernelOperator(strict(X), k, 0.25, mode="local", **kw))


@pytest.mark.parametrize("name,ard", [("rbf", False), ("matern32", True), ("matern52", True)])
@pytest.mark.parametrize("cache", [False, True])
def test_operator_products_and_derivative_products(data, name, ard, cache, rng):
    X, _ = data
    op, ops = _pair(X, name, ard, cache=cache, block_rows=150)
    V = rng.standard_normal((N, 3))
    for _ in range(2):  # the second pass reads the cached kernel rows when cache=True
        out = ops.matmul(strict(V))
        assert is_strict(out) and out.dtype == xps.float64 and out.shape == (N, 3)
        np.testing.assert_allclose(np.asarray(out), op.matmul(V), rtol=1e-12, atol=1e-12)
    KV, dKV = ops.matmul_grads(strict(V))
    KVn, dKVn = op.matmul_grads(V)
    assert is_strict(KV, dKV) and dKV.shape == (op.n_params, N, 3)
    np.testing.assert_allclose(np.asarray(KV), KVn, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(dKV), dKVn, rtol=1e-10, atol=1e-11)
    one = ops.matmul(strict(V[:, 0]))  # a vector in, a vector out
    assert is_strict(one) and one.shape == (N,)
    rows, diag = ops.kernel_rows([3, 7, 11]), ops.diag()
    assert is_strict(rows, diag, ops.to_dense())
    np.testing.assert_allclose(np.asarray(rows), op.kernel_rows([3, 7, 11]), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(diag), op.diag(), rtol=1e-15)


def test_numpy_right_hand_sides_are_uploaded_to_the_operators_namespace(data, rng):
    X, _ = data
    _, ops = _pair(X)
    V = rng.standard_normal((N, 2))
    assert is_strict(ops.matmul(V))


def test_cg_and_ulisse_on_a_dense_matrix_match_the_numpy_path_exactly(data, rng):
    """The solvers' own arithmetic on the same dense, well-conditioned matrix (K + 10I): CG to 1e-10 takes
    the same steps ± 1 (the numpy path's fancy-indexed copies change BLAS's summation order, which moved the
    last crossing by one step on one CPU) to solutions within the residuals' bound; ULISSE at 1e-8 crosses
    the early-stop threshold at the same step, draws the same roulette and returns the same numbers (1e-9:
    summation order)."""
    X, y = data
    op, _ = _pair(X, "matern32", True)
    A = op.to_dense() + 10.0 * np.eye(N)
    B = np.column_stack([y, rng.choice([-1.0, 1.0], size=(N, 3))])
    ref, out = cg(A, B, tol=1e-10), cg(strict(A), strict(B), tol=1e-10)
    assert is_strict(out.x) and type(out.iterations) is np.ndarray
    # CG to 1e-10 takes ~20 steps here, and summation order can move the last crossing by one step (seen on
    # one CPU): the same steps ± 1, and solutions within both residuals' bound 2·1e-10·cond(A)
    assert np.abs(out.iterations - ref.iterations).max() <= 1, (out.iterations, ref.iterations)
    w = np.linalg.eigvalsh(A)
    err = np.linalg.norm(np.asarray(out.x) - ref.x, axis=0) / np.linalg.norm(ref.x, axis=0)
    assert (err <= 2e-10 * w.max() / w.min()).all(), err
    warm = cg(strict(A), strict(B), x0=out.x, tol=1e-10)  # a warm start of the namespace
    assert is_strict(warm.x) and warm.iterations.max() <= 1
    assert is_strict(cg(strict(A), strict(y), tol=1e-8).x)  # a vector in, a vector out
    n_est = np.array([2, 1, 1, 1])
    for seed in range(3):
        ref = ulisse(A, B, es_tol=1e-2, tol=1e-8, n_estimates=n_est, rng=seed)
        out = ulisse(strict(A), strict(B), es_tol=1e-2, tol=1e-8, n_estimates=n_est, rng=seed)
        assert is_strict(out.x, out.estimates) and out.estimates.shape == (2, N, 4)
        np.testing.assert_array_equal(out.iterations, ref.iterations)
        np.testing.assert_array_equal(out.es_iteration, ref.es_iteration)
        np.testing.assert_allclose(np.asarray(out.estimates), ref.estimates, rtol=1e-9, atol=1e-11)
        assert np.isnan(np.asarray(out.estimates)[1, :, 1:]).all()  # a column's missing estimates are NaN


def test_cg_through_the_operator(data, rng):
    """Through the kernel operator the strict path evaluates the kernel in another order of operations
    (r² = |z|² + |z'|² − 2 z·z' against the numpy tiles' augmented product): ~1e-16 relative differences in K,
    which ~85 CG steps amplify; the solutions agree to the solve's tolerance. The iteration counts near a
    1e-10 residual depend on that round-off (array-api-strict 2.6 / numpy 2.5 took 85–91 where the numpy
    path took 85–86; earlier versions were within 2), so they are compared within 10 %; what the strict
    path must get right is the solution, checked to 1e-7 below."""
    X, y = data
    op, ops = _pair(X, "matern32", True)
    B = np.column_stack([y, rng.choice([-1.0, 1.0], size=(N, 2))])
    ref, out = cg(op, B, tol=1e-10), cg(ops, strict(B), tol=1e-10)
    assert is_strict(out.x)
    assert np.all(np.abs(out.iterations - ref.iterations) <= 0.1 * ref.iterations)
    np.testing.assert_allclose(np.asarray(out.x), ref.x, rtol=1e-7, atol=1e-8)
    res = ulisse(ops, strict(B), es_tol=1e-2, tol=1e-8, n_estimates=2, rng=0)
    assert is_strict(res.x, res.estimates) and np.isfinite(np.asarray(res.estimates)).all()


def test_preconditioner_and_its_derivative_control(data, rng):
    """The greedy pivot search takes the same pivots on both paths (ties to the lowest index, the tracked
    residual diagonal in the block factorisation), and the factor, solve, log-determinant and derivative
    control agree (1e-8)."""
    X, _ = data
    op, ops = _pair(X, "matern52", True)
    pc, pcs = PivotedCholesky(op, rank=60), PivotedCholesky(ops, rank=60)
    np.testing.assert_array_equal(pcs.pivots, pc.pivots)
    assert is_strict(pcs.L) and pcs.L.shape == pc.L.shape
    np.testing.assert_allclose(np.asarray(pcs.L), pc.L, rtol=1e-8, atol=1e-10)
    assert pcs.residual_trace == pytest.approx(pc.residual_trace, rel=1e-10)
    same = PivotedCholesky.from_pivots(ops, pc.pivots)
    pc = PivotedCholesky.from_pivots(op, pc.pivots)
    assert is_strict(same.L)
    np.testing.assert_allclose(np.asarray(same.L), pc.L, rtol=1e-8, atol=1e-10)
    R = rng.standard_normal((N, 2))
    np.testing.assert_allclose(np.asarray(same.solve(strict(R))), pc.solve(R), rtol=1e-8)
    assert same.logdet() == pytest.approx(pc.logdet(), rel=1e-12)
    cv, cvs = pc.derivative_control(op), same.derivative_control(ops)
    assert is_strict(cvs.traces, cvs.quad(strict(R)))
    np.testing.assert_allclose(np.asarray(cvs.traces), cv.traces, rtol=1e-8)
    np.testing.assert_allclose(np.asarray(cvs.quad(strict(R))), cv.quad(R), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("settings", [dict(solver="cg", tol=1e-10),
                                      dict(solver="cg", tol=1e-10, precond="pivchol", precond_rank=40,
                                           control_variate=True),
                                      dict(solver="ulisse", es_tol=3e-2, tol=1e-7)])
def test_unbiased_gradient(data, settings):
    """CG to 1e-10: the same gradient to 1e-6 (the operator's round-off, see above). ULISSE's early stop
    makes the estimate a discontinuous function of the residuals, so a 1e-16 difference may stop a column a
    step apart: there only the namespace and the probes are compared, and the two estimates must agree
    within the estimator's own spread (10 of its probe sd)."""
    X, y = data
    op, ops = _pair(X, "rbf", True)
    ref = log_marginal_gradient(op, y, n_probes=4, rng=11, **settings)
    est = log_marginal_gradient(ops, strict(y), n_probes=4, rng=11, **settings)
    arrays = (est.grad, est.probes, est.warm_start, est.trace_terms, est.quad_terms, est.trace_samples,
              est.noise_cov)
    assert is_strict(*arrays)
    np.testing.assert_array_equal(np.asarray(est.probes), ref.probes)  # the same host-drawn probes
    if settings["solver"] == "cg":
        np.testing.assert_allclose(np.asarray(est.grad), ref.grad, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(est.noise_cov), ref.noise_cov, rtol=1e-5, atol=1e-8)
    else:
        sd = np.sqrt(np.diag(ref.noise_cov))
        assert np.all(np.abs(np.asarray(est.grad) - ref.grad) <= 10 * sd)


def test_twenty_sgld_iterations_of_one_chain(data):
    """The chain's state (φ, the probe state's arrays) and its draws: the numpy and the strict chain take
    the same steps (solves to 1e-10, draws to 1e-7); the probe state stays on the operator's device and is
    stored as numpy."""
    X, y = data
    runs = []
    for op, yy in zip(_pair(X, "rbf", False), (y, strict(y)), strict=True):
        post = GPPosterior(op, yy, n_probes=4, redraw_every=10, rng=3, solver="cg", tol=1e-10)
        res = sgld(post.stochastic_grad, np.log([1.0, 2.0, 0.25]), 20, batch=10, rng=4,
                   schedule=StepSchedule(1e-3, 5e-4, 20))
        runs.append((res, post))
    (ref, _), (res, post) = runs
    assert is_strict(post.y, post.state.probes, post.state.x0)
    saved = post.state.to_dict()
    assert type(saved["probes"]) is np.ndarray and type(saved["x0"]) is np.ndarray
    assert res.draws.shape == (20, 3) and np.isfinite(res.draws).all()
    np.testing.assert_allclose(res.draws, ref.draws, rtol=1e-7, atol=1e-9)


def test_sgpr_bound_and_gradient(data):
    """The observed-input statistics, their sum, the collapsed bound and its gradient over two chunks."""
    X, y = data
    Z = X[::20][:15]
    theta = GlobalParams(Z, 1.2, np.full(X.shape[1], 2.0), noise=0.25)
    half = N // 2
    chunks_np = [{"Y": y[a:b, None], "X": X[a:b]} for a, b in ((0, half), (half, N))]
    chunks_s = [{k: strict(v) for k, v in c.items()} for c in chunks_np]
    F, grad, total = LocalRows(chunks_np).bound_and_grad(theta)
    Fs, grads, totals = LocalRows(chunks_s).bound_and_grad(theta)
    assert is_strict(totals.C, totals.D)
    assert type(grads) is np.ndarray  # the optimiser's vector: on the host by design
    assert Fs == pytest.approx(F, rel=1e-12)
    np.testing.assert_allclose(grads, grad, rtol=1e-9, atol=1e-9)
    g = bound_and_grads(totals, theta)
    assert is_strict(g.GC, g.GD, g.dZ, g.dls)


def test_float32_is_kept_by_products_and_refused_by_solvers(data, rng):
    X, y = data
    k = make_kernel("rbf", lengthscale=2.0)
    ops = KernelOperator(xps.asarray(X, dtype=xps.float32), k, 0.25, mode="local")
    V = rng.standard_normal((N, 2))
    out = ops.matmul(V)
    assert is_strict(out) and out.dtype == xps.float32
    ref = KernelOperator(X, k, 0.25, mode="local").matmul(V)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-4, atol=1e-4)
    KV, dKV = ops.matmul_grads(V)
    assert KV.dtype == dKV.dtype == xps.float32
    op32 = KernelOperator(X.astype(np.float32), k, 0.25, mode="local")  # numpy float32: the same rule
    assert op32.matmul(V).dtype == np.float32
    with pytest.raises(ValueError, match="needs float64"):
        cg(ops, xps.asarray(V, dtype=xps.float32))
    with pytest.raises(ValueError, match="needs float64"):
        log_marginal_gradient(ops, y, n_probes=2, rng=0)
    with pytest.raises(ValueError, match="needs float64"):
        PivotedCholesky(ops, rank=10)


def test_operator_input_checks_in_the_namespace(data):
    X, _ = data
    k = make_kernel("rbf")
    bad = np.array(X)
    bad[5, 2] = np.nan
    with pytest.raises(ValueError, match=r"non-finite value\(s\).*\(5, 2\)"):
        KernelOperator(strict(bad), k, 0.25)
    with pytest.raises(ValueError, match="2-D"):
        KernelOperator(xps.reshape(strict(X), (N, 4, 2)), k, 0.25)
    _, ops = _pair(X)
    with pytest.raises(ValueError, match=r"shape \(400,\)"):
        ops.matmul(strict(np.ones((N + 1, 2))))
    with pytest.raises(ValueError, match="device must be"):
        KernelOperator(X, k, 0.25, device="tpu")
    if not gpu_available():  # the CI machines: one clear error, and "auto" falls back to numpy
        with pytest.raises(ValueError, match="needs cupy"):
            KernelOperator(X, k, 0.25, mode="local", device="gpu")
        assert type(KernelOperator(X, k, 0.25, mode="local", device="auto").X) is np.ndarray


@pytest.mark.cluster
def test_distributed_operator_on_the_workers_devices_equals_local(data, client, rng):
    """device= in distributed mode: each worker moves X to its device once ('auto' on these CPU workers:
    numpy) and sends the products back to this process's namespace."""
    X, _ = data
    k = make_kernel("matern52", lengthscale=np.linspace(1.5, 3.0, X.shape[1]), ard=True)
    local = KernelOperator(X, k, 0.25, mode="local", cache=False)
    V = rng.standard_normal((N, 3))
    for device in ("cpu", "auto"):
        dist = KernelOperator(X, k, 0.25, mode="distributed", client=client, block_rows=150, device=device)
        out = dist.matmul(V)
        assert type(out) is np.ndarray
        np.testing.assert_allclose(out, local.matmul(V), rtol=1e-12)
        KV, dKV = dist.matmul_grads(V)
        np.testing.assert_allclose(dKV, local.matmul_grads(V)[1], rtol=1e-10, atol=1e-12)
        dist.close()
    with pytest.raises(ValueError, match="already"):
        KernelOperator(strict(X), k, 0.25, mode="distributed", client=client, device="cpu")


@pytest.mark.cluster
def test_sgpr_chunks_placed_on_the_workers_devices(data, client):
    """ChunkedRows(device='auto') puts each chunk on its worker's device (numpy on these CPU workers) and
    gives the same bound and gradient; the estimator refuses an unknown device, and device='gpu' on a worker
    without one fails with the backend's one clear error."""
    from daskgp.sparse.chunks import ChunkedRows
    from daskgp.sparse.sgpr import SparseGPRegressor

    X, y = data
    theta = GlobalParams(X[::20][:15], 1.2, np.full(X.shape[1], 2.0), noise=0.25)
    ref = ChunkedRows.from_arrays(client, y, 150, X=X).bound_and_grad(theta)
    got = ChunkedRows.from_arrays(client, y, 150, X=X, device="auto").bound_and_grad(theta)
    assert got[0] == pytest.approx(ref[0], rel=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)
    with pytest.raises(ValueError, match="'device' parameter of SparseGPRegressor must be"):
        SparseGPRegressor(n_inducing=10, device="tpu").fit(X, y, client=client)
    if not gpu_available():
        with pytest.raises(ValueError, match="needs cupy"):
            SparseGPRegressor(n_inducing=10, max_iter=2, device="gpu").fit(X, y, client=client)


def test_sampler_config_device():
    from daskgp.mcmc.config import SamplerConfig

    assert SamplerConfig(method="sghmc").device == "cpu"
    assert SamplerConfig.from_dict({"device": "auto"}).device == "auto"
    with pytest.raises(ValueError, match="device must be"):
        SamplerConfig(method="sghmc", device="tpu").validate()
