"""ADVGPRegressor end to end on a real LocalCluster (concrete, 927 training rows): a fit that beats the mean
predictor clearly, asynchronous (τ = 4) close to synchronous for the same number of partition gradients,
staleness within τ, dask arrays in and out."""

import numpy as np
import pytest

from daskgp.advgp.estimator import ADVGPRegressor
from daskgp.datasets import train_test

from ..run_checks import paired

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def split(concrete):
    return train_test(concrete, 0.1, None, 0)


def test_fit_predicts_and_async_is_close_to_sync(split, client, monkeypatch):
    """The same number of partition gradients (a synchronous update uses 4, an asynchronous one 1): τ = 0
    for 200 updates, τ = 4 for 800. The asynchronous fit takes its gradients in a seeded random order
    (``ArrivalOrder.seeded``) instead of the order the scheduler happens to deliver them, so its result is
    one fixed computation (it varied from run to run before, 5.93 to 7.06 MPa, and this test's old bound of
    1.15 × the synchronous RMSE failed 4 runs of 7).

    From the paper's start (``init="kmeans"``), where the updates do the work: the subset start is already
    the collapsed bound's optimum on these 927 rows, so from there a fit that mishandled its stale
    gradients would still predict well. Both beat the mean predictor (16.9 MPa), paired over the 103 test
    rows at Z_BEATS; and the asynchronous fit predicts as well as the synchronous one: the mean per-row
    difference of squared errors within Z_PAIRED paired standard errors (measured: RMSE 6.41 against 5.94,
    a difference of 5.9 ± 2.6 MPa² per row, z = 2.3). Power: the asynchronous fit stopped after 100 updates
    (an eighth of its gradients; RMSE 7.11) fails the same check."""
    import functools

    import daskgp.advgp.estimator as estimator_module
    from daskgp.advgp.server import ArrivalOrder, ParameterServer

    Xtr, ytr, Xte, yte = split
    pred = {}
    for key, tau, updates in (("sync", 0, 200), ("async", 4, 800), ("short", 4, 100)):
        monkeypatch.setattr(estimator_module, "ParameterServer",
                            functools.partial(ParameterServer, arrivals=ArrivalOrder.seeded(0)))
        est = ADVGPRegressor(n_inducing=40, max_iter=updates, tau=tau, n_partitions=4, tol=None,
                             init="kmeans").fit(Xtr, ytr)
        pred[key], sd = est.predict(Xte, return_std=True)
        assert np.all(sd > 0) and est.n_iter_ == updates
        assert max(max(r.staleness) for r in est.records_) <= tau
    mean_predictor = np.full_like(yte, ytr.mean())
    for key in ("sync", "async"):
        gain, se = _paired_mse_gap(mean_predictor, pred[key], yte)
        assert gain > Z_BEATS * se, (key, gain, se)
    gap, se = _paired_mse_gap(pred["async"], pred["sync"], yte)
    rmse = {k: float(np.sqrt(np.mean((v - yte) ** 2))) for k, v in pred.items()}
    print(f"async - sync: {gap:.3f} ± {se:.3f} MPa² per row; RMSE {rmse}")
    assert abs(gap) <= Z_PAIRED * se, (gap, se)
    gap, se = _paired_mse_gap(pred["short"], pred["sync"], yte)
    assert abs(gap) > Z_PAIRED * se, ("power", gap, se)


Z_BEATS = 3.1  # one-sided normal quantile at 1e-3
Z_PAIRED = 3.29  # two-sided at 1e-3


def test_dask_arrays_predict_chunk_by_chunk(split, client):
    import dask.array as da

    Xtr, ytr, Xte, _ = split
    est = ADVGPRegressor(n_inducing=20, max_iter=30, tau=0).fit(Xtr, ytr)
    m1, s1 = est.predict(Xte, return_std=True)
    m2, s2 = est.predict(da.from_array(Xte, chunks=(25, -1)), return_std=True)
    np.testing.assert_allclose(m2.compute(), m1, rtol=1e-12)
    np.testing.assert_allclose(s2.compute(), s1, rtol=1e-12)


def _param(name: str) -> str:
    return f"The '{name}' parameter of ADVGPRegressor must be"


@pytest.mark.parametrize("kw,msg", [(dict(tau=-1), _param("tau")), (dict(tau=1.5), _param("tau")),
                                    (dict(feature_map="fourier"), _param("feature_map")),
                                    (dict(n_inducing=5000), "more than the"),
                                    (dict(batch_size=0), _param("batch_size")),
                                    (dict(optimizer="sgd"), _param("optimizer")),
                                    (dict(learning_rate=2.0), _param("learning_rate")),
                                    (dict(q_step=0.0), _param("q_step")), (dict(tol=-1.0), _param("tol")),
                                    (dict(init="pca"), _param("init"))])
def test_bad_parameters_are_refused(kw, msg, split):
    Xtr, ytr, _, _ = split
    with pytest.raises(ValueError, match=msg):
        ADVGPRegressor(**kw).fit(Xtr, ytr)


def _paired_mse_gap(pred, ref, y):
    """Mean of (e² − e_ref²) over the test rows and its standard error."""
    return paired((pred - y) ** 2, (ref - y) ** 2)


@pytest.mark.slow
def test_defaults_converge_within_two_percent_of_sgpr(client):
    """Issue 31: a user calling fit with defaults gets a converged model (stopped by its rule, not by the
    update cap) whose test RMSE is within 2 % of SparseGPRegressor's on data neither has tuned to (3,000
    power_plant rows, 30 % held out). Tolerance: RMSE within 2 % is MSE within 4.04 %, plus two standard
    errors of the paired per-row difference of squared errors. Power: the paper's ADADELTA from the paper's
    start for its former default 500 updates fails the same check (measured RMSE 4.63 against SGPR's 4.06;
    the default 4.13)."""
    import daskgp as dg
    from daskgp.datasets import load

    Xtr, ytr, Xte, yte = train_test(load("power_plant"), 0.3, 3000, 0)
    sgpr = dg.SparseGPRegressor().fit(Xtr, ytr, client=client).predict(Xte)
    mse_ref = float(np.mean((sgpr - yte) ** 2))
    est = ADVGPRegressor().fit(Xtr, ytr, client=client)
    assert est.converged_ and est.n_iter_ < est.max_iter
    gap, se = _paired_mse_gap(est.predict(Xte), sgpr, yte)
    assert gap <= (1.02**2 - 1) * mse_ref + 2 * se, (gap, se, mse_ref)
    paper = ADVGPRegressor(optimizer="adadelta", max_iter=500, tol=None, init="kmeans").fit(Xtr, ytr,
                                                                                          client=client)
    gap, se = _paired_mse_gap(paper.predict(Xte), sgpr, yte)
    assert gap > (1.02**2 - 1) * mse_ref + 2 * se, (gap, se, mse_ref)


def test_a_matern_fit_carries_its_kernel_to_the_workers_and_predictions(split, client):
    """kernel='matern52': the partitions' gradients, the server's checkpointed template and the predictions
    use the Matérn kernel (the fitted model's predictions differ from an RBF fit's, and equal a dense
    evaluation of its weight-space predictive with the Matérn K_xm); the fit learns (RMSE well under the
    mean's)."""
    from daskgp.advgp.model import weight_map

    from ..sparse.dense_references import dense_kernel

    Xtr, ytr, Xte, yte = split
    est = ADVGPRegressor(n_inducing=20, max_iter=150, tau=0, n_partitions=4, kernel="matern52").fit(Xtr, ytr)
    rbf = ADVGPRegressor(n_inducing=20, max_iter=150, tau=0, n_partitions=4).fit(Xtr, ytr)
    p = est.params_
    assert p.kernel == "matern52" and rbf.params_.kernel == "rbf"
    Xs = (Xte - est.x_mean_) / est.x_scale_
    Phi = dense_kernel("matern52", Xs, p.Z, p.variance, p.lengthscales) @ weight_map(p)[0]
    np.testing.assert_allclose(est.predict(Xte), Phi @ p.mu * est.y_scale_ + est.y_mean_, rtol=1e-10)
    assert not np.allclose(est.predict(Xte), rbf.predict(Xte))
    baseline = float(np.sqrt(np.mean((ytr.mean() - yte) ** 2)))
    assert float(np.sqrt(np.mean((est.predict(Xte) - yte) ** 2))) < 0.7 * baseline


def test_auto_batch_rows_follow_m_and_the_partition():
    """batch_size='auto': 16,384 rows per task at m = 100, scaled as (100 / m)², divided among partitions
    beyond two a worker, at least 1,024; the whole partition (None) when that covers it — so a 5·10⁶-row
    partition costs what a 61,617-row one does, and an update of 100 files what one of 4 does."""
    from daskgp.advgp.server import auto_batch_size

    assert auto_batch_size(61_617, 100) == 16_384
    assert auto_batch_size(5_000_000, 100) == 16_384
    assert auto_batch_size(5_000_000, 50) == 65_536
    assert auto_batch_size(5_000_000, 200) == 4096
    assert auto_batch_size(5_000_000, 500) == 1024
    assert auto_batch_size(16_384, 100) is None and auto_batch_size(5_000, 100) is None
    # beyond two partitions a worker (a Parquet folder's files) an update keeps its 4 · 16,384 rows on two
    # workers: 10 files give 6,554 rows a task, 100 files 1,024 (the floor), not 16,384 each
    assert auto_batch_size(10**6, 100, partitions=4, workers=2) == 16_384
    assert auto_batch_size(10**6, 100, partitions=10, workers=2) == 6_554
    assert auto_batch_size(10**6, 100, partitions=100, workers=2) == 1_024
    assert auto_batch_size(10**6, 100, partitions=100, workers=50) == 16_384


def test_the_default_batch_is_the_auto_rule_end_to_end(split, client, monkeypatch):
    """The default (batch_size='auto') fits exactly as the rows the rule names, given explicitly: with the
    rule scaled down so that concrete's 4 partitions of ~232 rows are minibatched (100 rows at m = 20), the
    default fit and batch_size=100 agree bit for bit, and differ from whole-partition gradients (None)."""
    from daskgp.advgp import server

    monkeypatch.setattr(server, "AUTO_BATCH_ROWS_M100", 4)
    monkeypatch.setattr(server, "AUTO_BATCH_MIN", 50)
    Xtr, ytr, _, _ = split
    kw = dict(n_inducing=20, max_iter=20, tau=0, n_partitions=4, tol=None)
    auto = ADVGPRegressor(**kw).fit(Xtr, ytr, client=client)
    given = ADVGPRegressor(**kw, batch_size=100).fit(Xtr, ytr, client=client)
    whole = ADVGPRegressor(**kw, batch_size=None).fit(Xtr, ytr, client=client)
    assert auto.batch_size == "auto" and auto.batch_size_ == 100 and whole.batch_size_ is None
    # 8 partitions on the 2 workers: the update's 4 · 100 rows, 50 a task
    eight = ADVGPRegressor(**{**kw, "n_partitions": 8, "max_iter": 1}).fit(Xtr, ytr, client=client)
    assert eight.batch_size_ == 50
    np.testing.assert_array_equal(auto.params_.to_vector(), given.params_.to_vector())
    assert not np.array_equal(auto.params_.to_vector(), whole.params_.to_vector())


def test_a_fit_cut_before_its_stopping_rule_says_so(split, client):
    """``converged_`` False and one ConvergenceWarning naming the cap when a fit with ``tol`` stops at
    ``max_iter`` (5 updates; a default fit needs hundreds: see
    test_defaults_converge_within_two_percent_of_sgpr); no warning when there is no rule to meet
    (``tol=None``, the same 5 updates)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    Xtr, ytr, _, _ = split
    with pytest.warns(ConvergenceWarning, match=r"stopped at max_iter=5 updates before its stopping rule"):
        cut = ADVGPRegressor(n_inducing=10, max_iter=5, random_state=0).fit(Xtr, ytr, client=client)
    assert not cut.converged_ and cut.n_iter_ == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ADVGPRegressor(n_inducing=10, max_iter=5, tol=None, random_state=0).fit(Xtr, ytr, client=client)


def test_a_checkpoint_names_the_rows_per_task_that_auto_chose(split, client, tmp_path):
    """``batch_size='auto'`` is resolved before the checkpoint's key is made, so the key names the rows per
    task the fit used, not the word: on concrete's 927 rows in 4 partitions 'auto' is whole partitions (the
    partitions are below the rule's 1,024-row floor). A kept checkpoint then resumes under the same
    resolution given explicitly (``batch_size=None``), and one made with whole partitions is refused to a fit
    of 64-row tasks, which would continue it with other gradients."""
    from daskgp.runs.commit import RunError

    Xtr, ytr, _, _ = split
    ck = tmp_path / "ck"
    kw = dict(n_inducing=10, tol=None, random_state=0)
    auto = ADVGPRegressor(max_iter=20, **kw).fit(Xtr, ytr, client=client, checkpoint=ck, keep_checkpoint=True)
    assert auto.batch_size_ is None
    resumed = ADVGPRegressor(max_iter=30, batch_size=None, **kw).fit(Xtr, ytr, client=client, checkpoint=ck,
                                                                      resume=True, keep_checkpoint=True)
    assert resumed.n_iter_ == 30
    with pytest.raises(RunError, match="other data or settings"):
        ADVGPRegressor(max_iter=40, batch_size=64, **kw).fit(Xtr, ytr, client=client, checkpoint=ck,
                                                             resume=True)


def test_refine_leaves_q_at_its_optimum_for_the_final_kernel(split, client, tmp_path):
    """``refine`` (the default): after the last update q(w) is the closed-form optimum for the final kernel
    over every training row, and ``objective_`` the exact −L there. Against a dense reference: the same
    statistics summed here over all rows at once (:func:`optimal_q`; to the rounding of summing in another
    order, bounded below) and −L from the rows (:func:`negative_elbo`, to 1e-4 nats: see below). The server's
    run is the same with and without it (τ = 0: the kernel parts agree bit for bit), so the refit can only
    lower −L: it lies
    below the unrefined fit's −L on the same rows, by more than 1e-3 nats (64-row minibatches leave q(w)
    noisy). Power: the unrefined q(w) fails the optimum check. A saved model keeps the refine's seconds."""
    from daskgp.advgp.model import negative_elbo, optimal_q, weight_map
    from daskgp.inducing.stats import observed_stats

    Xtr, ytr, _, _ = split
    kw = dict(n_inducing=10, max_iter=30, tol=None, batch_size=64, random_state=0)
    refined = ADVGPRegressor(**kw).fit(Xtr, ytr, client=client)
    raw = ADVGPRegressor(refine=False, **kw).fit(Xtr, ytr, client=client)
    assert raw.refine_seconds_ is None and refined.refine_seconds_ >= 0
    p, q = refined.params_, raw.params_
    np.testing.assert_array_equal(p.to_vector()[:p.n_kernel], q.to_vector()[:q.n_kernel])
    Xs = (np.asarray(Xtr, float) - refined.x_mean_) / refined.x_scale_
    ys = (np.asarray(ytr, float) - refined.y_mean_) / refined.y_scale_
    stats, _ = observed_stats(ys.reshape(-1, 1), p.inducing, Xs)
    mu, U = optimal_q(stats, p)
    # the two sums of the statistics differ only in their order (per partition there, at once here): a
    # relative rounding of an ulp in C and D, carried into WᵀDW by W = R⁻ᵀ (K_mm's condition number) and
    # into μ by Σ⁻¹ = I + β WᵀDW's (measured here: 1.9e-8 against this bound's 2.4e-6)
    W, _, Kmm, _ = weight_map(p)
    cond = np.linalg.cond(np.eye(p.k) + p.beta * W.T @ stats.D @ W) * np.linalg.cond(Kmm)
    tol = 10 * cond * np.finfo(float).eps
    assert tol < 1e-4  # well below what the power check below needs to see
    assert np.linalg.norm(p.mu - mu) <= tol * np.linalg.norm(mu)
    assert np.linalg.norm(p.U.T @ p.U - U.T @ U) <= tol * np.linalg.norm(U.T @ U)
    assert np.linalg.norm(q.mu - mu) > 1e-3 * np.linalg.norm(mu)  # the unrefined q(w) is not the optimum
    exact = negative_elbo(Xs, ys, p)
    # objective_ sums the partitions' statistics, the reference the rows at once: their rounding differs by
    # ~1e-8 relative (1.2e-8 measured on one CPU, under 1e-8 on another; −L ≈ 560 nats is a difference of
    # terms some hundred times larger). A tenth of the smallest gap this test must resolve (the unrefined
    # q(w)'s, > 1e-3 nats, asserted next) bounds it without losing that power.
    assert refined.objective_ == pytest.approx(exact, abs=1e-4)
    assert negative_elbo(Xs, ys, q) - exact > 1e-3
    refined.save(tmp_path / "m.nc")
    assert ADVGPRegressor.load(tmp_path / "m.nc").refine_seconds_ == refined.refine_seconds_
