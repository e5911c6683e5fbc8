"""The 'map' warmup of a gradient sampler's run, resumable: a state machine of plain data advanced by Dask
tasks of at most ``checkpoint_every`` gradients each, its state committed by the driver after every one
(:class:`WarmupStore`), so that an interruption — Ctrl-C, SIGKILL, a lost worker — costs at most one
segment, and a resumed warmup ends where an uninterrupted one does, bit for bit.

The stages (:data:`daskgp.mcmc.ticker.WARMUP_STAGES`; Filippone & Engler 2015, eq. 5 gradients, as in
:mod:`daskgp.exact.mode`): stochastic gradient ascent from the subset MAP in the subset's Laplace metric
(:class:`daskgp.exact.mode.StochasticAscent`); the Laplace covariance there from common-probe differences of
the gradient (:func:`daskgp.exact.mode.laplace_covariance`); a second ascent in that metric; the Laplace
covariance at its end with more probes (the chains' metric M). An ascent's state is cut between any two
gradients; a curvature stage (2p + 1 gradients with common probes and warm-started solves, whose n × k
warm starts are not worth a commit) runs whole in one segment, so an interruption inside it repeats it.

Every gradient's probes come from one generator, redrawn at every gradient: the state between gradients is
the generator's, the point where the preconditioner in use was built, and the stage's own numbers — a few
kilobytes, whatever n.
"""

from __future__ import annotations

import time

import numpy as np

from ..core.plaindata import expect_array, expect_int, expect_keys
from ..core.random import rng_from_state
from ..exact.mode import StochasticAscent, laplace_precision, saddle_free_covariance
from ..exact.posterior import ProbeState
from ..runs.fits import FitStore
from .config import SamplerConfig
from .segments import (
    chain_operator,
    chain_posterior,
    kept,
    products_on,
    release_operators,
)
from .ticker import WARMUP_STAGES, WarmupTicker

__all__ = ["warmup_start", "warmup_segment", "advance_warmup", "WarmupStore", "warmup_path", "DONE",
           "FULL_LAPLACE"]

DONE = len(WARMUP_STAGES)  # the stage index of a finished warmup
_ASCENTS = {0: "first", 2: "second"}  # stage index -> the key its result is kept under
_ASCENT_KEYS = ("phi", "iterations", "noise_eig", "converged", "grad_norm")
_SUBSET = "subset Laplace scaled by subset/n"
FULL_LAPLACE = "full-data stochastic Laplace"
_SADDLE_FREE = "saddle-free |H| of the full-data stochastic Laplace (the curvature was not negative definite)"


def warmup_path(out: str) -> str:
    """Where the warmup of the run at ``out`` keeps its checkpoint until the run's first block is
    committed (beside it, as a new run's staging folder is)."""
    return out.rstrip("/") + ".warmup"


class WarmupStore(FitStore):
    """The warmup's checkpoint folder (:mod:`daskgp.runs.fits`): one commit per warmup segment holding the
    run's start (configuration, data spec, subset MAP) and the warmup's state."""

    kind = "daskgp.warmup-checkpoint"
    what = "warmup"


def warmup_start(phi0, M0, seed: int) -> dict:
    """The state of a warmup before its first gradient: from φ₀ (p,) (the subset MAP) in the metric M0
    (p, p), every probe drawn from the generator seeded with ``seed``."""
    probes = ProbeState.initial(np.random.default_rng(seed)).to_dict()
    return {"stage": 0, "probe_state": probes, "ascent": None, "first": None, "second": None,
            "cov": None, "cov_from": None, "phi0": np.array(phi0, dtype=float),
            "M0": np.array(M0, dtype=float), "gradients": 0, "seconds": 0.0, "result": None}


def check_warmup_state(st, p: int) -> None:
    """ValueError naming the first malformed field of a warmup state read back from a checkpoint."""
    expect_keys(st, ("stage", "probe_state", "ascent", "first", "second", "cov", "cov_from", "phi0", "M0",
                     "gradients", "seconds", "result"), "warmup state")
    expect_int(st["stage"], "stage", 0, DONE)
    expect_int(st["gradients"], "gradients")
    for name, shape in (("phi0", (p,)), ("M0", (p, p))):
        v = st[name]
        if not (isinstance(v, np.ndarray) and v.shape == shape and np.all(np.isfinite(v))):
            raise ValueError(f"the warmup's {name} is malformed")
    ps = st["probe_state"]
    # a checkpoint written before the solve budget has no 'solves'
    budget = ("solves",) if isinstance(ps, dict) and "solves" in ps else ()
    # and one written before the staleness rule no 'precond_iters'
    budget += ("precond_iters",) if isinstance(ps, dict) and "precond_iters" in ps else ()
    keys = ("probes", "x0", "rng", "precond_at") + budget
    probes = expect_keys(ps, keys, "the warmup's probe state")
    if probes["probes"] is not None:
        raise ValueError("the warmup's probe state holds probes (a warmup redraws them at every gradient)")
    x0 = probes["x0"]
    if x0 is not None and not (isinstance(x0, np.ndarray) and x0.ndim == 2 and x0.shape[1] == 1
                               and np.all(np.isfinite(x0))):
        raise ValueError("the warmup's probe state's x0 must be K⁻¹y's warm start alone, (n, 1) and finite")
    rng_from_state(probes["rng"])
    expect_array(probes["precond_at"], (p,), "precond_at", optional=True)
    if probes.get("solves") is not None or probes.get("precond_iters") is not None:
        # checks 'solves' and 'precond_iters'
        ProbeState.from_dict({**probes, "probes": None, "x0": None}, 1, 1, p)

    if st["ascent"] is not None:
        StochasticAscent.from_dict(st["ascent"], p)
    for stage, key in _ASCENTS.items():  # a finished ascent's result, from the next stage on
        if st["stage"] > stage and st["result"] is None:
            done = st[key]
            # a checkpoint written before noise_median (or noise_cov) was kept still reads (its run keeps
            # its n_adapt)
            extra = tuple(k for k in ("noise_median", "noise_cov") if isinstance(done, dict) and k in done)
            expect_keys(done, _ASCENT_KEYS + extra, key)
            expect_array(done["phi"], (p,), f"{key} phi")
            if "noise_cov" in extra:
                expect_array(done["noise_cov"], (p, p), f"{key} noise_cov", optional=True)
    if st["stage"] > 1 and st["result"] is None:
        expect_array(st["cov"], (p, p), "cov")
    if st["stage"] == DONE and not isinstance(st["result"], dict):
        raise ValueError("a finished warmup without its result")


def warmup_segment(X, y, cfg_dict: dict, state: dict, run_key: str, workers: list[str] | None = None) -> dict:
    """One segment of the warmup, a Dask task: :func:`advance_warmup` by at most ``checkpoint_every``
    gradients on the run's kernel operator — in this process, or on ``workers`` (two or more) through this
    task's worker client, as a chain's segment. A pure function of its arguments; returns the new state."""
    cfg = SamplerConfig.from_dict(cfg_dict)
    with products_on(workers) as client:
        op = chain_operator(X, cfg, run_key, client, workers, "warmup")
        return advance_warmup(y, cfg, state, run_key, op, cfg.checkpoint_every)


def noise_in_metric(ascent: dict, cov) -> float | None:
    """The gradient noise per gradient near the mode as the chains meet it: the largest eigenvalue of the
    ascent's mean noise covariance V (p, p) whitened by the chains' metric ``cov`` (p, p), λ = max eig LᵀVL
    for cov = LLᵀ. Whitening by the ascent's own metric instead — the first Laplace covariance, from a
    quarter of the probes — made the value swing with that estimate: 1.0 to 5.8 over nine seeds on
    concrete (64 probes), and with it the adaptation's length. An ascent stored without V: its per-gradient
    eigenvalues' median, as before."""
    V = ascent.get("noise_cov")
    if V is None:
        return ascent.get("noise_median")
    try:
        L = np.linalg.cholesky(np.asarray(cov, dtype=float))
    except np.linalg.LinAlgError:  # not a metric the chains can use either: the ascent's own reading
        return ascent.get("noise_median")
    return float(np.linalg.eigvalsh(L.T @ np.asarray(V, dtype=float) @ L).max())


def advance_warmup(y, cfg: SamplerConfig, state: dict, run_key: str, op, budget: int) -> dict:
    """The warmup ``state`` advanced by at least one gradient and at most ``budget`` (a curvature stage,
    once begun, runs whole), on the kernel operator ``op`` — released, with the run's cached rows, when the
    warmup finishes. Returns a new state; the finished one's 'result' holds 'phi' (p,) the mode, 'cov'
    (p, p) the Laplace covariance (the saddle-free metric where its estimate was not positive definite, M0
    after a failed ascent: 'cov_from' says which), 'iterations' (ascent gradients), 'converged',
    'grad_norm', 'noise_eig' (the largest whitened gradient-noise eigenvalue seen, a window's mean),
    'noise_at_mode' (the noise per gradient near the mode, in the chains' metric: the largest eigenvalue of
    the second ascent's mean gradient-noise covariance near the mode whitened by the final covariance — by
    the first Laplace covariance, as the median of its per-gradient eigenvalues, for a warmup checkpointed
    before the covariances were kept) and 'seconds'. An ascent that leaves the allowed range, or fails,
    ends the warmup at the subset start with 'failed' saying why."""
    t0 = time.perf_counter()
    st = dict(state)
    p = len(st["phi0"])
    # the posterior of the last segment in this process keeps its preconditioner (rebuilt from the state's
    # precond_at otherwise, to the same values: rank 2,000 on house_8L is minutes of work)
    keep = kept(run_key, "warmup")
    post = keep.get("post")
    if post is None or post.op is not op:
        post = keep["post"] = chain_posterior(op, y, cfg, redraw_every=1)
    post.state = ProbeState.from_dict(st["probe_state"], op.n, post.n_probes, p)
    tick = WarmupTicker(run_key, float(st["seconds"]))
    post.on_solve = tick.beat  # a long solve reports its CG iterations as it goes
    spent = 0
    try:
        while st["stage"] < DONE and spent < budget:
            stage = st["stage"]
            if stage in _ASCENTS:
                if st["ascent"] is not None:
                    ascent = StochasticAscent.from_dict(st["ascent"], p)
                else:
                    start, metric = (st["phi0"], st["M0"]) if stage == 0 else (st["first"]["phi"], st["cov"])
                    cap = cfg.warmup_iter if stage == 0 else max(cfg.warmup_iter // 2, 20)
                    ascent = StochasticAscent(start, metric, max_iter=cap, max_abs_phi=cfg.max_abs_phi)
                tick.stage(WARMUP_STAGES[stage], ascent.settings["max_iter"], ascent.k)
                while not ascent.done and spent < budget:
                    told = len(ascent.retreats)
                    ascent.step(post)
                    spent += 1
                    if len(ascent.retreats) > told:
                        tick.note(f"the {WARMUP_STAGES[stage]} stepped back: {ascent.retreats[-1]}")
                    tick(ascent.k - 1)
                if ascent.done:
                    r = ascent.result()
                    # the gradient noise near the mode, for the second one: what the chains' adaptation
                    # must average out (SamplerConfig.adapt_from_noise), whitened at the end by their metric
                    st[_ASCENTS[stage]] = {"phi": r.phi, "iterations": r.iterations, "noise_eig": r.noise_eig,
                                           "converged": bool(r.converged), "grad_norm": r.grad_norm,
                                           "noise_median": float(np.median(ascent.lams)) if ascent.lams
                                           else 0.0, "noise_cov": ascent.noise_cov()}
                    st["ascent"], st["stage"] = None, stage + 1
                else:
                    st["ascent"] = ascent.to_dict()
            else:  # a curvature: the chains' own metric at the end, so with more probes
                at = st["first" if stage == 1 else "second"]["phi"]
                n_probes = max(8, cfg.laplace_probes // 4) if stage == 1 else cfg.laplace_probes
                tick.stage(WARMUP_STAGES[stage], 2 * p + 1)
                H = laplace_precision(post, at, n_probes=n_probes, rng=post.state.rng, callback=tick)
                if np.linalg.eigvalsh(H).min() > 0:
                    st["cov"], st["cov_from"] = np.linalg.inv(H), FULL_LAPLACE
                else:  # a plateau or saddle (or noise), not a mode: a metric wide along the flat direction,
                    # in which the next ascent climbs on (or the chains' adaptation corrects it)
                    st["cov"], st["cov_from"] = saddle_free_covariance(H), _SADDLE_FREE
                spent += 2 * p + 1
                st["stage"] = stage + 1
    except (FloatingPointError, ValueError, np.linalg.LinAlgError) as e:  # start the chains at the subset
        failed_in = WARMUP_STAGES[st["stage"]]
        done = int(st["gradients"]) + spent
        st["stage"], st["ascent"] = DONE, None
        st["result"] = {"phi": st["phi0"], "cov": st["M0"], "cov_from": _SUBSET, "iterations": 0,
                        "converged": False,
                        "failed": f"the {failed_in} failed after {done} gradients: {type(e).__name__}: {e}"}
    # the next gradient redraws its probes and starts its solves afresh, from K⁻¹y's last iterate where the
    # posterior keeps it: that column, the generator and the preconditioner's point carry over (n numbers,
    # not n × k)
    ps = post.state.to_dict()
    keep = ps["x0"] is not None and post.keeps_mean_start
    st["probe_state"] = {**ps, "probes": None, "x0": ps["x0"][:, :1] if keep else None}
    st["gradients"] = int(st["gradients"]) + spent
    st["seconds"] = float(st["seconds"]) + time.perf_counter() - t0
    if st["stage"] == DONE:
        if st["result"] is None:
            first, second = st["first"], st["second"]
            st["result"] = {"phi": second["phi"], "cov": st["cov"], "cov_from": st["cov_from"],
                            "iterations": first["iterations"] + second["iterations"],
                            "converged": second["converged"], "grad_norm": second["grad_norm"],
                            "noise_eig": max(first["noise_eig"], second["noise_eig"]),
                            "noise_at_mode": noise_in_metric(second, st["cov"])}
        st["result"] = {**st["result"], "seconds": st["seconds"], "gradients": st["gradients"]}
        release_operators(run_key, here_only=False)  # the warmup's cached kernel rows leave with it
    return st
