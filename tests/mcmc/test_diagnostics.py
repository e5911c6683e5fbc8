import arviz as az
import numpy as np
import pytest
import xarray as xr

from daskgp.mcmc.diagnostics import psrf_evolution, summary, to_datatree

NAMES = ["variance", "lengthscale", "noise"]


def _draws(rng, chains=4, draws=400, shift=0.0):
    d = rng.normal(0.0, 0.1, (chains, draws, 3))
    d[0] += shift  # one chain elsewhere: R-hat must notice
    return d


def test_datatree_in_natural_units_roundtrip_netcdf(tmp_path, rng):
    d = _draws(rng)
    dt = to_datatree(d, NAMES, {"step": np.full((4, 400), 1e-3)}, attrs={"method": "sgld"})
    assert isinstance(dt, xr.DataTree)
    assert dict(dt.posterior.sizes) == {"chain": 4, "draw": 400}
    np.testing.assert_allclose(dt.posterior["noise"].values, np.exp(d[:, :, 2]))
    assert "step" in dt.sample_stats
    dt.to_netcdf(tmp_path / "run.nc")
    back = xr.open_datatree(tmp_path / "run.nc")
    np.testing.assert_allclose(back.posterior["lengthscale"].values, np.exp(d[:, :, 1]))
    with pytest.raises(ValueError, match="chains, draws"):
        to_datatree(d[0], NAMES)


def test_psrf_evolution_matches_arviz_and_detects_a_stuck_chain(rng):
    good = to_datatree(_draws(rng), NAMES)
    ev = psrf_evolution(good, n_points=5)
    assert list(ev.n_draws.values)[-1] == 400
    full = az.rhat(good.posterior.to_dataset(), method="identity")
    for name in NAMES:
        assert ev["rhat"].sel(parameter=name).values[-1] == pytest.approx(full[name].item())
    assert float(ev["q975"][-1]) < 1.05
    bad = psrf_evolution(to_datatree(_draws(rng, shift=1.0), NAMES), n_points=5)
    assert float(bad["median"][-1]) > 1.5
    assert np.all(bad["q975"] >= bad["median"])


def test_summary_has_time_per_effective_sample(rng):
    table = summary(to_datatree(_draws(rng), NAMES), seconds=100.0)
    assert list(table.index) == NAMES
    np.testing.assert_allclose(table["sec_per_ess"], 100.0 / table["ess_bulk"])
    assert (table["r_hat"] < 1.05).all()


def test_post_warmup_keeps_the_posterior_group_and_names_late_freezers():
    """ArviZ's layout: the kept draws are the posterior group whole; kept draws still flagged as warming up
    (an SGLD chain whose step froze after the warmup's end) are named in a note; fewer than 4 kept draws, or
    none, is an error that says to run longer."""
    from daskgp.mcmc.diagnostics import post_warmup

    rng = np.random.default_rng(0)

    def run(n_kept, late=0):
        warm = np.zeros((2, n_kept), bool)
        warm[1, :late] = True
        return xr.DataTree.from_dict({
            "warmup_posterior": xr.Dataset({"s2": (("chain", "draw"), rng.gamma(2, 1, (2, 30)))}),
            "posterior": xr.Dataset({"s2": (("chain", "draw"), rng.gamma(2, 1, (2, n_kept)))}),
            "sample_stats": xr.Dataset({"warmup": (("chain", "draw"), warm)})})

    out, notes = post_warmup(run(50))
    assert out["posterior"].sizes["draw"] == 50 and not notes and out.attrs["warmup_draws"] == 30
    out, notes = post_warmup(run(50, late=7))
    assert out["posterior"].sizes["draw"] == 50 and "chains 1 (7 draws) were still in warmup" in notes[0]
    for n in (0, 3):
        with pytest.raises(ValueError, match="run longer"):
            post_warmup(run(n))
