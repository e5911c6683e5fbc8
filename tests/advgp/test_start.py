"""ADVGP's subset start (daskgp.advgp.start): L-BFGS-B on the collapsed bound of a sample reaches a
stationary point that is better than the paper's start, and the estimator's two starts behave as
documented."""

import math

import numpy as np
import pytest

from daskgp.advgp.model import ADVGPParams, collapsed_objective
from daskgp.advgp.start import subset_start
from daskgp.inducing.placement import kmeans_centres, kmeans_inducing, sample_rows


def _start(X, m=10, seed=0):
    d = X.shape[1]
    return ADVGPParams(kmeans_centres(X, m, seed), 1.0, np.full(d, math.sqrt(d)), 0.5, np.zeros(m), np.eye(m))


def test_the_subset_start_is_a_stationary_point_of_the_collapsed_bound(concrete):
    """From the paper's start on concrete's 1,030 rows (m = 10): the bound per row rises, and a second
    start from the result gains less than 1e-4 nats per row (the point is stationary in practice). The
    gradient's size at the stop depends on the BLAS's summation order (a flat direction: 0.56 in total with
    threaded BLAS, smaller on one thread), and so does L-BFGS-B's stopping message (a relative-reduction
    stop, or an abnormal line search at the optimum), so neither is asserted."""
    X, y = concrete.X_std, concrete.y_std
    p0 = _start(X)
    p, info = subset_start(X, y, p0, max_iter=500)
    assert info["bound_per_row"] > info["bound_per_row_start"] + 0.1
    f, _ = collapsed_objective(X, y, p)
    assert -f / len(y) == pytest.approx(info["bound_per_row"], rel=1e-12)
    _, again = subset_start(X, y, p, max_iter=500)
    assert again["bound_per_row"] - info["bound_per_row"] < 1e-4
    # q(w) is the caller's: left as it was
    np.testing.assert_array_equal(p.mu, p0.mu)
    np.testing.assert_array_equal(p.U, p0.U)


def test_a_start_that_cannot_improve_is_kept(concrete):
    """Zero iterations allowed: the start comes back unchanged (never a worse point)."""
    X, y = concrete.X_std[:200], concrete.y_std[:200]
    p0 = _start(X)
    p, info = subset_start(X, y, p0, max_iter=1)
    assert info["bound_per_row"] >= info["bound_per_row_start"]


def test_the_sample_is_k_means_sample():
    """sample_rows draws what kmeans_inducing always drew (the same rows for the same seed), for numpy and
    dask arrays alike, and keeps X's and y's rows paired."""
    import dask.array as da

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((3000, 3)), rng.standard_normal(3000)
    Xs, ys = sample_rows(7, X, y, max_rows=500)
    Xd, yd = sample_rows(7, da.from_array(X, chunks=(700, 3)), da.from_array(y, chunks=700), max_rows=500)
    np.testing.assert_array_equal(Xs, Xd)
    np.testing.assert_array_equal(ys, yd)
    rows = [int(np.flatnonzero((X == r).all(axis=1))[0]) for r in Xs]
    np.testing.assert_array_equal(y[rows], ys)
    np.testing.assert_array_equal(kmeans_centres(Xs, 5, 7), kmeans_inducing(X, 5, 7, max_rows=500))


@pytest.mark.cluster
def test_the_estimator_starts_where_it_says(concrete, client):
    """init='subset' (default): the fitted start's bound is above the paper's start's, recorded in
    start_info_; init='kmeans': Z starts at k-means centres and nothing is fitted first (zero updates
    asked is refused, so one update: Z moved by one Adam step of size inducing_rate at most)."""
    from daskgp import ADVGPRegressor

    X, y = concrete.X, concrete.y
    sub = ADVGPRegressor(n_inducing=10, max_iter=1, tol=None).fit(X, y, client=client)
    info = sub.start_info_
    assert info["init"] == "subset" and info["bound_per_row"] > info["bound_per_row_start"]
    km = ADVGPRegressor(n_inducing=10, max_iter=1, tol=None, init="kmeans").fit(X, y, client=client)
    assert km.start_info_ == {"init": "kmeans"}
    Xs = (X - km.x_mean_) / km.x_scale_
    Z0 = kmeans_inducing(Xs, 10, 0)
    assert np.max(np.abs(km.params_.Z - Z0)) <= km.inducing_rate * (1 + 1e-9)
    assert np.max(np.abs(sub.params_.Z - Z0)) > 10 * km.inducing_rate
