"""HMC on the exact posterior and gradient (``method='hmc'``, issue 55's small-n path): exact on a known
Gaussian and on concrete's posterior against MH, each check shown to fail on a known-wrong variant (the same
trajectories without the accept step); its state resumes bit for bit."""

import arviz as az
import numpy as np
import pytest

from daskgp.mcmc.samplers import HMC, HMCState

from ..run_checks import Z_AGREE, posterior_agreement

MU = np.array([0.5, -1.0, 2.0])
SD = np.array([0.1, 0.02, 0.5])
CORR = np.array([[1.0, 0.8, -0.3], [0.8, 1.0, 0.1], [-0.3, 0.1, 1.0]])
SIGMA = CORR * np.outer(SD, SD)
PREC = np.linalg.inv(SIGMA)


def _gaussian(phi):
    d = phi - MU
    return -0.5 * d @ PREC @ d, -PREC @ d


def _chains(logp_grad, start, M, n_chains=4, n_iter=2500, n_adapt=500, **kw):
    draws = []
    for c in range(n_chains):
        h = HMC(logp_grad, len(start), n_adapt=n_adapt, **kw)
        out = h.run(h.init(start, M, rng=100 + c), n_iter)
        draws.append(out["phi"][n_adapt:])
    return np.array(draws)


def _summary(draws) -> dict:
    """mean, sd and ArviZ's bulk and tail ESS (p,) per parameter of draws (chains, n, p)."""
    import xarray as xr

    p = draws.shape[2]
    ds = xr.Dataset({f"x{j}": (("chain", "draw"), draws[:, :, j]) for j in range(p)})
    ess = {m: az.ess(ds, method=m) for m in ("bulk", "tail")}
    return {"mean": draws.mean(axis=(0, 1)), "sd": draws.reshape(-1, p).std(axis=0, ddof=1),
            **{f"ess_{m}": np.array([float(e[f"x{j}"]) for j in range(p)]) for m, e in ess.items()}}


def _against_truth(draws):
    """z of the means and of the log sds against the Gaussian's own (posterior_agreement with the exact
    side given an ESS of 10¹², i.e. no error)."""
    exact = {"mean": MU, "sd": SD, "ess_bulk": np.full(3, 1e12), "ess_tail": np.full(3, 1e12)}
    return posterior_agreement(_summary(draws), exact)


def test_hmc_samples_a_correlated_gaussian_and_without_its_accept_step_does_not():
    """4 chains × 2,000 kept draws on a correlated Gaussian (sds 25× apart, correlation 0.8), from 5 sd
    away in a metric 4× too wide: every mean within Z_AGREE = 4 standard errors (sd/√ESS_bulk) and every
    log sd within 4/√(2·ESS) of the truth (the tests' common tolerance, tests/run_checks.py: a family-wise
    false alarm of 4e-4 over 6 comparisons), with ESS ≥ 1,000 (a trajectory of a quarter period gives
    nearly independent draws). Power: the same trajectories without the accept step, their step tuned to
    an acceptance of 0.3 (ε ≈ 1.5 whitened, where leapfrog's stationary variance on a Gaussian is
    1/(1 − ε²/4) ≈ 2.3× the true one), fail."""
    start = MU + 5 * SD
    draws = _chains(_gaussian, start, 4 * SIGMA)
    z_mean, z_sd = _against_truth(draws)
    assert (z_mean < Z_AGREE).all() and (z_sd < Z_AGREE).all(), (z_mean, z_sd)
    assert _summary(draws)["ess_bulk"].min() > 1000
    wrong = _chains(_gaussian, start, 4 * SIGMA, accept=False, target_accept=0.3)
    z_mean, z_sd = _against_truth(wrong)
    assert (z_sd > Z_AGREE).any(), (z_mean, z_sd)


def _biased_force(phi):
    """A deterministic force that is not the Gaussian's gradient: off by a constant and a position-dependent
    term, each about half a posterior sd's worth of pull in the whitened coordinates."""
    return _gaussian(phi)[1] + 0.25 / SD + 0.25 * np.sin(phi / SD) / SD


def test_hmc_is_exact_with_a_force_that_is_not_the_gradient_and_without_its_accept_step_is_not():
    """HMC's inner ``force`` (what the sampler's trajectories integrate between their ends: the gradient in
    single precision): with the accept step on the exact log density, trajectories whose inner kicks use a
    wrong force still leave the posterior invariant (volume-preserving, reversible leapfrog) — the same
    Gaussian, tolerances and ESS floor as above. Power: the same trajectories without the accept step fail."""
    start = MU + 5 * SD
    draws = _chains(_gaussian, start, 4 * SIGMA, force=_biased_force)
    z_mean, z_sd = _against_truth(draws)
    assert (z_mean < Z_AGREE).all() and (z_sd < Z_AGREE).all(), (z_mean, z_sd)
    assert _summary(draws)["ess_bulk"].min() > 1000
    wrong = _chains(_gaussian, start, 4 * SIGMA, force=_biased_force, accept=False)
    z_mean, z_sd = _against_truth(wrong)
    assert (z_mean > Z_AGREE).any() or (z_sd > Z_AGREE).any(), (z_mean, z_sd)


def _through_json(d: dict) -> dict:
    import json

    from daskgp.core.plaindata import decode, encode

    return decode(json.loads(json.dumps(encode(d), allow_nan=False)))


def test_hmc_state_through_plain_data_continues_bit_identically():
    """A chain broken at iteration 130 of a 300-iteration adaptation (inside the metric's window, before
    its midpoint re-estimate), its state through strict JSON, continues to the same draws, steps and
    leapfrog counts as an unbroken one; a malformed field is named."""
    M = 4 * SIGMA
    whole = HMC(_gaussian, 3, n_adapt=300)
    ref = whole.run(whole.init(MU + SD, M, rng=5), 400)
    part = HMC(_gaussian, 3, n_adapt=300)
    first = part.init(MU + SD, M, rng=5)
    a = part.run(first, 130)
    state = HMCState.from_dict(_through_json(first.to_dict()), p=3)
    b = HMC(_gaussian, 3, n_adapt=300).run(state, 270)
    for key in ("phi", "step", "n_leapfrog", "accepted"):
        np.testing.assert_array_equal(np.concatenate([a[key], b[key]]), ref[key], err_msg=key)
    assert ref["step"][-1] != ref["step"][0]  # adapted across the break
    bad = first.to_dict()
    bad["chol"] = np.zeros((2, 2))
    with pytest.raises(ValueError, match="chol"):
        HMCState.from_dict(bad, p=3)


def test_hmc_samples_concretes_posterior_as_mh_does_and_without_its_accept_step_does_not(concrete, client,
                                                                                          tmp_path):
    """The small-n path on real data: ``method='hmc'`` (2 chains × 1,000, the exact MAP warmup) and MH (2
    chains × 2,000), both through ``sample`` on 300 concrete rows, agree within the tests' common tolerance
    (posterior_agreement: 4 combined standard errors from each run's own ESS, as for SGHMC against MH).
    HMC needs a tenth of MH's draws for the same ESS. Power: HMC's trajectories on the same exact posterior
    without the accept step, tuned to an acceptance of 0.3, disagree with MH."""
    from daskgp.mcmc.chains import sample
    from daskgp.mcmc.config import SamplerConfig
    from daskgp.mcmc.diagnostics import run_summary
    from daskgp.mcmc.segments import _exact_target

    X, y = concrete.X_std[:300], concrete.y_std[:300]
    mh = sample(X, y, out=str(tmp_path / "mh.zarr"), client=client, method="mh", n_chains=2, n_iter=2000,
                checkpoint_every=500, seed=12)
    hm = sample(X, y, out=str(tmp_path / "hmc.zarr"), client=client, method="hmc", n_chains=2, n_iter=1000,
                checkpoint_every=250, seed=13)
    t_mh, _ = run_summary(mh)
    t_hm, notes = run_summary(hm)
    assert not notes, notes
    assert (t_hm["ess_bulk"] > 400).all() and (t_hm["r_hat"] < 1.02).all(), t_hm
    z_mean, z_sd = posterior_agreement(t_hm, t_mh)
    assert (z_mean < Z_AGREE).all() and (z_sd < Z_AGREE).all(), (z_mean, z_sd)
    stats = hm["sample_stats"]
    assert not stats["divergent"].values.any() and 0.6 < float(stats["accepted"].mean()) <= 1.0
    f = _exact_target(X, y, SamplerConfig(method="hmc"))
    start = np.log([float(hm["posterior"][k].mean()) for k in ("variance", "lengthscale", "noise")])
    M = np.asarray(hm.attrs["M"])
    # 2,400 iterations: the missing accept step's bias is fixed, and the standard errors that must reveal it
    # shrink as 1/√draws (at 1,200 its z came out at 3.9 against the 4 of the test on one machine)
    wrong = _chains(f, start, M, n_chains=2, n_iter=2400, n_adapt=200, accept=False, target_accept=0.3)
    names = ("variance", "lengthscale", "noise")
    t_wrong = _summary(np.exp(wrong))
    z_mean, z_sd = posterior_agreement(t_wrong, {k: t_mh[k].loc[list(names)].to_numpy()
                                                 for k in ("mean", "sd", "ess_bulk", "ess_tail")})
    assert (z_mean > Z_AGREE).any() or (z_sd > Z_AGREE).any(), (z_mean, z_sd)


def test_a_released_runs_exact_target_ends_the_segment_at_its_next_evaluation(concrete):
    """Once the driver releases a run (its target met, or stopped), a segment still in flight ends at its
    next evaluation of the exact posterior, as the stochastic gradient's segments do; before, HMC's segments
    a block ahead ran to their ends (20 s of a 130 s run on concrete). Power: the same target of a run not
    released evaluates."""
    from daskgp.mcmc.config import SamplerConfig
    from daskgp.mcmc.segments import RunReleased, _Target, release_operators

    X, y = concrete.X_std[:200], concrete.y_std[:200]
    cfg = SamplerConfig(method="hmc")
    live, done = _Target(X, y, cfg, "test-hmc-live"), _Target(X, y, cfg, "test-hmc-released")
    phi = np.log([1.0, 1.0, 0.1])
    lp, g = live.log_density_and_grad(phi)
    assert np.isfinite(lp) and g.shape == (3,)
    release_operators("test-hmc-released")
    with pytest.raises(RunReleased, match="the run ended"):
        done.log_density_and_grad(phi)
    with pytest.raises(RunReleased, match="the run ended"):
        done.log_density(phi)
    assert np.isfinite(live.log_density(phi))


def test_a_short_adaptation_tunes_the_step_in_the_start_metric_and_a_long_one_re_estimates_it():
    """A target run adapts over 50 iterations (HMCSampler.adaptation_for_target), below
    METRIC_WINDOWS_MIN_ADAPT: the step moves, the metric stays the start's (the exact Laplace covariance
    there); an adaptation of METRIC_WINDOWS_MIN_ADAPT iterations or more re-estimates it in its windows."""
    from daskgp.mcmc.config import SamplerConfig
    from daskgp.mcmc.samplers import get_sampler
    from daskgp.mcmc.samplers.hmc import METRIC_WINDOWS_MIN_ADAPT, metric_windows

    K = SamplerConfig(method="hmc", target_ess=400).n_adapt
    assert K == get_sampler("hmc").adaptation_for_target(None) == 50 < METRIC_WINDOWS_MIN_ADAPT
    assert metric_windows(K) == [] and len(metric_windows(METRIC_WINDOWS_MIN_ADAPT)) == 3
    M = 4 * SIGMA  # a start metric twice too wide in every sd
    for n_adapt, moved in ((K, False), (METRIC_WINDOWS_MIN_ADAPT, True)):
        h = HMC(_gaussian, 3, n_adapt=n_adapt)
        state = h.init(MU, M, rng=3)
        L0, eps0 = state.chol.copy(), state.eps
        h.run(state, n_adapt)
        assert state.eps != eps0
        assert (not np.allclose(state.chol, L0)) == moved, n_adapt
