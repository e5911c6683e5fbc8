"""The default sampler in its large-n configuration against the exact posterior on real data (issue 28): the
configuration SGHMC switches to beyond LARGE_N = 5,000 rows (K⁻¹y by CG to mean_tol and the probes by ULISSE,
'cg-ulisse', with a pivoted-Cholesky preconditioner of rank 2,000, and the probes the warmup's noise calls
for), where on 8,192 held-out rows four chains once agreed on a noise variance whose
sd was 20× the exact one.

The test runs that configuration on 2,048 rows — ``solver='cg-ulisse'`` and a rank-800 preconditioner, the
same rank-to-rows ratio (0.39) as 2,000 at 5,120 — because the exact reference costs O(n³) per evaluation: at
5,120 rows its MAP alone took over 5 minutes of CI's 2 cores and the whole test 13–25, more than half of
CI's budget. The same check at 4,096 to 22,784 rows, with SGHMC choosing its configuration by size, is
``benchmarks/fidelity.py`` (resumable; results in ``benchmarks/results/fidelity.json``)."""

import numpy as np
import pytest

from daskgp.core.priors import GammaPrior
from daskgp.exact.posterior import subset_map
from daskgp.mcmc.chains import sample
from daskgp.mcmc.config import EXACT_WARMUP_MAX_N
from daskgp.mcmc.diagnostics import run_fidelity
from daskgp.mcmc.samplers.sghmc import LARGE_N, SGHMC_PRECOND_RANK_LARGE
from daskgp.model.kernels import make_kernel

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

N = 2048
RANK = round(SGHMC_PRECOND_RANK_LARGE * N / 5120)  # 800: the large-n rank at the rows-to-rank ratio of 5,120
ESS_REQUIRED = 100  # bulk ESS per parameter, asserted before the bands, which are set at this ESS


def _power_plant(n):
    import daskgp

    ds = daskgp.load("power_plant")
    idx = np.random.default_rng(0).choice(ds.n, n, replace=False)
    X, y = ds.X_std[idx], ds.y_std[idx]
    return (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


def test_the_large_n_configuration_matches_the_exact_posterior_on_2048_power_plant_rows(client, tmp_path):
    """power_plant, 2,048 random rows (d = 4). Exact reference: the MAP of the dense-Cholesky log posterior
    and the Laplace covariance from its Hessian. SGHMC with the large-n solver configuration (above) and
    every other setting at its default (probes, the adaptation length of a target run, 200 iterations),
    2 chains × 900 kept draws (300 gave bulk ESS 43–81, short of ESS_REQUIRED).

    A required precision first, then fixed bands: every parameter's bulk ESS must reach ESS_REQUIRED (a
    chain that mixes worse fails here, instead of earning wider bands), and the bands are set at that ESS:
    the Monte Carlo se of a mean is sd/√ESS and of an sd ratio about 1/√(2·ESS), so every mean must lie
    within 0.1 sd (what the Laplace approximation itself may be off by) plus 3.5 se of the exact mean —
    0.1 + 3.5/√100 = 0.45 sd — and every sd within 0.05 + 3.5/√200 = 0.30 of the Laplace sd. Six
    comparisons at 3.5 se: a false alarm below 0.3 %. Far inside the failure of issue 28 (an sd 20× the
    exact one), and the fidelity checks must pass too. (The power against that failure, a wrong warmup
    metric, is shown in tests/mcmc/test_fidelity.py, on a target where the metric is wrong.)

    Still weak (issue 54 asks for ≥ 5,000 rows and a second start around the reference mode): at 5,120 rows
    the dense reference alone took 5 minutes of CI's 2 cores and the test 13–25; issue 55's cheaper exact
    gradients are what brings that size into the suite."""
    assert N <= LARGE_N  # so the configuration is the test's choice, not the size's
    assert N > EXACT_WARMUP_MAX_N  # the stochastic warmup of large n, not the exact MAP
    X, y = _power_plant(N)
    kernel = make_kernel("rbf", n_dims=X.shape[1])
    phi_ref, cov_ref = subset_map(X, y, kernel, 0.3, prior=GammaPrior(2.0, 1.0), size=N, rng=0)
    sd_ref = np.sqrt(np.diag(cov_ref))
    dt = sample(X, y, out=str(tmp_path / "pp.zarr"), client=client, n_chains=2, n_iter=1100, n_adapt=200,
                solver="cg-ulisse", precond_rank=RANK)
    cfg = dt.attrs["config"]
    assert cfg["solver"] == "cg-ulisse" and cfg["precond_rank"] == RANK, cfg
    assert cfg["probes_from_noise"] and 8 <= cfg["n_probes"] <= 32, cfg  # as the warmup's noise set them
    names = dt.attrs["param_names"]
    post = dt["posterior"].to_dataset()
    phi = np.stack([np.log(post[nm].values).ravel() for nm in names], axis=1)
    import arviz as az

    ess = az.ess(np.log(post)).to_array().values
    gap = (phi.mean(0) - phi_ref) / sd_ref
    ratio = phi.std(0) / sd_ref
    print(f"power_plant {N}: mean gap (sd)", gap.round(3), "sd ratio", ratio.round(3), "ESS", ess.round(0))
    assert ess.min() >= ESS_REQUIRED, ess
    assert np.all(np.abs(gap) < 0.1 + 3.5 / np.sqrt(ESS_REQUIRED)), (gap, ratio, ess)
    assert np.all(np.abs(ratio - 1) < 0.05 + 3.5 / np.sqrt(2 * ESS_REQUIRED)), (gap, ratio, ess)
    fid = run_fidelity(dt)
    assert fid is not None and fid.trustworthy, fid.reasons
