import numpy as np
import pytest

from daskgp import KernelOperator, make_kernel
from daskgp.exact.posterior import GPPosterior, subset_map
from daskgp.mcmc.samplers import StepSchedule, sgld


def test_subset_map_is_a_maximum_with_spd_preconditioner(concrete):
    k = make_kernel("rbf", lengthscale=2.0)
    phi, M = subset_map(concrete.X_std, concrete.y_std, k, 0.3, size=300, rng=0)
    assert np.all(np.linalg.eigvalsh(M) > 0) and np.allclose(M, M.T)
    # the gradient of the subset posterior vanishes at the MAP
    rng = np.random.default_rng(0)
    idx = rng.choice(concrete.X_std.shape[0], size=300, replace=False)
    op = KernelOperator(concrete.X_std[idx], k, 0.3)
    post = GPPosterior(op, concrete.y_std[idx])
    _, g = post.exact(phi)
    assert np.abs(g).max() < 1e-2 * np.abs(post.exact(phi + 0.1)[1]).max()


def test_stochastic_posterior_gradient_unbiased_and_probes_fixed_for_R(concrete):
    """20 gradients with fresh probes (R = 1): mean within 4.5 standard errors of the exact posterior
    gradient per component. With R = 20 the probes stay the same between redraws."""
    X, y = concrete.X_std[:400], concrete.y_std[:400]
    op = KernelOperator(X, make_kernel("rbf", lengthscale=2.0), 0.3)
    post = GPPosterior(op, y, redraw_every=1, rng=1)
    phi = op.log_params
    _, exact = post.exact(phi)
    G = np.array([post.stochastic_grad(phi, t)[0] for t in range(40)])
    se = G.std(axis=0, ddof=1) / np.sqrt(len(G))
    assert np.all(np.abs(G.mean(axis=0) - exact) < 4.5 * se + 1e-9)
    post = GPPosterior(op, y, redraw_every=20, rng=2)
    post.stochastic_grad(phi, 0)
    first = post.state.probes.copy()
    post.stochastic_grad(phi, 5)
    np.testing.assert_array_equal(post.state.probes, first)
    post.stochastic_grad(phi, 20)
    assert not np.array_equal(post.state.probes, first)


def test_short_sgld_run_on_concrete_is_finite_and_moves(concrete):
    X, y = concrete.X_std[:300], concrete.y_std[:300]
    k = make_kernel("rbf", lengthscale=2.0)
    phi0, M = subset_map(X, y, k, 0.3, size=300, rng=0)
    op = KernelOperator(X, k, 0.3)
    post = GPPosterior(op, y, rng=3)
    res = sgld(post.stochastic_grad, phi0, 80, M=M, schedule=StepSchedule(0.5, 0.05, 80), rng=4)
    assert res.stopped is None and np.all(np.isfinite(res.draws))
    assert res.draws.std(axis=0).min() > 0
    # draws stay in the region the posterior supports (within 6 Laplace sd of the MAP)
    z = (res.draws - phi0) / np.sqrt(np.diag(M))
    assert np.abs(z).max() < 6
    assert len(res.info["cg_iterations"]) == 80


def test_posterior_rejects_bad_y(concrete):
    op = KernelOperator(concrete.X_std, make_kernel("rbf"), 0.3)
    with pytest.raises(ValueError, match="rows"):
        GPPosterior(op, concrete.y_std[:10])


def test_kept_preconditioner_and_state_resume_bit_identically(concrete):
    """With precond='pivchol' the preconditioner is built at each probe redraw and kept until the next: a
    posterior whose state goes through strict JSON mid-window (iteration 13 of a redraw window of 10)
    gives the same gradients, bit for bit, as one that never stopped; and the kept preconditioner leaves
    the gradient unbiased (cg to 1e-8: equal to the per-iteration preconditioner's to 1e-6 relative)."""
    import json

    from daskgp.core.plaindata import decode, encode
    from daskgp.exact.posterior import ProbeState

    X, y = concrete.X_std[:400], concrete.y_std[:400]

    def posterior(**kw):
        op = KernelOperator(X, make_kernel("rbf", lengthscale=2.0), 0.3)
        return GPPosterior(op, y, redraw_every=10, rng=4, precond="pivchol", precond_rank=40, **kw)

    phis = [np.array([0.1, 0.7, -1.2]) + 0.01 * t for t in range(25)]
    whole = posterior()
    ref = [whole.stochastic_grad(phi, t)[0] for t, phi in enumerate(phis)]
    first = posterior()
    got = [first.stochastic_grad(phi, t)[0] for t, phi in enumerate(phis[:13])]
    stored = decode(json.loads(json.dumps(encode(first.state.to_dict()), allow_nan=False)))
    assert stored["precond_at"] is not None
    second = posterior()
    second.state = ProbeState.from_dict(stored, n=400, n_probes=4, p=3)
    got += [second.stochastic_grad(phi, t)[0] for t, phi in enumerate(phis[13:], start=13)]
    np.testing.assert_array_equal(np.array(got), np.array(ref))
    kept, fresh = posterior(solver="cg", tol=1e-8), posterior(solver="cg", tol=1e-8, control_variate=False)
    fresh._reuse_precond = False  # the preconditioner rebuilt at every φ, as before
    for t, phi in enumerate(phis[:12]):
        np.testing.assert_allclose(kept.stochastic_grad(phi, t)[0], fresh.stochastic_grad(phi, t)[0],
                                   rtol=1e-6)
