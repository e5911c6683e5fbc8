"""The distributed Bayesian GPLVM on scikit-learn's digits: the map-reduce bound against the dense
Titsias–Lawrence bound, local steps on the workers, the latent space, imputation and the per-class
bound-ratio classifier."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from daskgp.sparse.bound import GlobalParams, bound_and_grads
from daskgp.sparse.chunks import ChunkedRows
from daskgp.sparse.gplvm import BayesianGPLVM
from daskgp.sparse.gplvm_classifier import GPLVMClassifier

from .dense_references import bgplvm_bound_dense

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return d.data, d.target


def test_distributed_latent_bound_equals_dense_and_local_step_ascends(digits, client, rng):
    """Psi-statistics map-reduced over uneven chunks on two workers give the dense Titsias–Lawrence bound
    to 1e-8 relative; one parallel local step (each chunk's q(x_i) on its own worker) raises the bound."""
    Y = (digits[0][:60] - digits[0][:60].mean(0)) / digits[0][:60].std()
    mu, S = rng.standard_normal((60, 2)), rng.uniform(0.05, 0.5, (60, 2))
    theta = GlobalParams(rng.standard_normal((8, 2)), 1.0, np.array([1.0, 1.5]), noise=0.05)
    ref = bgplvm_bound_dense(Y, mu, S, theta.Z, theta.variance, theta.lengthscales, theta.beta)
    rows = ChunkedRows.from_arrays(client, Y, 25, mu=mu, S=S)
    assert rows.sizes == [25, 25, 10]
    F, grad, total = rows.bound_and_grad(theta)
    assert F == pytest.approx(ref, rel=1e-8)
    assert np.all(np.isfinite(grad)) and grad.shape == (8 * 2 + 2 + 2,)
    rows.local_step(theta, total, n_iter=10)
    F_after = bound_and_grads(rows.stats(theta), theta, grads=False)
    assert F_after > F + 1.0
    assert not np.allclose(rows.field("mu"), mu)  # the local parameters moved, on the workers


@pytest.fixture(scope="module")
def fitted(digits, client):
    Y, labels = digits
    trace = []
    g = BayesianGPLVM(n_components=3, n_inducing=15, n_outer=3, global_iter=15, local_iter=10,
                      chunk_rows=100).fit(Y[:300], client=client,
                                          callback=lambda ev: trace.append(ev.objective))
    return g, trace


def test_fit_never_lowers_the_bound_and_beats_pca_as_an_embedding(fitted, digits):
    """The bound trace is non-decreasing (tolerance 1e-6 nats for L-BFGS-B's line search round-off); in the
    3-D latent space a 1-nearest-neighbour classifier does better than in PCA's 3-D space (5-fold CV)."""
    from sklearn.decomposition import PCA
    from sklearn.model_selection import cross_val_score
    from sklearn.neighbors import KNeighborsClassifier

    g, trace = fitted
    Y, labels = digits
    assert trace == g.bound_trace_ and len(trace) >= 3 * 2
    assert np.min(np.diff(trace)) > -1e-6
    assert g.bound_ == pytest.approx(trace[-1], rel=1e-9)
    assert g.embedding_.shape == (300, 3) and np.all(g.embedding_var_ > 0)
    knn = KNeighborsClassifier(1)
    acc_gplvm = cross_val_score(knn, g.embedding_, labels[:300], cv=5).mean()
    acc_pca = cross_val_score(knn, PCA(3).fit_transform(Y[:300]), labels[:300], cv=5).mean()
    assert acc_gplvm > acc_pca


def beats_fill(fill, other, Y, missing) -> float:
    """One-sided t statistic of 'fill beats other' over the rows of Y: per row, the mean over its missing
    entries of (other's squared error − fill's). The rows are the independent units (a digit's pixels are
    not), so the test has len(Y) − 1 degrees of freedom."""
    d = np.array([np.mean((other[i, m] - Y[i, m]) ** 2 - (fill[i, m] - Y[i, m]) ** 2)
                  for i, m in enumerate(missing)])
    return float(d.mean() / (d.std(ddof=1) / np.sqrt(len(d))))


def test_imputation_beats_filling_with_the_mean(fitted, digits, client):
    """100 held-out digits with their bottom half missing: the GPLVM's fill beats the pixel means, a
    one-sided paired t test over the digits at 1e-3 (t > 3.17 with 99 degrees of freedom; with 20 digits
    the test measured t = 2.6, too few units for the effect). Power: the same fills handed to the wrong
    digits (each digit gets the next one's) fail it."""
    from scipy.stats import t

    g, _ = fitted
    Y = digits[0][1000:1100]
    missing = np.zeros_like(Y, dtype=bool)
    missing[:, 32:] = True
    Ym = np.where(missing, np.nan, Y)
    filled = g.impute(Ym, client=client)
    assert np.array_equal(filled[~missing], Y[~missing])
    means = np.broadcast_to(g.y_mean_, Y.shape)
    critical = t.ppf(1 - 1e-3, len(Y) - 1)
    assert beats_fill(filled, means, Y, missing) > critical, beats_fill(filled, means, Y, missing)
    shuffled = np.roll(filled, 1, axis=0)
    assert beats_fill(shuffled, means, Y, missing) < critical, beats_fill(shuffled, means, Y, missing)
    # transform of complete rows gives latent points whose reconstruction is close to the rows
    rmse_mean = np.sqrt(np.mean((means[missing] - Y[missing]) ** 2))
    recon = g.predict_latent(g.transform(Y[:5], client=client))
    assert np.sqrt(np.mean((recon - Y[:5]) ** 2)) < rmse_mean


def test_per_class_bound_ratio_classifies_digits(digits, client):
    """One small GPLVM per digit (20 training rows each), 40 held-out digits: the classifier is right on
    most of them, an exact one-sided binomial test of accuracy > 0.5 at 1e-3 (31 of 40 or more; chance is
    0.1). Power: the same scores with the classes rotated by one fail it."""
    from scipy.stats import binomtest

    Y, labels = digits
    idx = np.random.default_rng(0).permutation(len(Y))
    tr, te = idx[:200], idx[200:240]
    params = {"n_components": 3, "n_inducing": 8, "n_outer": 1, "global_iter": 10, "local_iter": 10,
              "chunk_rows": 10}
    clf = GPLVMClassifier(params, n_iter=20).fit(Y[tr], labels[tr], client=client)
    assert len(clf.models_) == 10
    scores = clf.decision_function(Y[te], client=client)
    assert scores.shape == (40, 10) and np.all(np.isfinite(scores))

    def p_value(s):
        hits = int(np.sum(clf.classes_[np.argmax(s, axis=1)] == labels[te]))
        return binomtest(hits, len(te), 0.5, alternative="greater").pvalue

    assert p_value(scores) < 1e-3, p_value(scores)
    assert p_value(np.roll(scores, 1, axis=1)) > 1e-3


@pytest.mark.parametrize("case,msg", [
    ("nan", "contains NaN"), ("components", "n_components"), ("inducing", "n_inducing"),
    ("constant", "every row of Y is the same point"),
])
def test_bad_input(case, msg, digits, client):
    Y = digits[0][:20].copy()
    kw = {"n_components": 2, "n_inducing": 5}
    if case == "nan":
        Y[3, 4] = np.nan
    elif case == "constant":
        Y[:] = Y[0]
    elif case == "components":
        kw["n_components"] = 65
    else:
        kw["n_inducing"] = 21
    with pytest.raises(ValueError, match=msg):
        BayesianGPLVM(**kw).fit(Y, client=client)


def test_impute_refuses_a_row_with_nothing_observed(fitted, client):
    g, _ = fitted
    Y = np.full((2, 64), np.nan)
    Y[0] = 1.0
    with pytest.raises(ValueError, match="no observed value"):
        g.impute(Y, client=client)


def test_an_interrupted_fit_resumes_from_its_checkpoint_to_the_undisturbed_fit(digits, client, tmp_path):
    """Issue 32: a GPLVM fit commits its round (θ, every q(x_i), the trace) to a checkpoint folder; stopped
    by Ctrl-C in its second round and resumed, it ends with the undisturbed fit's bound trace and embedding,
    bit for bit (a round redone from its committed start repeats the same arithmetic). The checkpoint is
    refused without resume and by another setting, and removed once the fit ends."""
    from daskgp.sparse.gplvm import GPLVMCheckpoint

    Y = digits[0][:200]
    kw = dict(n_components=2, n_inducing=8, n_outer=3, global_iter=5, local_iter=5, chunk_rows=50)
    whole = BayesianGPLVM(**kw).fit(Y, client=client)
    path = tmp_path / "gplvm.ckpt"

    def stop_in_round_2(event):
        if GPLVMCheckpoint(path).iterations() == 1:  # round 1 committed: a reader never writes
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        BayesianGPLVM(**kw).fit(Y, client=client, checkpoint=path, callback=stop_in_round_2)
    assert GPLVMCheckpoint(path).iterations() == 1
    first = GPLVMCheckpoint(path).seconds()  # the clock of round 1, for the dashboard
    assert len(first) == len(GPLVMCheckpoint(path).read_state(None)[1]["trace"])
    assert np.all(np.diff(first) > 0)
    with pytest.raises(FileExistsError, match="resume=True"):
        BayesianGPLVM(**kw).fit(Y, client=client, checkpoint=path)
    with pytest.raises(ValueError, match="other data or settings"):
        BayesianGPLVM(**{**kw, "local_iter": 4}).fit(Y, client=client, checkpoint=path, resume=True)
    done = BayesianGPLVM(**kw).fit(Y, client=client, checkpoint=path, resume=True)
    assert done.bound_trace_ == whole.bound_trace_
    # the clock goes on from where the interrupted fit stopped
    assert done.trace_seconds_[:len(first)] == first and np.all(np.diff(done.trace_seconds_) > 0)
    np.testing.assert_array_equal(done.embedding_, whole.embedding_)
    np.testing.assert_array_equal(done.params_.to_vector(), whole.params_.to_vector())
    assert not path.exists()


def _ring(n: int):
    """A dask Y (n, 3) made on the workers, 10⁵ rows a chunk: two latent dimensions seen through a sine, a
    cosine and their product, plus noise (seeded per chunk: the same rows whatever the cluster)."""
    import dask.array as da

    X = da.random.RandomState(7).normal(size=(n, 2), chunks=(100_000, 2))
    noise = da.random.RandomState(8).normal(scale=0.05, size=(n, 3), chunks=(100_000, 3))
    return da.stack([da.sin(X[:, 0]), da.cos(X[:, 1]), X[:, 0] * X[:, 1]], axis=1) + noise


@pytest.mark.slow
def test_client_memory_is_flat_in_n_the_latent_state_never_gathered(client, monkeypatch):
    """Issue 58: the GPLVM keeps q(x_i) on the workers — the round's restart copy on another worker, the
    k-means start from a sample, the embedding of a dask Y as dask arrays there — so the client's peak
    allocation over a fit (tracemalloc, which counts every numpy buffer made in this process; the process's
    RSS moves by tens of MB with the client's own threads) is the same at 10⁵ and 10⁶ rows. The gathering
    variant — the fit of daskgp <= 0.3, which gathered μ and S (16·n·q bytes) after every round — grows by
    at least that much: 28.8 MB more at 10⁶ rows than at 10⁵."""
    import tracemalloc

    from daskgp.sparse import gplvm_latent

    kw = dict(n_components=2, n_inducing=8, n_outer=2, global_iter=1, local_iter=1, chunk_rows=100_000)

    def peak(n):
        Y = _ring(n)
        tracemalloc.start()
        g = BayesianGPLVM(**kw).fit(Y, client=client)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert g.embedding_.shape == (n, 2) and np.all(np.isfinite(g.embedding_[:1000].compute()))
        return top

    flat = peak(10**5), peak(10**6)
    keep = gplvm_latent.RestartCopies.keep

    def gathering(self, rows, round_):  # the old restart copy: every q(x_i) gathered here
        kept = keep(self, rows, round_)
        gathering.held = (rows.field("mu"), rows.field("S"))
        return kept

    monkeypatch.setattr(gplvm_latent.RestartCopies, "keep", gathering)
    grown = peak(10**5), peak(10**6)
    bytes_16nq = 16 * (10**6 - 10**5) * 2
    assert flat[1] - flat[0] < 0.25 * bytes_16nq, flat  # measured: 8.15 and 8.26 MB
    assert grown[1] - grown[0] > bytes_16nq, grown  # measured: 9.5 and 86.0 MB


def test_a_lost_chunk_is_placed_again_from_its_copy_on_another_worker(digits, client):
    """Issue 58: after a round every chunk's q(x_i) is copied to another worker than the chunk's; a chunk
    whose future is lost (here cancelled, as a dead worker's are) is placed again from that copy and its rows
    from the data — the same numbers; a chunk whose copy is lost too is placed from the round's commit when
    the fit has one, and is one clear WorkerLostError when it has none."""
    from daskgp.compute.cluster import cluster_workers
    from daskgp.compute.rows import WorkerLostError
    from daskgp.sparse.gplvm_latent import RestartCopies, latent_blocks, take_rows
    from daskgp.sparse.gplvm_start import principal_latents

    Y = digits[0][:200] / 16.0
    source = ChunkedRows.from_arrays(client, Y, 50)
    rows = [source]
    principal_latents(rows, 2)
    before = np.concatenate(list(latent_blocks(rows[0])))
    copies = RestartCopies(source)
    kept = copies.keep(rows[0], 3)
    who = client.who_has(kept[1] + kept[2])
    for f, c in zip(kept[1], kept[2], strict=True):  # chunk and copy on two workers: either may be lost
        assert len(set(who[f.key]) | set(who[c.key])) == len(cluster_workers(client)) == 2
    # a lost future, as a dead worker leaves it (one of an unrelated task, cancelled: cancelling the chunk's
    # own would cancel its dependents, the copies, which a worker's death does not)
    gone = client.submit(np.zeros, 3, pure=False)
    client.cancel([gone])
    round_, primary, copies_ = kept
    placed = copies.place((round_, [gone, gone] + primary[2:], copies_))  # chunks 0 and 1 lost
    np.testing.assert_array_equal(np.concatenate(list(latent_blocks(placed))), before)
    np.testing.assert_array_equal(take_rows(placed, "Y", np.arange(200)), Y)
    lost_both = (round_, [gone] + primary[1:], [gone] + copies_[1:])  # chunk 0's copy lost too
    with pytest.raises(WorkerLostError, match="cannot continue"):
        copies.place(lost_both)

    class Committed:  # a checkpoint holding round 3: the chunk comes back from it
        def blocks(self, edges):
            return ((before[a:b, :2], before[a:b, 2:]) for a, b in edges)

    again = RestartCopies(source, lambda r: Committed() if r == 3 else None).place(lost_both)
    np.testing.assert_array_equal(np.concatenate(list(latent_blocks(again))), before)
