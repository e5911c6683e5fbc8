"""``SparseGPRegressor.fit(on_posterior=...)``: every iterate's predictive, from the statistics the fit's last
evaluation computed, is the dense DTC predictive (n × n matrices, the kernel's textbook formula) at that
iterate's parameters — and not its neighbour's, which the test shows it can tell apart."""

import numpy as np
import pytest
import scipy.linalg

from daskgp.inducing.features import kmm

from .dense_references import dense_kernel


def _dense_predictive(theta, X, y, Xs):
    """(mean, sd of y) in standardised units: Q_*n (Q_nn + σ²_n I)⁻¹ y and the DTC variance plus σ²_n."""
    _, Kmm = kmm(theta)
    Kmn = dense_kernel("rbf", theta.Z, X, theta.variance, theta.lengthscales)
    Ksm = dense_kernel("rbf", Xs, theta.Z, theta.variance, theta.lengthscales)
    Qsn = Ksm @ np.linalg.solve(Kmm, Kmn)
    A = Kmn.T @ np.linalg.solve(Kmm, Kmn) + np.eye(len(X)) * theta.noise
    Qss = Ksm @ np.linalg.solve(Kmm, Ksm.T)
    var = theta.variance - np.diag(Qss) + np.diag(Qss - Qsn @ scipy.linalg.solve(A, Qsn.T))
    return Qsn @ scipy.linalg.solve(A, y), np.sqrt(var + theta.noise)


@pytest.mark.cluster
def test_every_iterates_predictive_is_the_dense_one_at_its_parameters(concrete, client):
    import daskgp as dg

    X, y = concrete.X[:600], concrete.y[:600]
    Xnew = concrete.X[600:700]
    thetas, seen = {}, []
    est = dg.SparseGPRegressor(n_inducing=8, max_iter=6, chunk_rows=150)
    est.fit(X, y, client=client, on_params=lambda th, trace: thetas.__setitem__(len(trace), th),
            on_posterior=lambda it, secs, predict: seen.append((it, secs, *predict(Xnew))))
    # L-BFGS-B's accepted point is its last evaluation: every iteration's q(u) is at hand
    assert [s[0] for s in seen] == list(range(1, est.n_iter_ + 1))
    assert [s[1] for s in seen] == est.iteration_seconds_ and np.all(np.diff(est.iteration_seconds_) > 0)
    sx, mx, sy, my = est.x_scale_, est.x_mean_, est.y_scale_, est.y_mean_
    Xs, ys, Xns = (X - mx) / sx, (y - my) / sy, (Xnew - mx) / sx
    for it, _, mean, sd in seen:
        m_ref, s_ref = _dense_predictive(thetas[it], Xs, ys, Xns)
        np.testing.assert_allclose(mean, m_ref * sy + my, rtol=1e-6, atol=1e-6 * sy)
        np.testing.assert_allclose(sd, s_ref * sy, rtol=1e-6)
        if it > 1:  # power: the previous iterate's predictive is far outside that tolerance
            m_prev, _ = _dense_predictive(thetas[it - 1], Xs, ys, Xns)
            assert np.max(np.abs(mean - (m_prev * sy + my))) > 1e-3 * sy
    # the last iterate's predictive is the fitted model's
    np.testing.assert_allclose(seen[-1][2], est.predict(Xnew), rtol=1e-9)
    # watching costs the fit nothing: the same evaluations, the same bound trace, bit for bit
    plain = dg.SparseGPRegressor(n_inducing=8, max_iter=6, chunk_rows=150).fit(X, y, client=client)
    assert plain.bound_trace_ == est.bound_trace_
    assert plain.fit_info_["n_evaluations"] == est.fit_info_["n_evaluations"]
