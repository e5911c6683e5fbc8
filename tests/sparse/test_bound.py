"""The collapsed bound from per-chunk sums against dense references, and its gradients against finite
differences (regression and Bayesian GPLVM)."""

import array_api_strict as xps
import numpy as np
import pytest

from daskgp.sparse.bound import (
    GlobalParams,
    bound_and_grads,
    chunk_global_grad,
    chunk_local_grad,
    chunk_stats,
    chunk_stats_cached,
    collapsed_bound,
    rbf_ard,
)

from .dense_references import bgplvm_bound_dense, titsias_bound_dense


@pytest.fixture
def small(concrete):
    X, y = concrete.X_std[:300], concrete.y_std[:300]
    Z = X[np.random.default_rng(0).choice(300, 15, replace=False)] + 0.01
    ls = 2.0 * np.random.default_rng(1).uniform(0.7, 1.3, X.shape[1])
    return X, y, Z, 1.3, ls, 4.0


@pytest.fixture
def latent(rng):
    """A small latent problem: 40 rows, p = 3 outputs, q = 2 latent dimensions, m = 6."""
    Y = rng.standard_normal((40, 3))
    mu, S = rng.standard_normal((40, 2)), rng.uniform(0.05, 0.6, (40, 2))
    Z = rng.standard_normal((6, 2))
    return Y, mu, S, Z, 1.3, np.array([0.9, 1.4]), 4.0


def _sum(parts):
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def _cuts(n, cuts):
    edges = np.concatenate([[0], np.cumsum(cuts)])
    assert edges[-1] == n
    return list(zip(edges[:-1], edges[1:], strict=True))


KERNEL_NAMES = ["rbf", "matern32", "matern52"]


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_bound_from_chunk_sums_equals_dense_titsias(small, kernel):
    """Any chunking (uneven, with an empty chunk) gives the dense bound to 1e-8 relative, for every
    stationary kernel (the dense reference writes each kernel from its textbook formula)."""
    X, y, Z, s2, ls, beta = small
    ref = titsias_bound_dense(X, y, Z, s2, ls, beta, kernel)
    theta = GlobalParams(Z, s2, ls, noise=1 / beta, kernel=kernel)
    for cuts in ([300], [100, 200], [37, 37, 0, 150, 76]):
        total = _sum([chunk_stats(y[a:b], theta, mu=X[a:b]) for a, b in _cuts(300, cuts)])
        assert collapsed_bound(total, theta) == pytest.approx(ref, rel=1e-8)


def test_latent_bound_from_chunk_sums_equals_dense_titsias_lawrence(latent):
    """The psi-statistic sums give the Titsias–Lawrence GPLVM bound (written with its n × n matrix and
    per-point loops) to 1e-8 relative, for several chunkings including an empty chunk."""
    Y, mu, S, Z, s2, ls, beta = latent
    ref = bgplvm_bound_dense(Y, mu, S, Z, s2, ls, beta)
    theta = GlobalParams(Z, s2, ls, noise=1 / beta)
    for cuts in ([40], [13, 27], [5, 0, 20, 15]):
        total = _sum([chunk_stats(Y[a:b], theta, mu=mu[a:b], S=S[a:b]) for a, b in _cuts(40, cuts)])
        assert collapsed_bound(total, theta) == pytest.approx(ref, rel=1e-8)


def _full_grad(Y, theta, mu, S, chunks):
    """Central part + the sum of per-chunk contributions, as the distributed driver assembles them."""
    parts = [chunk_stats_cached(Y[a:b], theta, mu[a:b], None if S is None else S[a:b]) for a, b in chunks]
    total = _sum([p[0] for p in parts])
    g = bound_and_grads(total, theta)
    loc = sum(chunk_global_grad(Y[a:b], theta, g, mu[a:b], None if S is None else S[a:b], psi1=c)
              for (a, b), (_, c) in zip(chunks, parts, strict=True))
    m, q = theta.Z.shape
    dZ = g.dZ + loc[:m * q].reshape(m, q)
    return g, theta.grad_vector(dZ, g.dvar + loc[m * q], g.dls + loc[m * q + 1:], g.dbeta)


def _fd(f, v, h=1e-5):
    return np.array([(f(v + h * e) - f(v - h * e)) / (2 * h) for e in np.eye(len(v))])


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_regression_gradients_equal_finite_differences(small, kernel):
    """∂F/∂(Z, log σ², log l, log β) from the two maps against central differences (h = 1e-5): max error
    below 1e-6 of the largest component, for every stationary kernel."""
    X, y, Z, s2, ls, beta = small
    X, y = X[:120], y[:120]
    m, q = Z.shape

    def F(v):
        t = GlobalParams.from_vector(v, m, q, kernel)
        return collapsed_bound(chunk_stats(y, t, mu=X), t)

    v = GlobalParams(Z, s2, ls, noise=1 / beta, kernel=kernel).to_vector()
    _, g = _full_grad(y, GlobalParams.from_vector(v, m, q, kernel), X, None, _cuts(120, [50, 0, 70]))
    fd = _fd(F, v)
    assert np.max(np.abs(g - fd)) < 1e-6 * np.max(np.abs(fd))


def test_a_wrong_kernel_derivative_fails_the_finite_difference_check(small, monkeypatch):
    """Power of the check above: the Matérn 3/2 bound's gradient computed with the RBF's derivative block
    (G = K, as the code was before kernels were shared) misses the finite differences by far more than the
    tolerance."""
    from daskgp.model.kernels import Matern32

    X, y, Z, s2, ls, beta = small
    X, y = X[:120], y[:120]
    m, q = Z.shape

    def F(v):
        t = GlobalParams.from_vector(v, m, q, "matern32")
        return collapsed_bound(chunk_stats(y, t, mu=X), t)

    v = GlobalParams(Z, s2, ls, noise=1 / beta, kernel="matern32").to_vector()
    fd = _fd(F, v)
    real = Matern32.blocks_from_scaled

    def as_if_rbf(self, Z1, Z2, need_g=False):
        K, _, r2 = real(self, Z1, Z2, need_g)
        return K, (K if need_g else None), r2
    monkeypatch.setattr(Matern32, "blocks_from_scaled", as_if_rbf)
    _, g = _full_grad(y, GlobalParams.from_vector(v, m, q, "matern32"), X, None, _cuts(120, [50, 0, 70]))
    assert np.max(np.abs(g - fd)) > 1e-2 * np.max(np.abs(fd))


def test_latent_inputs_refuse_a_kernel_without_psi_statistics(latent):
    """The GPLVM's psi-statistics are closed-form for the RBF alone: another kernel is one clear error."""
    Y, mu, S, Z, s2, ls, beta = latent
    with pytest.raises(ValueError, match="need the RBF kernel.*matern52"):
        chunk_stats(Y, GlobalParams(Z, s2, ls, noise=1 / beta, kernel="matern52"), mu=mu, S=S)


def test_latent_gradients_equal_finite_differences(latent):
    """Global and local (μ, log S) gradients of the GPLVM bound against central differences."""
    Y, mu, S, Z, s2, ls, beta = latent
    m, q = Z.shape
    n = len(Y)
    k = m * q + q + 2

    def unpack(v):
        return (GlobalParams.from_vector(v[:k], m, q), v[k:k + n * q].reshape(n, q),
                np.exp(v[k + n * q:]).reshape(n, q))

    def F(v):
        t, mu_, S_ = unpack(v)
        return collapsed_bound(chunk_stats(Y, t, mu=mu_, S=S_), t)

    v = np.concatenate([GlobalParams(Z, s2, ls, noise=1 / beta).to_vector(), mu.ravel(), np.log(S).ravel()])
    t, mu_, S_ = unpack(v)
    g, gglob = _full_grad(Y, t, mu_, S_, _cuts(n, [15, 25]))
    dmu, dS = chunk_local_grad(Y, t, g, mu_, S_)
    grad = np.concatenate([gglob, dmu.ravel(), (dS * S_).ravel()])
    fd = _fd(F, v)
    assert np.max(np.abs(grad - fd)) < 1e-6 * np.max(np.abs(fd))


def test_observed_chunk_code_runs_on_array_api_strict(small):
    """The observed-input statistics and gradient use only the array API standard (the cupy path)."""
    X, y, Z, s2, ls, beta = small
    Xs, ys = xps.asarray(X[:50]), xps.asarray(y[:50, None])
    theta = GlobalParams(Z, s2, ls, noise=1 / beta)
    st, Kmn = chunk_stats_cached(ys, theta, Xs)
    ref, _ = chunk_stats_cached(y[:50, None], theta, X[:50])
    np.testing.assert_allclose(st.D, ref.D, rtol=1e-12)
    np.testing.assert_allclose(st.C, ref.C, rtol=1e-12)
    g = bound_and_grads(ref, theta)
    a = chunk_global_grad(ys, theta, g, Xs, psi1=Kmn)
    b = chunk_global_grad(y[:50, None], theta, g, X[:50])
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_psi_statistics_are_the_expectations_under_q(small):
    """Latent inputs: psi1 and psi2 sums against Monte Carlo averages over q(x) (200k draws; tolerance 5
    standard errors per entry), and S → 0 gives the observed-input statistics."""
    X, y, Z, s2, ls, beta = small
    theta = GlobalParams(Z, s2, ls, noise=1 / beta)
    mu, S = X[:3], np.full((3, X.shape[1]), 0.05)
    st = chunk_stats(y[:3], theta, mu=mu, S=S)
    rng = np.random.default_rng(1)
    C_mc, D_mc = np.zeros_like(st.C), np.zeros_like(st.D)
    C_var = np.zeros_like(st.C)
    R = 200_000
    for i in range(3):
        xs = mu[i] + np.sqrt(S[i]) * rng.standard_normal((R, X.shape[1]))
        K = rbf_ard(Z, xs, s2, ls)  # (m, R)
        C_mc += (K * y[i]).mean(axis=1)[:, None]
        C_var += ((K * y[i]).var(axis=1) / R)[:, None]
        D_mc += K @ K.T / R
    assert np.all(np.abs(st.C - C_mc) < 5 * np.sqrt(C_var) + 1e-12)
    np.testing.assert_allclose(st.D, D_mc, rtol=2e-2, atol=1e-4)
    tiny = chunk_stats(y[:3], theta, mu=mu, S=np.full_like(S, 1e-12))
    obs = chunk_stats(y[:3], theta, mu=mu)
    np.testing.assert_allclose(tiny.C, obs.C, rtol=1e-9)
    np.testing.assert_allclose(tiny.D, obs.D, rtol=1e-9)


def test_bound_rejects_bad_parameters(small):
    X, y, Z, s2, ls, _ = small
    st = chunk_stats(y, GlobalParams(Z, s2, ls, noise=1.0), mu=X)
    with pytest.raises(ValueError, match="noise variance must be > 0"):
        collapsed_bound(st, GlobalParams(Z, s2, ls, noise=-1.0))
    with pytest.raises(ValueError, match="non-finite"):
        collapsed_bound(st, GlobalParams(np.full_like(Z, np.nan), s2, ls, noise=1.0))
    with pytest.raises(ValueError, match=r"lengthscales must be a scalar or \(8,\)"):
        GlobalParams(Z, s2, np.ones(3), noise=1.0)
    with pytest.raises(ValueError, match=r"Z must be \(m, q\)"):
        GlobalParams(Z[0], s2, ls, noise=1.0)
    scalar = GlobalParams(Z, s2, 2.0, noise=1.0)  # one lengthscale for every input dimension
    np.testing.assert_array_equal(scalar.lengthscales, np.full(Z.shape[1], 2.0))


@pytest.mark.parametrize("namespace", ["numpy", "array_api_strict"])
def test_a_large_chunk_is_taken_block_by_block_with_the_same_sums(small, monkeypatch, namespace):
    """A chunk of more than ROW_BLOCK rows (here 300 rows, blocks of 64: a partial last block) gives the
    statistics and the gradient of the whole chunk at once (1e-12 relative: only the summation order
    differs) and keeps no K_mn; the gradient recomputes it. Power: a variant that skips the partial last
    block changes A, C and D."""
    import daskgp.inducing.stats as st

    X, y, Z, s2, ls, beta = small
    theta = GlobalParams(Z, s2, ls, noise=1 / beta)
    whole, Kmn = chunk_stats_cached(y[:, None], theta, X)
    g = bound_and_grads(whole, theta)
    ref = chunk_global_grad(y[:, None], theta, g, X, psi1=Kmn)
    Xa, ya = (X, y[:, None]) if namespace == "numpy" else (xps.asarray(X), xps.asarray(y[:, None]))
    monkeypatch.setattr(st, "ROW_BLOCK", 64)
    blocked, cached = chunk_stats_cached(ya, theta, Xa)
    assert cached is None and blocked.n == 300
    for a, b in ((blocked.A, whole.A), (blocked.B, whole.B), (blocked.C, whole.C), (blocked.D, whole.D)):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(chunk_global_grad(ya, theta, g, Xa)), ref, rtol=1e-10, atol=1e-12)
    skipped, _ = chunk_stats_cached(y[:256, None], theta, X[:256])
    assert not np.allclose(skipped.D, whole.D, rtol=1e-6)


def test_latent_rows_are_taken_block_by_block_with_the_same_sums(latent, monkeypatch):
    """The ψ pass of latent rows goes over blocks of PSI2_BLOCK_NUMBERS / m² rows (here 7 rows of 40: a
    partial last block): the statistics and both gradients equal the one-block pass's to 1e-12 relative
    (only the summation order differs). Power: a variant whose blocks skip the partial last one changes C,
    D and the last rows' local gradients."""
    import daskgp.sparse.bound as bound
    import daskgp.sparse.psi as psi

    Y, mu, S, Z, s2, ls, beta = latent
    theta = GlobalParams(Z, s2, ls, noise=1 / beta)
    whole = chunk_stats(Y, theta, mu=mu, S=S)
    g = bound_and_grads(whole, theta)
    ref_local, ref_global = chunk_local_grad(Y, theta, g, mu, S), chunk_global_grad(Y, theta, g, mu, S)
    monkeypatch.setattr(psi, "PSI2_BLOCK_NUMBERS", 7 * len(Z) ** 2)
    blocked = chunk_stats(Y, theta, mu=mu, S=S)
    np.testing.assert_allclose(blocked.D, whole.D, rtol=1e-12)
    np.testing.assert_allclose(blocked.C, whole.C, rtol=1e-12)
    for a, b in zip(chunk_local_grad(Y, theta, g, mu, S), ref_local, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(chunk_global_grad(Y, theta, g, mu, S), ref_global, rtol=1e-12, atol=1e-14)

    full = psi.psi_blocks

    def skipping(mu_, S_, *args):
        for rows, *rest in full(mu_, S_, *args):
            if rows.stop <= len(mu_):
                yield rows, *rest
    monkeypatch.setattr(psi, "psi_blocks", skipping)  # the gradients' pass
    monkeypatch.setattr(bound, "psi_blocks", skipping)  # the statistics' pass
    skipped = chunk_stats(Y, theta, mu=mu, S=S)
    assert not np.allclose(skipped.D, whole.D, rtol=1e-6) and not np.allclose(skipped.C, whole.C, rtol=1e-6)
    assert not np.allclose(chunk_local_grad(Y, theta, g, mu, S)[0][35:], ref_local[0][35:], rtol=1e-6)
