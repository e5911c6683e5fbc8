"""A sparse fit's checkpoint as the dashboard shows it (daskgp.interface.fitview): the trace read from each
family's checkpoint is the one the fit recorded, and the figures' sources hold exactly those numbers."""

import numpy as np
import pytest

from daskgp.interface.figures import FitFigures
from daskgp.interface.fitview import FIT_KINDS, StoredFit, fit_trace
from daskgp.runs.catalog import find_runs


@pytest.mark.cluster
def test_sgpr_and_advgp_checkpoints_show_what_their_fits_recorded(concrete, client, tmp_path):
    import daskgp as dg

    X, y = concrete.X, concrete.y
    sg = dg.SparseGPRegressor(n_inducing=10, max_iter=6).fit(
        X, y, client=client, checkpoint=tmp_path / "s.ckpt", keep_checkpoint=True)
    ad = dg.ADVGPRegressor(n_inducing=10, max_iter=30, tol=None, tau=2).fit(
        X, y, client=client, checkpoint=tmp_path / "a.ckpt", keep_checkpoint=True)
    kinds = {r.name: r.kind for r in find_runs([tmp_path])}
    assert kinds == {"s.ckpt": "sgpr", "a.ckpt": "advgp"}

    t = fit_trace(str(tmp_path / "s.ckpt"), "sgpr")
    np.testing.assert_array_equal(t["objective"], sg.bound_trace_)
    assert list(t["step"]) == list(range(1, len(sg.bound_trace_) + 1))
    assert np.all(np.diff(t["seconds"]) > 0) and 0 < t["seconds"].iloc[0] <= sg.fit_info_["seconds"]

    a = fit_trace(str(tmp_path / "a.ckpt"), "advgp")
    recs = ad.records_
    assert list(a["step"]) == [r.version for r in recs]
    np.testing.assert_array_equal(a["objective"], [r.objective for r in recs])
    np.testing.assert_array_equal(a["seconds"], [r.seconds for r in recs])
    assert list(a["staleness_max"]) == [max(r.staleness) for r in recs] and max(a["staleness_max"]) <= 2

    figs = FitFigures(FIT_KINDS["advgp"])
    figs.update(a)
    assert figs.src.data["x"] == list(a["seconds"]) and figs.src.data["y"] == list(a["objective"])
    n_contrib = sum(len(r.staleness) for r in recs)
    assert sum(figs.sources["staleness"].data["count"]) == n_contrib
    assert sum(figs.sources["partitions"].data["count"]) == len(recs)

    view = StoredFit(str(tmp_path / "s.ckpt"), str(tmp_path), "sgpr")
    assert view.status.startswith("sgpr fit, stopped") and len(view.trace) == len(sg.bound_trace_)
    assert not view.refresh()  # nothing committed since
    view.close()
    with pytest.raises(ValueError, match="no trace view"):
        fit_trace(str(tmp_path / "s.ckpt"), "warmup")
    # a fit that finishes removes its checkpoint: a view of it says so in one line (it raised before)
    import shutil

    view = StoredFit(str(tmp_path / "a.ckpt"), str(tmp_path), "advgp")
    shutil.rmtree(tmp_path / "a.ckpt")
    assert not view.refresh() and view.status == "failed" and "open its results file" in view.message


@pytest.mark.cluster
def test_an_interrupted_sgpr_fit_keeps_its_clock_across_the_resume(concrete, client, tmp_path):
    """Interrupted after 3 iterations and resumed to 6: the checkpoint's seconds continue from where they
    stopped (increasing, one per iteration), and the fit still ends bit for bit as an undisturbed one."""
    import daskgp as dg

    X, y = concrete.X, concrete.y
    kw = dict(n_inducing=10, max_iter=6)
    whole = dg.SparseGPRegressor(**kw).fit(X, y, client=client)

    def stop_at_3(theta, trace):
        if len(trace) == 3:
            raise KeyboardInterrupt

    path = tmp_path / "s.ckpt"
    est = dg.SparseGPRegressor(**kw)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, y, client=client, checkpoint=path, on_params=stop_at_3)
    first = fit_trace(str(path), "sgpr")["seconds"].tolist()
    assert len(first) == 3
    est.fit(X, y, client=client, checkpoint=path, resume=True, keep_checkpoint=True)
    t = fit_trace(str(path), "sgpr")
    assert t["seconds"].tolist()[:3] == first and np.all(np.diff(t["seconds"]) > 0) and len(t) == 6
    assert est.bound_trace_ == whole.bound_trace_


@pytest.mark.cluster
def test_a_gplvm_checkpoint_shows_its_bound_and_its_embedding(client, tmp_path):
    """The GPLVM's checkpoint after its last round: the trace is the fit's bound trace and the drawn latent
    means are its embedding's rows (all of them here: fewer than the 5,000 drawn), first two dimensions."""
    from sklearn.datasets import load_iris

    import daskgp as dg
    from daskgp.interface.fitview import fit_latent

    Y = load_iris().data
    gp = dg.BayesianGPLVM(n_components=2, n_inducing=8, n_outer=2, global_iter=5, local_iter=5,
                          chunk_rows=50)
    gp.fit(Y, client=client, checkpoint=tmp_path / "g.ckpt", keep_checkpoint=True)
    t = fit_trace(str(tmp_path / "g.ckpt"), "gplvm")
    np.testing.assert_array_equal(t["objective"], gp.bound_trace_)
    np.testing.assert_array_equal(t["seconds"], gp.trace_seconds_)  # the bound against the fit's clock
    assert np.all(np.diff(t["seconds"]) > 0) and t["seconds"].iloc[-1] <= gp.fit_info_["seconds"]
    mu = fit_latent(str(tmp_path / "g.ckpt"))
    np.testing.assert_array_equal(mu, gp.embedding_)
    figs = FitFigures(FIT_KINDS["gplvm"])
    figs.update(t, mu)
    assert figs.sources["latent"].data["x"] == gp.embedding_[:, 0].tolist()
    assert len(fit_latent(str(tmp_path / "g.ckpt"), max_points=10)) == 10


def test_calibration_bins_of_calibrated_and_overconfident_predictions():
    """The reliability bins: every held-out row in one bin; for outcomes drawn with the predicted
    probabilities, each bin's observed frequency is within 4 binomial standard errors of its mean
    prediction; predictions pushed to 0/1 (overconfident) leave the extreme bins far from it."""
    from daskgp.interface.cli.gpc import calibration_bins

    rng = np.random.default_rng(3)
    p = rng.uniform(0, 1, 20_000)
    y = rng.uniform(0, 1, p.size) < p
    bins = np.array(calibration_bins(p, y))
    assert bins[:, 2].sum() == p.size and len(bins) == 10
    se = np.sqrt(bins[:, 0] * (1 - bins[:, 0]) / bins[:, 2])
    assert np.all(np.abs(bins[:, 1] - bins[:, 0]) < 4 * se + 1e-12)
    over = np.array(calibration_bins(np.clip(2 * p - 0.5, 0, 1), y))
    assert np.abs(over[0, 1] - over[0, 0]) > 0.1 and np.abs(over[-1, 1] - over[-1, 0]) > 0.1


def test_the_held_out_log_is_drawn(tmp_path):
    """fit_heldout reads the command line's log; the figure's sources hold its seconds and metric, and the
    calibration figure the latest bins."""
    from daskgp.interface.fitview import fit_heldout
    from daskgp.sparse.fit import FitCheckpoint

    store = FitCheckpoint(tmp_path / "c")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "daskgp-writer.lock").write_text("{}")  # a fit store: its own files only
    store.log_heldout({"step": 10, "seconds": 1.5, "test_error": 0.2, "calibration": [[0.1, 0.2, 5]]})
    store.log_heldout({"step": 20, "seconds": 3.0, "test_error": 0.1,
                       "calibration": [[0.1, 0.1, 5], [0.9, 0.8, 7]]})
    h = fit_heldout(str(tmp_path / "c"))
    figs = FitFigures(FIT_KINDS["gpc"])
    figs.update_heldout(h)
    assert figs.held_src.data == {"x": [1.5, 3.0], "y": [0.2, 0.1]}
    assert figs.nll_src.data == {"x": [], "y": []}  # a log without NLL (daskgp <= 0.5): no points
    cal = figs.sources["calibration"].data
    assert cal["p"] == [0.1, 0.9] and cal["n"] == [5.0, 7.0]


FINISHED = {  # one small real fit per family, written by its command as a batch job would
    "sgpr.nc": ["sgpr", "--data", "flights", "--train-size", "3000", "--inducing", "20", "--max-iter", "25"],
    "advgp.nc": ["advgp", "--data", "flights", "--train-size", "2000", "--inducing", "20", "--max-iter", "40",
                 "--tau", "2", "--batch", "300"],
    "gpc.nc": ["gpc", "--data", "breast_cancer", "--inducing", "10", "--max-iter", "20", "--method", "ep"],
}


def write_finished_fits(folder) -> None:
    """Run the three fit commands at once (separate processes, one worker each) into ``folder``."""
    import os
    import subprocess
    import sys

    procs = {name: subprocess.Popen([sys.executable, "-m", "daskgp", *argv, "--workers", "1", "--out",
                                     str(folder / name)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=os.environ.copy())
             for name, argv in FINISHED.items()}
    for name, p in procs.items():
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, (name, err[-2000:])


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    folder = tmp_path_factory.mktemp("finished")
    write_finished_fits(folder)
    return folder


@pytest.mark.cluster
def test_finished_fits_are_listed_and_drawn_from_their_results_files(finished):
    """Once a fit finishes its checkpoint is gone: the catalogue lists each results file as finished with its
    steps; fit_results gives back exactly the stored trace, the held-out curve the command logged (ending
    with the file's test metric), ADVGP's staleness counts and GPC's reliability bins; the figures' sources
    hold those numbers."""
    import xarray as xr

    from daskgp.interface.cli.gpc import calibration_bins
    from daskgp.interface.fitview import fit_results

    entries = {r.name: r for r in find_runs([finished])}
    assert {k: (e.kind, e.state, e.steps) for k, e in entries.items()} == {
        "sgpr.nc": ("sgpr", "finished", 25), "advgp.nc": ("advgp", "finished", 40),
        "gpc.nc": ("gpc", "finished", 20)}
    for name in FINISHED:
        with xr.open_dataset(finished / name) as f:
            ds = f.load()
        res = fit_results(str(finished / name))
        figs = FitFigures(FIT_KINDS[res.kind])
        figs.update(res.trace, None, res.staleness)
        figs.update_heldout(res.heldout, res.calibration)
        held = res.heldout
        if res.kind == "sgpr":
            np.testing.assert_array_equal(res.trace["objective"], ds["bound_trace"].values)
            np.testing.assert_array_equal(res.trace["seconds"], ds["iteration_seconds"].values)
            assert figs.src.data["x"] == ds["iteration_seconds"].values.tolist()
            # logged every 10 iterations and the first, then the results file's own RMSE at the end
            assert held["step"].tolist() == [1, 10, 20, 25]
            np.testing.assert_array_equal(held["test_rmse"][:3], ds["heldout_test_rmse"].values)
            assert held["test_rmse"].iloc[-1] == ds.attrs["test_rmse"]
            assert np.all(held["test_rmse"] < ds.attrs["mean_predictor_rmse"])
            assert held["test_nlpd"][:3].tolist() == ds["heldout_test_nlpd"].values.tolist()
            # the file's own NLPD of its test predictions ends the curve
            m, s, y = ds["test_mean"].values, ds["test_sd"].values, ds["test_y"].values
            nlpd = np.mean(0.5 * np.log(2 * np.pi * s**2) + 0.5 * ((y - m) / s) ** 2)
            assert held["test_nlpd"].iloc[3] == ds.attrs["test_nlpd"] == pytest.approx(nlpd, rel=1e-12)
            assert figs.held_src.data["y"] == held["test_rmse"].tolist()
            assert figs.nll_src.data["y"] == held["test_nlpd"].tolist()
        elif res.kind == "advgp":
            np.testing.assert_array_equal(res.trace["objective"], ds["objective"].values)
            assert res.trace["step"].tolist() == ds["update"].values.tolist()
            # every update counts each partition's contribution once
            assert int(res.staleness[1].sum()) == 40 * len(ds.attrs["gradients_per_partition"])
            assert len(res.staleness[0]) <= 3  # τ = 2
            assert figs.sources["staleness"].data["count"] == res.staleness[1].tolist()
            assert sum(figs.sources["partitions"].data["count"]) == 40
            assert held["step"].tolist() == [10, 20, 30, 40]
            assert held["test_rmse"].iloc[-1] == pytest.approx(ds.attrs["test_rmse"], rel=1e-12)
            assert figs.nll_src.data["y"] == ds["heldout_test_nlpd"].values.tolist()  # its last step logged
        else:
            np.testing.assert_array_equal(res.trace["objective"], ds["evidence"].values)
            np.testing.assert_array_equal(figs.sources["train_error"].data["y"], ds["train_error"].values)
            assert held["step"].tolist() == [10, 20] and held["test_error"].iloc[-1] == ds.attrs["test_error"]
            # the log's NLL at the last iteration is the results file's (the same model, the same rows)
            assert ds["heldout_test_nll"].values[-1] == pytest.approx(ds.attrs["test_nll"], rel=1e-9)
            assert figs.nll_src.data["y"] == held["test_nll"].tolist()
            positive = ds["test_label"].values.astype(str) == ds.attrs["positive_class"]
            assert res.calibration == calibration_bins(ds["test_proba"].values, positive)
            assert sum(figs.sources["calibration"].data["n"]) == ds.sizes["test"]
    view = StoredFit(str(finished / "sgpr.nc"), str(finished), "sgpr")
    assert view.status == "sgpr fit, finished — 25 steps" and not view.refresh()
    view.close()
    with pytest.raises(ValueError, match="not a daskgp SGPR, ADVGP or GPC results file"):
        fit_results(str(finished / "missing.nc"))
