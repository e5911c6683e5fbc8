"""The Bayesian GPLVM's rounds (Gal, van der Wilk & Rasmussen 2014, section 3): each a global step —
L-BFGS-B over (Z, σ², l, β) with every q(x_i) fixed (:func:`daskgp.sparse.fit.fit_global`) — then a local
step in which every chunk optimises its own q(x_i) on its worker, undone when the parallel block step lowers
the joint bound; and the loop over rounds that commits each one and redoes a round whose worker was lost
from the copies kept before it (:class:`daskgp.sparse.gplvm_latent.RestartCopies`)."""

from __future__ import annotations

import logging
import time

from ..compute.rows import MAX_REPLACEMENTS, WorkerLostError
from .bound import GlobalParams, bound_and_grads
from .fit import fit_global

__all__ = ["run_rounds", "one_round"]

log = logging.getLogger(__name__)


def run_rounds(rows: list, theta, settings: tuple[int, int, int], info, record, trace, start, commit,
               restart):
    """Rounds ``start``..``n_outer`` on ``rows[0]`` (ChunkedRows or LocalRows holding q(x_i)), each
    committed (``commit(round, θ, rows)``); ``settings`` = (n_outer, global_iter, local_iter). A round that
    loses a worker is redone from the copies kept after the last one (``restart``:
    :class:`daskgp.sparse.gplvm_latent.RestartCopies`; None: nothing can be lost), ``rows[0]`` becoming the
    chunks placed again. Returns (θ, summed statistics)."""
    n_outer, global_iter, local_iter = settings
    r, lost, again = int(start), 0, False
    kept = restart.keep(rows[0], r) if restart is not None and r < n_outer else None
    while True:
        at = (theta, len(trace), dict(info))
        try:
            if again:  # the round's chunks placed again, and fresh copies (the lost worker held some)
                rows[0].release()
                rows[0] = restart.place(kept)
                kept = restart.keep(rows[0], r)
                again = False
            if r == n_outer:
                stats = rows[0].stats(theta)
                break
            theta = one_round(rows[0], theta, global_iter, local_iter, info, record)
        except WorkerLostError:
            if restart is None or lost >= MAX_REPLACEMENTS:
                raise
            lost += 1
            log.warning("daskgp: a worker was lost with GPLVM row chunks; placing their q(x_i) again "
                        "from the last round's copies and repeating round %d", r + 1)
            theta, n_trace, saved = at
            del trace[n_trace:]
            info.clear()
            info.update(saved, workers_lost=saved["workers_lost"] + 1)
            again = True
            continue
        r += 1
        commit(r, theta, rows[0])
        if restart is not None and r < n_outer:
            kept = restart.keep(rows[0], r)
    return theta, stats


def one_round(rows, theta, global_iter: int, local_iter: int, info, record) -> GlobalParams:
    """One global L-BFGS-B step of ``global_iter`` iterations and one local step of ``local_iter`` (undone
    when it lowers the bound); ``record(F)`` after each; returns θ."""
    theta, _, ginfo = fit_global(rows, theta, global_iter, callback=lambda it, F: record(F))
    info["n_evaluations"] += ginfo["n_evaluations"]
    info["seconds_evaluating"] += ginfo["seconds_evaluating"]
    if local_iter == 0:
        return theta
    t0 = time.perf_counter()
    total = rows.stats(theta)
    F_before = bound_and_grads(total, theta, grads=False)
    old = rows.futures
    rows.local_step(theta, total, local_iter)
    F_after = bound_and_grads(rows.stats(theta), theta, grads=False)
    if not F_after >= F_before:
        rows.futures = old  # the parallel block step went downhill: undo it
        info["local_steps_undone"] += 1
        F_after = F_before
    info["seconds_local"] += time.perf_counter() - t0
    record(F_after)
    return theta
