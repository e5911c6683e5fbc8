"""The dashboard's figures without a browser or a page (issue 32: state, figures and views apart): every
number a source holds is the run's own, thinned only past MAX_POINTS draws."""

import numpy as np
import pytest
import xarray as xr

from daskgp.interface.figures import (
    GENERIC_MONITOR,
    MAX_POINTS,
    RunFigures,
    chain_histograms,
    diagnostics_table,
    progress_text,
    rhat_text,
)
from daskgp.mcmc.diagnostics import RunStatus
from daskgp.mcmc.samplers import get_sampler


def _snapshot(rng, C=2, D=300, warm=60):
    post = {nm: np.exp(rng.standard_normal((C, D))) for nm in ("variance", "lengthscale", "noise")}
    stats = {"warmup": np.arange(D)[None, :].repeat(C, 0) < warm, "step": rng.uniform(0.1, 1, (C, D)),
             "noise_fraction": rng.uniform(0, 0.5, (C, D)), "seconds": rng.uniform(0, 1, (C, D)),
             "cg_iterations": rng.integers(1, 20, (C, D)).astype(float), "kinetic": rng.uniform(0, 2, (C, D))}
    return post, stats


def test_the_sources_hold_the_runs_draws_and_records(rng):
    post, stats = _snapshot(rng)
    figs = RunFigures(list(post), set(stats), get_sampler("sghmc"))
    # the sampler's own health figures, then the generic ones; none for a record it does not keep
    assert list(figs.health) == [*get_sampler("sghmc").monitor, *GENERIC_MONITOR]
    figs.update(post, stats, sampling_start=60)
    for nm, values in post.items():
        src, box = figs.trace[nm][1], figs.trace[nm][2]
        np.testing.assert_array_equal(np.array(src.data["ys"]), values)  # 300 < MAX_POINTS: unthinned
        assert box.right == 60.0
        band = figs.run[nm][1].data  # pooled running mean of the kept draws, draw-major
        kept = values[:, 60:].T.reshape(-1)
        assert band["m"][-1] == pytest.approx(kept.mean()) and len(band["m"]) == kept.size
        hist = figs.dens[nm][1].data
        areas = [np.sum((np.array(x[1::2]) - x[::2]) * y[::2]) for x, y in zip(hist["xs"], hist["ys"],
                                                                              strict=True)]
        np.testing.assert_allclose(areas, 1.0)  # each chain's density integrates to one
    np.testing.assert_array_equal(np.array(figs.health["step"][1].data["ys"]), stats["step"])


def test_long_runs_are_thinned_in_the_plots_only(rng):
    post, stats = _snapshot(rng, D=4000, warm=0)
    figs = RunFigures(list(post), set(stats), get_sampler("sghmc"))
    figs.update(post, stats, sampling_start=0)
    xs = figs.trace["noise"][1].data["xs"][0]
    assert len(xs) == MAX_POINTS and xs[0] == 0 and xs[-1] == 3999
    np.testing.assert_array_equal(figs.trace["noise"][1].data["ys"][1], post["noise"][1, xs])


def test_sgld_shows_its_freeze_ratio_with_the_threshold():
    post = {"noise": np.ones((2, 200))}
    ratio = np.full((2, 200), np.nan)
    ratio[:, 99], ratio[:, 199] = [0.5, 0.2], [0.004, 0.02]
    figs = RunFigures(["noise"], {"ratio", "step", "warmup"}, get_sampler("sgld"))
    figs.update(post, {"ratio": ratio, "step": np.ones((2, 200)), "warmup": np.zeros((2, 200), bool)}, 0)
    d = figs.health["ratio"][1].data
    assert sorted(zip(d["x"], d["y"], strict=True)) == [(99, 0.2), (99, 0.5), (199, 0.004), (199, 0.02)]
    assert set(d["thr"]) == {0.01}
    assert figs.health["ratio"][0].legend[0].items[0].label.value == "freeze at 0.01"


def test_the_freeze_line_is_the_runs_own_threshold():
    """A run with another freeze rule (``--freeze-threshold 0.05``) draws its line and legend at 0.05 (the
    figure said 0.01 whatever the run's rule)."""
    ratio = np.full((1, 100), np.nan)
    ratio[0, 49] = 0.03
    figs = RunFigures(["noise"], {"ratio", "warmup"}, get_sampler("sgld"), freeze_threshold=0.05)
    figs.update({"noise": np.ones((1, 100))}, {"ratio": ratio, "warmup": np.zeros((1, 100), bool)}, 0)
    assert figs.health["ratio"][1].data["thr"] == [0.05]
    assert figs.health["ratio"][0].legend[0].items[0].label.value == "freeze at 0.05"


def test_predictive_and_psrf_sources_and_texts():
    figs = RunFigures(["noise"], {"warmup"}, get_sampler("mh"))
    pred = xr.Dataset({k: ("point", np.arange(3.0) + i) for i, k in
                       enumerate(("observed", "mean", "lower", "upper"))})
    figs.update_predictive(pred, None)
    assert figs.pred[1].data["upper"] == [3.0, 4.0, 5.0] and figs.pred[2].data == {"x": [0.0, 2.0],
                                                                                    "y": [0.0, 2.0]}
    figs.update_psrf((np.array([10, 20]), np.array([1.2, 1.05]), np.array([1.3, 1.08])))
    assert figs.psrf[1].data["ref"] == [1.01, 1.01]
    diag = {"rhat": {"noise": 1.004}, "ess": {"noise": 812.0}, "phase": "sampling"}
    assert rhat_text(diag) == "**R-hat (max): 1.004**"
    assert "| noise | 1.004 | 812 |" in diagnostics_table(diag, ["noise"])
    st = RunStatus(done=100, n_iter=400, elapsed=50.0)
    assert progress_text(100, st, 400) == "100 of 400 draws per chain, about 2 min 30 s to go"


def test_chain_histograms_share_their_bins():
    x = np.vstack([np.linspace(0, 1, 50), np.linspace(0.5, 2, 50)])
    h = chain_histograms(x, bins=10)
    assert h["xs"][0] == h["xs"][1] and h["xs"][0][0] == 0.0 and h["xs"][0][-1] == 2.0


def test_arviz_plots_draw_the_kept_draws_of_the_run(rng):
    """arviz_figures: every chain's kept draws (after the warmup) are a trace line of ArviZ's trace plot,
    exactly; the warmup's draws are in none of its lines (power: a plot of the whole chains would hold them);
    each grid fits the width asked for; too few kept draws is a ValueError (said in the page)."""
    from bokeh.models import ColumnDataSource

    from daskgp.interface.arvizviews import ARVIZ_PLOTS, arviz_figures
    from daskgp.mcmc.diagnostics import split_at_warmup

    post, stats = _snapshot(rng)
    dt = split_at_warmup(post, stats, 60)
    figs = arviz_figures(dt, width=840)
    assert set(figs) == set(ARVIZ_PLOTS)
    ys = [np.asarray(m.data["y"]) for m in figs["trace_dist"].references()
          if isinstance(m, ColumnDataSource) and "y" in m.data]
    for name, v in post.items():
        for c in range(v.shape[0]):
            assert any(y.shape == (240,) and np.array_equal(y, v[c, 60:]) for y in ys), (name, c)
            assert not any(y.shape == (300,) and np.array_equal(y, v[c]) for y in ys)
    for grid in figs.values():
        cols = 1 + max(c for _, _, c in grid.children)
        assert sum(f.width for f, r, _ in grid.children if r == 0) <= 840 and cols >= 1
    with pytest.raises(ValueError, match="no draws after the warmup"):
        arviz_figures(split_at_warmup(post, stats, 300))


def _ppc_agrees(tree, means, var, z: float = 4.5) -> bool:
    """Whether each point's replicated y have the mixture predictive's mean and variance (components
    N(m_s, v_s), equal weights) within ``z`` standard errors: the mean's SE √(σ²/N) and the variance's
    √((μ₄ − σ⁴)/N) from the mixture's own central moments (conservative for the stratified draws). At
    z = 4.5 a correct sampler fails a point with probability < 7e-6, so < 1e-3 over 120 points."""
    y = tree["posterior_predictive"]["y"].values[0]  # (N, points)
    N = y.shape[0]
    mu = means.mean(axis=0)
    dev = means - mu
    s2 = (var + dev**2).mean(axis=0)
    mu4 = (dev**4 + 6 * dev**2 * var + 3 * var**2).mean(axis=0)
    ok_mean = np.abs(y.mean(axis=0) - mu) < z * np.sqrt(s2 / N)
    ok_var = np.abs(y.var(axis=0, ddof=1) - s2) < z * np.sqrt((mu4 - s2**2) / N)
    return bool(ok_mean.all() and ok_var.all())


def test_the_heldout_ppc_draws_are_the_mixture_predictive():
    """heldout_ppc_tree's replicated y match the mixture of the draws' Gaussian predictives (mean and
    variance, tolerances from their standard errors); two wrong samplers — the draws' means without their
    noise, and the variance used as a standard deviation — are rejected by the same check (its power);
    the points run in the order of their predictive mean, observed values alongside; ArviZ draws it."""
    from daskgp.interface.arvizviews import heldout_ppc_figure, heldout_ppc_tree

    rng = np.random.default_rng(7)
    S, P = 10, 120
    means = rng.normal(0, 2, P)[None, :] + rng.normal(0, 0.5, (S, P))
    var = rng.uniform(0.2, 0.5, (S, P))
    observed = rng.normal(0, 2, P)
    pred = xr.Dataset({"draw_mean": (("draw", "point"), means), "draw_var": (("draw", "point"), var)})
    tree = heldout_ppc_tree(pred, observed, max_points=P, replicates=400)
    order = np.argsort(means.mean(axis=0), kind="stable")
    np.testing.assert_array_equal(tree["observed_data"]["y"].values, observed[order])
    assert tree["posterior_predictive"]["y"].shape == (1, S * 400, P)
    assert _ppc_agrees(tree, means[:, order], var[:, order])
    noise = rng.standard_normal((S, 400, P))
    for wrong in (np.repeat(means[:, None, :], 400, axis=1),  # no predictive noise
                  means[:, None, :] + var[:, None, :] * noise):  # v used as the sd
        bad = tree.copy()
        bad["posterior_predictive"] = xr.Dataset({"y": (("chain", "draw", "obs"),
                                                        wrong[:, :, order].reshape(1, -1, P))})
        assert not _ppc_agrees(bad, means[:, order], var[:, order])
    assert len(heldout_ppc_tree(pred, observed)["observed_data"]["y"]) == 60  # PPC_POINTS of the 120
    grid = heldout_ppc_figure(pred, observed)
    assert grid.children and grid.children[0][0].renderers
