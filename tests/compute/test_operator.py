import numpy as np
import pytest

from daskgp import KernelOperator, make_kernel
from daskgp.compute.cluster import cluster_workers

CASES = [("rbf", False), ("rbf", True), ("matern32", True), ("matern52", False), ("matern52", True)]


def _op(X, name, ard, **kw):
    d = X.shape[1]
    k = make_kernel(name, variance=1.3, lengthscale=np.linspace(1.5, 3.0, d) if ard else 2.0, ard=ard)
    return KernelOperator(X, k, 0.25, **kw)


@pytest.mark.parametrize("name,ard", CASES)
@pytest.mark.parametrize("block_rows", [97, 400])
def test_blockwise_products_equal_dense(concrete, name, ard, block_rows, rng):
    X = concrete.X_std
    op = _op(X, name, ard, mode="local", block_rows=block_rows, cache=False)
    assert op.blocks[-1][1] - op.blocks[-1][0] != block_rows  # uneven last block
    K = op.to_dense()
    dK = list(op.kernel.gradients(X)) + [op.noise * np.eye(op.n)]
    V = rng.standard_normal((op.n, 3))
    np.testing.assert_allclose(op.matmul(V), K @ V, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(op.matmul(V[:, 0]), K @ V[:, 0], rtol=1e-12, atol=1e-10)
    KV, dKV = op.matmul_grads(V)
    np.testing.assert_allclose(KV, K @ V, rtol=1e-12, atol=1e-10)
    assert dKV.shape == (op.n_params, op.n, 3)
    for j in range(op.n_params):
        np.testing.assert_allclose(dKV[j], dK[j] @ V, rtol=1e-10, atol=1e-9, err_msg=op.param_names[j])


def test_derivative_products_match_finite_differences(concrete, rng):
    op = _op(concrete.X_std[:300], "matern52", True, mode="local", cache=False)
    V = rng.standard_normal((300, 2))
    _, dKV = op.matmul_grads(V)
    lp, h = op.log_params, 1e-6
    for j in range(op.n_params):
        e = np.zeros_like(lp)
        e[j] = h
        up = op.with_log_params(lp + e).matmul(V)
        down = op.with_log_params(lp - e).matmul(V)
        np.testing.assert_allclose(dKV[j], (up - down) / (2 * h), rtol=1e-5, atol=1e-6)


def test_cache_is_used_and_dropped_when_theta_changes(concrete, rng):
    """The executor owns the cached rows: an operator at a new θ (``with_log_params``) shares them, finds
    their θ stale and rebuilds them in the same memory; the original operator is unchanged and still
    right; closing the owner frees the rows."""
    op = _op(concrete.X_std, "rbf", False, mode="local", block_rows=200, cache=True)
    V = rng.standard_normal((op.n, 2))
    first = op.matmul(V)
    cache = op.executor.cache
    assert len(cache) == len(op.blocks)
    memory = [v[1] for v in cache.values()]
    np.testing.assert_allclose(op.matmul(V), first, rtol=1e-14)
    moved = op.with_log_params(op.log_params + 0.1)
    assert moved.executor is op.executor and not np.array_equal(moved.log_params, op.log_params)
    fresh = _op(concrete.X_std, "rbf", False, mode="local", cache=False).with_log_params(moved.log_params)
    np.testing.assert_allclose(moved.matmul(V), fresh.matmul(V), rtol=1e-12)  # stale rows not reused
    assert all(a is b[1] for a, b in zip(memory, cache.values(), strict=True))  # rebuilt in place
    np.testing.assert_allclose(op.matmul(V), first, rtol=1e-14)  # the original is K at its own θ
    assert op.n_products == moved.n_products == 4  # one counter for the family
    moved.close()  # a derived operator leaves the shared executor open
    assert len(cache) == len(op.blocks)
    op.close()
    assert not cache


def test_an_injected_executor_is_shared_and_left_open(concrete, rng):
    """Two operators on one executor (``executor=``): same products as an operator with its own; closing
    them leaves the executor's threads and rows to its owner, and its pass count covers both (the executor
    counts, the operators are values); the in-place θ setter is gone."""
    from daskgp.compute.executors import LocalExecutor

    X = concrete.X_std
    ex = LocalExecutor(X, n_threads=2)
    a = _op(X, "matern32", True, executor=ex, cache=True)
    own = _op(X, "matern32", True, mode="local", cache=False)
    V = rng.standard_normal((a.n, 3))
    np.testing.assert_allclose(a.matmul(V), own.matmul(V), rtol=1e-12)
    a.close()
    assert ex.cache and ex._pool is not None and not ex._pool._shutdown
    with pytest.raises(ValueError, match="executor holds X"):
        _op(X[:100], "rbf", False, executor=ex)
    moved = own.with_log_params(own.log_params + 0.2)  # a new operator at θ'; own stays at θ
    np.testing.assert_allclose(moved.matmul(V), a.with_log_params(moved.log_params).matmul(V), rtol=1e-12)
    np.testing.assert_allclose(own.matmul(V), a.matmul(V), rtol=1e-12)
    assert a.n_products == ex.passes == 3 and own.n_products == moved.n_products == 3
    assert not hasattr(own, "set_log_params")  # the in-place alias was retired (issue 57)
    ex.close()


def test_float32_cache_products_and_cg_solutions_match_float64(concrete, rng):
    """A float32 cache perturbs K by ~1e-7 relative (rounding of the rows and of V, float32 accumulation
    over n = 1,030 terms): products within 1e-5 of the dense float64 ones; preconditioned as the samplers
    solve (pivoted Cholesky, rank 300), CG to 1e-8 within the perturbation bound ‖K⁻¹‖‖δK‖ (measured δK) of
    the float64 solution, column by column, in at most 10 % more iterations. (Unpreconditioned, this
    system takes 110 iterations in float64 and 151 in float32: the rounding of every product slows CG's
    long recurrences.)"""
    from daskgp.compute.solvers import PivotedCholesky, cg

    X = concrete.X_std
    op32 = _op(X, "matern52", True, mode="local", block_rows=300, cache=True, cache_dtype="float32")
    op64 = _op(X, "matern52", True, mode="local", block_rows=300, cache=True)
    V = rng.standard_normal((op32.n, 4))
    K = op64.to_dense()
    for _ in range(2):  # building the cache, then reading it
        got = op32.matmul(V)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, K @ V, rtol=1e-5, atol=1e-5 * np.abs(K @ V).max())
    rows = [v[1] for v in op32.executor.cache.values()]
    assert len(rows) == len(op32.blocks) and all(r.dtype == np.float32 for r in rows)
    pc = PivotedCholesky(op64, rank=300)
    s32, s64 = cg(op32, V, tol=1e-8, precond=pc), cg(op64, V, tol=1e-8, precond=pc)
    assert s32.converged.all() and s64.converged.all()
    # the first-order perturbation bound |δx|/|x| ≤ ‖K⁻¹‖‖δK‖ for the cache's rounding δK, plus both solves'
    # own error (relative residual 1e-8 each, amplified by cond K); an elementwise 1e-5 had held on one CPU
    # and not on another (float32 summation order differs between BLAS kernels)
    dK = np.linalg.norm(op32.matmul(np.eye(op32.n)) - K, 2)
    w = np.linalg.eigvalsh(K)
    bound = dK / w.min() + 2e-8 * w.max() / w.min()
    err = np.linalg.norm(s32.x - s64.x, axis=0) / np.linalg.norm(s64.x, axis=0)
    assert (err <= bound).all(), (err, bound)
    assert np.max(s32.iterations) <= 1.1 * np.max(s64.iterations), (s32.iterations, s64.iterations)
    op32 = op32.with_log_params(op32.log_params + 0.1)  # rebuilt in the same float32 memory
    op64 = op64.with_log_params(op64.log_params + 0.1)
    np.testing.assert_allclose(op32.matmul(V), op64.matmul(V), rtol=1e-5, atol=1e-5 * np.abs(K @ V).max())
    with pytest.raises(ValueError, match="cache_dtype"):
        _op(X, "rbf", False, cache_dtype="float16")


def test_a_float32_cache_product_is_padded_to_sixteen_columns_and_is_a_float32_product(rng):
    """Issue 55, item 1: float32 cached rows times 9-15 columns are multiplied as 16 (OpenBLAS's kernel is
    faster so), the extra columns zero and dropped; every other width is numpy's product untouched. Checked
    for every width 1-40 (float64 or float32 V, C- or F-ordered):

    - the padded widths are exactly ``(rows @ [V, 0])[:, :k]`` and the others exactly ``rows @ V`` in float32
      (bits), and a second call gives the same bits (the chains' bit-identity across workers of one build
      rests on every worker computing a width the same way);
    - every entry is within the worst-case error of a float32 dot product of length n,
      |fl(r·v) − r·v| ≤ γ_n Σ|r_l v_l| with γ_n = nu / (1 − nu), u = 2⁻²⁴ (Higham, *Accuracy and Stability*,
      eq. 3.5), against the float64 product of the same float32 values — a bound any correct summation
      order meets.

    Whether padding leaves the bits of the unpadded product unchanged depends on the BLAS build: it did with
    the OpenBLAS measured in ``benchmarks/results/product_width.json`` (SkylakeX kernel); with numpy 2.5.5's
    OpenBLAS 0.3.34 the 9-15-column remainder sums in another order, so the two differ in the last float32
    bits, within the bound (found by CI on 12-02). Power: the same
    product with its columns taken one place off (a slicing slip) breaks the bound; float64 arithmetic on the
    same rows is not the float32 product's bits."""
    from daskgp.compute.cached import PAD_F32, PAD_TO, cached_product

    n = 2_300
    rows = rng.standard_normal((700, n)).astype(np.float32)
    u = 2.0 ** -24
    gamma = n * u / (1 - n * u)
    assert set(PAD_F32) == set(range(9, 16)) and PAD_TO == 16
    r64 = rows.astype(np.float64)
    for k in range(1, 41):
        V = rng.standard_normal((n, k))
        V32 = V.astype(np.float32)
        if k in PAD_F32:
            padded = np.zeros((n, PAD_TO), np.float32)
            padded[:, :k] = V32
            spec = (rows @ padded)[:, :k]
        else:
            spec = rows @ V32
        exact = r64 @ V32.astype(np.float64)
        bound = gamma * (np.abs(r64) @ np.abs(V32.astype(np.float64)))
        for v in (V, np.asfortranarray(V)):
            got = cached_product(rows, v)
            assert got.dtype == np.float64 and got.shape == (700, k)
            assert np.array_equal(got, spec.astype(np.float64)), k
            assert np.array_equal(got, cached_product(rows, v)), k
            assert np.all(np.abs(got - exact) <= bound), k
        got32 = cached_product(rows, V32)
        assert got32.dtype == np.float32 and np.array_equal(got32, spec), k
        if k >= 2:  # the known-wrong variant: each column's result moved one place
            assert not np.all(np.abs(np.roll(got32, 1, axis=1) - exact) <= bound), k
    V = rng.standard_normal((n, 14))
    assert not np.array_equal(cached_product(rows, V), r64 @ V)


def test_auto_mode_is_local_for_small_n(concrete):
    assert _op(concrete.X_std, "rbf", False).mode == "local"


@pytest.mark.cluster
def test_distributed_equals_local(concrete, client, rng):
    X = concrete.X_std
    V = rng.standard_normal((X.shape[0], 4))
    local = _op(X, "matern52", True, mode="local", cache=False)
    dist = _op(X, "matern52", True, mode="distributed", client=client, block_rows=150)
    assert dist.mode == "distributed" and len(dist.blocks) == 7
    np.testing.assert_allclose(dist.matmul(V), local.matmul(V), rtol=1e-12)
    np.testing.assert_allclose(dist.matmul(V), local.matmul(V), rtol=1e-12)  # second pass: cached rows
    a, da_ = dist.matmul_grads(V)
    b, db = local.matmul_grads(V)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(da_, db, rtol=1e-10, atol=1e-10)
    moved, local = dist.with_log_params(dist.log_params - 0.2), local.with_log_params(local.log_params - 0.2)
    np.testing.assert_allclose(moved.matmul(V), local.matmul(V), rtol=1e-12)
    cached = dist.executor.cached_blocks()
    assert sum(cached.values()) == len(dist.blocks)  # each block cached once, on its own worker
    dist.close()
    assert sum(dist.executor.cached_blocks().values()) == 0


@pytest.mark.parametrize("bad,msg", [
    (lambda X: np.where(np.arange(X.size).reshape(X.shape) == 5, np.nan, X), "non-finite"),
    (lambda X: np.where(np.arange(X.size).reshape(X.shape) == 7, np.inf, X), "non-finite"),
    (lambda X: X[:1], "at least 2 rows"),
    (lambda X: X[None], "2-D"),
])
def test_operator_rejects_bad_X(concrete, bad, msg):
    with pytest.raises(ValueError, match=msg):
        KernelOperator(bad(concrete.X_std), make_kernel("rbf"), 0.1)


def test_operator_rejects_bad_noise_params_and_rhs(concrete):
    with pytest.raises(ValueError, match="noise"):
        KernelOperator(concrete.X_std, make_kernel("rbf"), 0.0)
    with pytest.raises(ValueError, match="noise"):
        KernelOperator(concrete.X_std, make_kernel("rbf"), -1.0)
    op = KernelOperator(concrete.X_std, make_kernel("rbf"), 0.1)
    with pytest.raises(ValueError, match="shape"):
        op.matmul(np.ones(5))
    with pytest.raises(ValueError, match="non-finite"):
        op.matmul(np.full(op.n, np.nan))
    with pytest.raises(ValueError, match="log-parameters"):
        op.with_log_params([0.0, 0.0])
    with pytest.raises(ValueError, match="finite"):
        op.with_log_params([0.0, np.nan, 0.0])


@pytest.mark.cluster
def test_distributed_survives_a_killed_worker(concrete, client, rng):
    """A worker killed between products: the nanny restarts it under a new address; the operator re-pins
    its blocks and the next product is still right."""
    import os
    import signal
    import time

    X = concrete.X_std
    V = rng.standard_normal((X.shape[0], 2))
    dist = _op(X, "rbf", False, mode="distributed", client=client, block_rows=300)
    ref = _op(X, "rbf", False, mode="local", cache=False).matmul(V)
    np.testing.assert_allclose(dist.matmul(V), ref, rtol=1e-12)
    victim, pid = next(iter(client.run(os.getpid).items()))
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 60
    while victim in cluster_workers(client) or len(cluster_workers(client)) < 2:
        assert time.time() < deadline, "worker was not restarted"
        time.sleep(0.2)
    np.testing.assert_allclose(dist.matmul(V), ref, rtol=1e-12)
    dist.close()
