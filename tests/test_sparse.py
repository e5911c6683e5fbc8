"""Issue-5 groundwork: per-chunk statistics and the collapsed bound against dense references."""

import numpy as np
import pytest

from daskgp.sparse import chunk_stats, collapsed_bound, distributed_stats, rbf_ard, titsias_bound_dense


@pytest.fixture
def small(concrete):
    X, y = concrete.X[:300], concrete.y[:300]
    Z = X[np.random.default_rng(0).choice(300, 15, replace=False)] + 0.01
    return X, y, Z, 1.3, np.full(X.shape[1], 2.0), 4.0


def test_bound_from_chunk_sums_equals_dense_titsias(small):
    """Any chunking (uneven, with an empty chunk) gives the dense bound to 1e-8 relative."""
    X, y, Z, s2, ls, beta = small
    ref = titsias_bound_dense(X, y, Z, s2, ls, beta)
    for cuts in ([300], [100, 200], [37, 37, 0, 150, 76]):
        edges = np.concatenate([[0], np.cumsum(cuts)])
        parts = [chunk_stats(y[a:b], Z, s2, ls, mu=X[a:b])
                 for a, b in zip(edges[:-1], edges[1:], strict=True)]
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        assert collapsed_bound(total, Z, s2, ls, beta) == pytest.approx(ref, rel=1e-8)


@pytest.mark.cluster
def test_distributed_stats_on_the_cluster_equal_local(small, client):
    import dask.array as da

    X, y, Z, s2, ls, beta = small
    Xd = da.from_array(X, chunks=((50, 120, 130), (X.shape[1],)))
    yd = da.from_array(y, chunks=((50, 120, 130),))
    st = distributed_stats(yd, Xd, Z, s2, ls, client=client)
    ref = titsias_bound_dense(X, y, Z, s2, ls, beta)
    assert st.n == 300 and collapsed_bound(st, Z, s2, ls, beta) == pytest.approx(ref, rel=1e-8)


def test_psi_statistics_are_the_expectations_under_q(small):
    """Latent inputs: psi1 and psi2 sums against Monte Carlo averages over q(x) (200k draws; tolerance 5
    standard errors per entry), and S → 0 gives the observed-input statistics."""
    X, y, Z, s2, ls, _ = small
    mu, S = X[:3], np.full((3, X.shape[1]), 0.05)
    st = chunk_stats(y[:3], Z, s2, ls, mu=mu, S=S)
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
    tiny = chunk_stats(y[:3], Z, s2, ls, mu=mu, S=np.full_like(S, 1e-12))
    obs = chunk_stats(y[:3], Z, s2, ls, mu=mu)
    np.testing.assert_allclose(tiny.C, obs.C, rtol=1e-9)
    np.testing.assert_allclose(tiny.D, obs.D, rtol=1e-9)
