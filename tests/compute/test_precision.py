"""When float32 kernel rows are safe for CG (:mod:`daskgp.compute.precision`), and a run choosing its rows'
dtype from its start (issue 55, item 2: a held-out 8,192-row run's solve ran past 450 CG iterations; a
small noise variance makes float32 products stall CG, and no budget rescues a stalled solve)."""

import numpy as np
import pytest

from daskgp import KernelOperator, PivotedCholesky, cg, make_kernel
from daskgp.compute.precision import FLOAT32_MAX_BOUND, float32_rounding_bound, rows_dtype_for

# one input dimension, a lengthscale long against the data (2.4 standardised units), the kernel variance
# e^0.9: the samplers' rank-300 preconditioner is then nearly exact, so CG's iterations measure the rows'
# rounding alone
_N, _LOG_S, _ELL = 2000, 0.9, 2.4


def _solve(log_noise: float, dtype: str):
    X = np.random.default_rng(0).uniform(0, 1, (_N, 1))
    X = (X - X.mean(0)) / X.std(0)
    y = np.random.default_rng(1).standard_normal(_N)
    op = KernelOperator(X, make_kernel("rbf", lengthscale=_ELL, variance=np.exp(_LOG_S)), np.exp(log_noise),
                        mode="local", cache=True, cache_dtype=dtype)
    pc = PivotedCholesky(op, rank=300, apply_dtype=dtype)
    return cg(op, y, tol=1e-6, max_iter=400, precond=pc)


def test_the_rule_takes_float32_on_the_real_data_sets_and_float64_for_a_small_noise(concrete):
    """The bound ε₃₂·n·s/σ² at the exact modes of benchmarks/results/fidelity.json's references (concrete
    0.006, house_8L's 8,192 rows 0.007, power_plant 0.005) keeps float32; a noise variance of e⁻⁸ on 2,000
    rows (0.88) takes float64."""
    assert rows_dtype_for(1030, 1.92, -2.70)[0] == "float32"
    assert rows_dtype_for(8192, 0.88, -1.79)[0] == "float32"
    assert rows_dtype_for(9568, -0.94, -3.06)[0] == "float32"
    dtype, bound = rows_dtype_for(_N, _LOG_S, -8.0)
    assert dtype == "float64" and bound == pytest.approx(float32_rounding_bound(_N, _LOG_S, -8.0))
    assert bound > 5 * FLOAT32_MAX_BOUND
    # all of house_8L from its 500-row subset MAP (log s 1.69, log σ² −1.86, 3 sd of its scaled covariance
    # above): 0.053, where the mode's is 0.022 — float32
    assert rows_dtype_for(22784, 1.69 + 0.1, -1.86)[0] == "float32"


def test_float32_rows_stall_cg_beyond_the_bound_and_cost_nothing_below_it():
    """With the preconditioner nearly exact, float64 takes 2 iterations at every noise here; float32 rows
    (measured: 4, 8, 38 iterations and a stall at bounds 0.016, 0.12, 0.87, 2.4) take at most 3 more within
    the bound (σ² = e⁻⁴), ten times as many at σ² = e⁻⁸ (bound 0.87), and at σ² = e⁻¹⁰ (bound 6.5) never
    reach 1e-6 in 400 iterations: the stall is the rows' rounding, not the system."""
    r64 = {ln: _solve(ln, "float64") for ln in (-4.0, -8.0, -10.0)}
    r32 = {ln: _solve(ln, "float32") for ln in (-4.0, -8.0, -10.0)}
    assert all(r.converged.all() and r.iterations.max() <= 10 for r in r64.values()), r64
    assert rows_dtype_for(_N, _LOG_S, -4.0)[0] == "float32"
    assert r32[-4.0].converged.all() and r32[-4.0].iterations.max() <= r64[-4.0].iterations.max() + 3
    assert rows_dtype_for(_N, _LOG_S, -8.0)[0] == "float64"
    assert r32[-8.0].iterations.max() >= 10 * r64[-8.0].iterations.max(), r32[-8.0].iterations
    assert not r32[-10.0].converged.all(), r32[-10.0].iterations


def test_a_run_resolves_the_rows_dtype_from_its_start_and_says_so(tmp_path, client):
    """``cache_dtype='auto'`` (the default) is resolved from the subset MAP before the warmup and stored
    resolved; float64 is said in one warmup line."""
    import daskgp as dg

    X = np.random.default_rng(0).uniform(0, 1, (_N, 1))
    f = np.sin(2 * X[:, 0]) + X[:, 0] ** 2
    y = f + 1e-3 * np.random.default_rng(1).standard_normal(_N)
    X, y = (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()
    seen = []
    dt = dg.sample(X, y, out=str(tmp_path / "low_noise.zarr"), client=client, method="sghmc", n_chains=2,
                   n_iter=2, warmup="subset", on_warmup=seen.append)
    assert dt.attrs["config"]["cache_dtype"] == "float64"
    notes = [e["note"] for e in seen if e.get("note")]
    assert len(notes) == 1 and "float64" in notes[0] and "stall CG" in notes[0], notes
    seen.clear()
    X2, y2 = X[:300], np.sin(3 * X[:300, 0]) + 0.3 * np.random.default_rng(2).standard_normal(300)
    dt = dg.sample(X2, (y2 - y2.mean()) / y2.std(), out=str(tmp_path / "noisy.zarr"), client=client,
                   method="sghmc", n_chains=2, n_iter=2, warmup="subset", on_warmup=seen.append)
    assert dt.attrs["config"]["cache_dtype"] == "float32"
    assert not [e for e in seen if e.get("note")]


def test_a_sampler_without_kernel_rows_takes_no_bound():
    """MH and HMC compute the exact posterior by Cholesky: no cached rows, so no float64 note whatever the
    noise; a gradient sampler at the same start takes float64."""
    from daskgp.mcmc.config import SamplerConfig

    phi, cov = np.array([_LOG_S, np.log(_ELL), -8.0]), 0.01 * np.eye(3)
    for method in ("mh", "hmc"):
        cfg, bound = SamplerConfig(method=method).for_start(_N, phi, cov)
        assert cfg.cache_dtype == "float32" and bound is None
    cfg, bound = SamplerConfig(method="sghmc").for_start(_N, phi, cov)
    assert cfg.cache_dtype == "float64" and bound > FLOAT32_MAX_BOUND
