"""Sampling to a target ESS on a real two-worker LocalCluster: the stopping rule, extending a finished run
(to a larger target or a longer length, bit for bit), and the refusals."""

import arviz as az
import numpy as np
import pytest

from daskgp.mcmc.chains import check_resumable, resume, sample
from daskgp.mcmc.diagnostics import RunStatus, post_warmup

pytestmark = pytest.mark.cluster


def _ess_rhat(dt):
    """(min bulk/tail ESS, max R-hat) of a run's post-warmup draws, by ArviZ directly."""
    ds = dt["posterior"].to_dataset()  # ArviZ's layout: the kept draws only
    assert post_warmup(dt)[0]["posterior"].sizes == ds.sizes
    ess = min(float(az.ess(ds, method=m).to_array().min()) for m in ("bulk", "tail"))
    return ess, float(az.rhat(ds).to_array().max())


def test_target_ess_stops_at_the_first_block_that_meets_it_and_extends(concrete, client, tmp_path):
    """The run stops at the first committed block where every bulk and tail ESS reaches the target and every
    R-hat is below 1.01 (checked again with ArviZ on the stored draws), far below its cap; resuming it
    returns it unchanged; resuming with a larger target continues the same chains (the committed draws are
    kept bit for bit) until the new target holds."""
    X, y = concrete.X_std[:200], concrete.y_std[:200]
    out = str(tmp_path / "r.zarr")
    seen: list[RunStatus] = []
    dt = sample(X, y, out=out, client=client, method="sghmc", n_chains=2, checkpoint_every=50, batch=25,
                subset_size=150, n_probes=8, seed=5, target_ess=60, progress=seen.append)
    n = dt.attrs["n_draws"]
    assert seen[-1].converged and not any(s.converged for s in seen[:-1])
    assert seen[-1].done == n < dt.attrs["config"]["n_iter"] == 50_000
    assert seen[-1].sec_per_ess == pytest.approx(seen[-1].elapsed / seen[-1].ess)
    ess, rhat = _ess_rhat(dt)
    assert ess >= 60 and rhat < 1.01
    assert all(s.eta is not None and s.eta >= 0 for s in seen if s.ess)
    # a run that meets its target is finished: resume returns it as it is
    assert check_resumable(out)[2]
    assert resume(out, X=X, y=y, client=client).attrs["n_draws"] == n
    # a larger target (beyond the ESS reached: R-hat may have been the last to hold) continues the chains
    target = int(1.5 * ess) + 1
    more: list[RunStatus] = []
    ext = resume(out, X=X, y=y, client=client, target_ess=target, progress=more.append)
    assert ext.attrs["n_draws"] > n and more[-1].converged and more[-1].target_ess == target
    assert ext.attrs["config"]["target_ess"] == target and ext.attrs["config"]["n_adapt"] == 4 * 25
    k = dt["posterior"].sizes["draw"]  # the kept draws (the warmup's 4 batches of 25 are apart)
    assert k == n - 4 * 25
    for name in dt.attrs["param_names"]:
        np.testing.assert_array_equal(ext["posterior"][name].values[:, :k], dt["posterior"][name].values)
        np.testing.assert_array_equal(ext["warmup_posterior"][name].values,
                                      dt["warmup_posterior"][name].values)
    ess, rhat = _ess_rhat(ext)
    assert ess >= target and rhat < 1.01
    with pytest.raises(ValueError, match="would not extend"):
        resume(out, X=X, y=y, client=client, n_iter=10)
    # --iterations alone on a run that meets its target runs it to that length (issue 29: it did nothing)
    m = ext.attrs["n_draws"]
    assert not check_resumable(out, n_iter=m + 50)[2]
    longer = resume(out, X=X, y=y, client=client, n_iter=m + 50)
    assert longer.attrs["n_draws"] == m + 50 and longer.attrs["config"]["target_ess"] is None
    for name in dt.attrs["param_names"]:
        np.testing.assert_array_equal(longer["posterior"][name].values[:, :m - 100],
                                      ext["posterior"][name].values)


def test_extending_a_finished_run_equals_the_longer_run(concrete, client, tmp_path):
    """A finished 100-iteration SGHMC run extended to 140 gives, bit for bit, the 140-iteration run with the
    same adaptation (the extension pins the run's adaptation length, n_iter // 5 = 20, so it does not
    change with the new length; blocks of 40 restart at it: 20, 60, 100, 140); a run ending with a short
    block is extended from it."""
    X, y = concrete.X_std[:150], concrete.y_std[:150]
    kw = dict(method="sghmc", n_chains=2, checkpoint_every=40, batch=10, subset_size=100, n_probes=4, seed=6)
    short = str(tmp_path / "short.zarr")
    sample(X, y, out=short, client=client, n_iter=100, **kw)
    ext = resume(short, X=X, y=y, client=client, n_iter=140)
    full = sample(X, y, out=str(tmp_path / "full.zarr"), client=client, n_iter=140, n_adapt=20, **kw)
    assert ext.attrs["n_draws"] == 140 and ext["posterior"].sizes["draw"] == 120
    for g in ("posterior", "warmup_posterior"):
        for name in full.attrs["param_names"]:
            np.testing.assert_array_equal(ext[g][name].values, full[g][name].values)
    # a run whose length is off its block grid (70: blocks end at 14, 54, 70) extends from its short last
    # block as from any other (issue 56, item 5: it was refused): the same draws as one uninterrupted run
    # of 100 whose blocks end at 14, 54, 94, 100 — the chains do not depend on where blocks end
    odd = str(tmp_path / "odd.zarr")
    sample(X, y, out=odd, client=client, n_iter=70, **{**kw, "method": "mh"})
    before = _chunk_files(odd)
    ext = resume(odd, X=X, y=y, client=client, n_iter=100)
    after = _chunk_files(odd)
    rewritten = [f for f in before if after[f][1] != before[f][1]]
    # the partial last chunk of each array was rewritten, and only through a new file (a rename: readers
    # never see it half written), never in place
    assert rewritten and all(after[f][0] != before[f][0] for f in rewritten), rewritten
    full = sample(X, y, out=str(tmp_path / "full_mh.zarr"), client=client, n_iter=100, n_adapt=14,
                  **{**kw, "method": "mh"})
    assert ext.attrs["n_draws"] == 100
    for g in ("posterior", "warmup_posterior"):
        for name in full.attrs["param_names"]:
            np.testing.assert_array_equal(ext[g][name].values, full[g][name].values)


def _chunk_files(run: str) -> dict:
    """{chunk file: (inode, bytes)} of a run's kept draws."""
    import os

    out = {}
    for root, _, files in os.walk(os.path.join(run, "posterior")):
        for f in files:
            if f != "zarr.json":
                full = os.path.join(root, f)
                with open(full, "rb") as fh:
                    out[full] = (os.stat(full).st_ino, fh.read())
    return out


def test_run_status_rules():
    """converged needs the sampling phase, R-hat below the target and both ESS at the target (default 400
    without one); the ETA scales the sampled draws by target/ESS − 1."""
    st = RunStatus(done=300, n_iter=1000, elapsed=30.0, phase="sampling", rhat=1.005, ess_bulk=450.0,
                   ess_tail=420.0)
    assert st.converged and st.ess == 420.0 and st.sec_per_ess == pytest.approx(30 / 420)
    assert not RunStatus(**{**st.__dict__, "ess_tail": 399.0}).converged
    assert not RunStatus(**{**st.__dict__, "rhat": 1.02}).converged
    assert not RunStatus(**{**st.__dict__, "phase": "warmup"}).converged
    assert RunStatus(**{**st.__dict__, "target_ess": 100, "ess_tail": 120.0}).converged
