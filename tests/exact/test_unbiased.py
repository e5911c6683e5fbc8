"""Is the stochastic gradient unbiased at the settings the samplers use? A test with shown power.

Filippone & Engler's central claim is that ULISSE's randomised early stop leaves the gradient of
log p(y|θ) unbiased. A comparison with the exact gradient over independent probes cannot test that: the
Hutchinson noise (sd ≈ 1 in these units) swamps a solver bias, and plain CG stopped at 1e-2 passes such a
test.
Here every draw is compared with the exact gradient *on the same probes* (dense Cholesky: the exact
(K⁻¹r)ᵀ∂K r per probe and the exact quadratic term), so the difference D holds only the solver's error: its
roulette noise for ULISSE, a systematic error with almost no spread for CG stopped early.

The statistic per parameter j is z_j = mean(D_j) / sqrt(se_j² + floor_j²) over M draws, se_j the standard
error of the mean from the draws. ``floor_j`` = 1e-7 · (1 + |½ yᵀK⁻¹∂_jK K⁻¹y|) is the numerical accuracy
the comparison can ask for: ULISSE's expectation is the CG solution to its tol 1e-6, not the exact one, and
here that CG solution differs from the dense one by at most 2e-8 of that scale (measured: 6e-6, 1e-5, 7e-6
against scales 114, 503, 404). The verdict "unbiased" is max_j |z_j| < 3.59, the two-sided
normal quantile for a family-wise false alarm of 1e-3 over the 3 parameters (Bonferroni). The draws of D are
skewed (most draws stop early, a few carry large weights); with the default roulette every kept, reweighted
step is bounded, so the tail is light enough for the normal approximation of a mean over M = 300.

Power, shown on negative controls on the same system, probes and preconditioner: CG stopped at 1e-2 and at
1e-3 (the bias ULISSE exists to remove) must be called biased; CG to 1e-10 (an exact solve) must not.
"""

import numpy as np
import pytest
import scipy.linalg

from daskgp import KernelOperator, PivotedCholesky, log_marginal_gradient, make_kernel
from daskgp.core.random import rademacher
from daskgp.mcmc.config import SGHMC_PRECOND_RANK, SamplerConfig

Z_CRIT = 3.59  # two-sided, family-wise 1e-3 over 3 parameters
M = 300  # ULISSE draws (each with fresh probes and a fresh roulette)
M_CONTROL = 20  # CG draws: their error is systematic, with almost no spread
N_PROBES = 8  # the probe count does not enter a solver bias; 8 keeps the test short
# concrete's exact posterior mode (benchmarks/results/fidelity.json, reference 'concrete'): noise 0.068
# makes K ill-conditioned (CG needs ~10 preconditioned steps to 1e-6), where an early stop matters
PHI_MODE = np.array([1.9204763474906288, 0.9383890235135699, -2.6957638348412445])


@pytest.fixture(scope="module")
def system(concrete):
    X, y = concrete.X_std, concrete.y_std
    kernel = make_kernel("rbf").with_log_params(PHI_MODE[:-1])
    noise = float(np.exp(PHI_MODE[-1]))
    op = KernelOperator(X, kernel, noise, mode="local")
    n = len(y)
    cho = scipy.linalg.cho_factor(kernel(X) + noise * np.eye(n), lower=True)
    dK = np.concatenate([np.asarray(kernel.gradients(X, X)), noise * np.eye(n)[None]])  # (3, n, n)
    alpha = scipy.linalg.cho_solve(cho, y)
    quad = np.einsum("i,pij,j->p", alpha, dK, alpha)
    precond = PivotedCholesky(op, rank=min(SGHMC_PRECOND_RANK, n // 2))  # the sampler's, built at θ
    return op, y, cho, dK, quad, precond


def _differences(system, draws: int, seed: int, **solver) -> np.ndarray:
    """(draws, 3): each draw's gradient minus the exact gradient on the same probes."""
    op, y, cho, dK, quad, precond = system
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        r = rademacher(op.n, N_PROBES, rng)
        trace = np.sum(scipy.linalg.cho_solve(cho, r)[None] * (dK @ r), axis=(1, 2)) / N_PROBES
        est = log_marginal_gradient(op, y, probes=r, rng=rng, precond=precond, **solver)
        out.append(est.grad - (-0.5 * trace + 0.5 * quad))
    return np.array(out)


def _z(D: np.ndarray, exact_grad_scale: np.ndarray) -> np.ndarray:
    se = D.std(axis=0, ddof=1) / np.sqrt(len(D))
    floor = 1e-7 * (1 + exact_grad_scale)
    return D.mean(axis=0) / np.sqrt(se**2 + floor**2)


@pytest.fixture(scope="module")
def grad_scale(system):
    _, _, _, _, quad, _ = system
    return np.abs(0.5 * quad)  # the size of the terms whose difference is the gradient


def test_ulisse_at_the_samplers_defaults_is_unbiased(system, grad_scale):
    cfg = SamplerConfig(method="sghmc")  # SGHMC and its solver settings for n <= LARGE_N rows
    assert cfg.solver_for(len(system[1])) == "ulisse"
    D = _differences(system, M, seed=1, solver="ulisse", es_tol=cfg.es_tol, tol=cfg.tol, beta=cfg.beta)
    z = _z(D, grad_scale)
    print("ULISSE z", z.round(2), "mean", D.mean(axis=0), "sd", D.std(axis=0))
    assert np.abs(z).max() < Z_CRIT, (z, D.mean(axis=0), D.std(axis=0))
    assert np.all(D.std(axis=0) > 0)  # the roulette did randomise


@pytest.mark.parametrize("tol,biased", [(1e-2, True), (1e-3, True), (1e-10, False)])
def test_the_check_tells_early_stopped_cg_from_an_exact_solve(system, grad_scale, tol, biased):
    """The same statistic on plain CG: stopped at 1e-2 or 1e-3 it is biased and must be found so (the
    power); run to 1e-10 it is exact and must pass."""
    D = _differences(system, M_CONTROL, seed=2, solver="cg", tol=tol)
    z = _z(D, grad_scale)
    print("CG", tol, "z", z.round(2), "mean", D.mean(axis=0), "sd", D.std(axis=0))
    assert (np.abs(z).max() >= Z_CRIT) == biased, (tol, z, D.mean(axis=0))


def test_cg_for_the_mean_and_ulisse_for_the_probes_is_unbiased(system, grad_scale):
    """'cg-ulisse', SGHMC's solver beyond LARGE_N rows: K⁻¹y by CG to tol, the probes' solves stopped early
    by ULISSE. Power: the same split with the roulette switched off (β = 50: every probe estimate is the
    iterate at the threshold, the plain truncation) must be called biased on the same probes."""
    cfg = SamplerConfig(method="sghmc")
    assert cfg.solver_for(cfg_large_n := 22_784) == "cg-ulisse", cfg_large_n
    D = _differences(system, M, seed=3, solver="cg-ulisse", es_tol=cfg.es_tol, tol=cfg.tol, beta=cfg.beta)
    z = _z(D, grad_scale)
    print("CG + ULISSE z", z.round(2), "mean", D.mean(axis=0), "sd", D.std(axis=0))
    assert np.abs(z).max() < Z_CRIT, (z, D.mean(axis=0), D.std(axis=0))
    assert np.all(D.std(axis=0) > 0)  # the roulette did randomise
    D = _differences(system, M_CONTROL, seed=4, solver="cg-ulisse", es_tol=cfg.es_tol, tol=cfg.tol, beta=50.0)
    z = _z(D, grad_scale)
    print("truncated probes z", z.round(2), "mean", D.mean(axis=0))
    assert np.abs(z).max() >= Z_CRIT, (z, D.mean(axis=0))
