"""A minibatch fit of a tied factor (SEP) that ends on batch iterations over every row (issue 58, item 2).

SEP on minibatches (Hernández-Lobato et al. 2015, section 3: the global factor moved towards n/|B| times a
minibatch's sites) carries a factor estimated from the last few minibatches, and takes the evidence gradient
(their eq. for ∂ log Z, at per-point cavities) at that noisy q on |B| rows scaled by n/|B|. Once the steps
have decayed, that noise, not the distance to the optimum, sets where the hyperparameters stop: on every
flights row (arrival delay > 15 min, 222,000 training rows, m = 100) SEP trailed natural-gradient SVGP by
0.005–0.011 nats of test NLL, while the batch fit on 10,000 of those rows is level with it
(``benchmarks/sep_model_gap.py``). So the last :data:`FINISH_SHARE` of such a fit is batch iterations, the
batch fit's own (:func:`daskgp.gpc.fit.run_ep` with every row): the method's batch step (SEP: δ = 1),
site-only passes until the factor settles (:data:`daskgp.gpc.fit.SITE_TOL`), Adam's step undecayed.

The share is of the fit's time when it has a time budget (the minibatch phase ends at (1 − share) of the
budget, or at ``max_iter``; the finish then takes at most share / (1 − share) of the minibatch phase's
seconds, and stops at the budget's end). Without one it is of the fit's work, counted in row passes (rows ×
passes, the site-only ones included, from the records): the finish may spend share / (1 − share) times the
minibatch phase's row passes and stops at the first iteration that reaches it — so a fit without a time
budget, and its resumption from a checkpoint, has the same iterations on any machine. With fewer minibatch
row passes than one batch iteration needs (2 n), or fewer than :data:`FINISH_AFTER` minibatch iterations
(under a time budget: by its switch, the rest of the budget then goes on minibatches), there is no finish,
and the log says so.

The finish is not judged by the batch fits' collapse rule (:func:`daskgp.gpc.fit.collapsed`): the fit keeps
its last iterate, as a minibatch fit does. On all 222,000 flights rows SEP's evidence, with the factor at
its fixed point to :data:`~daskgp.gpc.fit.SITE_TOL`, moved by tens of thousands of nats within a dozen
batch iterations (seed 1: from about −113,000 to −52,000 and back to −66,000) while the test NLL moved by
0.002; judged by the rule, three of six fits "collapsed" and kept such a spike's iterate.

Measured (``benchmarks/sep_schedule.py``, ``batch_finish``: the switch at 1,300 of ~2,000 minibatches, ~95 s
of a 150-s fit; flights, m = 100, 2 workers, seeds 0–2): against the same fit without the finish, −0.0020 ±
0.0017 nats of test NLL on arrival delay and −0.0021 ± 0.0009 on departure delay, better in all six (label,
seed) pairs, with 5–11 batch iterations. :data:`FINISH_SHARE` is that switch point (55 s of 150, 0.37).
"""

from __future__ import annotations

import logging
import time
from itertools import pairwise

from .fit import run_ep
from .methods import GPCMethod
from .state import EPState

__all__ = ["FINISH_AFTER", "FINISH_SHARE", "finish_allowance", "finishes", "in_finish", "row_passes",
           "run_fit"]

FINISH_SHARE = 0.35
# Minibatch iterations before a finish pays. Early on, minibatch steps gain far more per row pass than batch
# iterations; the finish pays once the decayed steps leave the minibatch noise in charge. Measured on 24,000
# flights rows (m = 10, |B| = 2,000, seed 0): the exact evidence after the finish against as many row passes
# of further minibatches, −128 / −125 nats after 60 / 100 minibatches, +414 / +147 / +128 after 300 / 600 /
# 1,300; on all 222,000 rows (m = 100) the finish after 1,300 gave the test NLL above.
FINISH_AFTER = 300

log = logging.getLogger(__name__)


def finishes(method: GPCMethod, batch_size: int | None, learn: bool, share: float) -> bool:
    """Whether a fit of ``method`` on minibatches of ``batch_size`` rows (None: every row) ends on batch
    iterations: a tied factor that learns on minibatches (SEP), learning, a share above 0."""
    return (batch_size is not None and learn and share > 0 and not method.keeps_sites
            and method.learns_on_minibatches)


def row_passes(records) -> int:
    """Rows × passes of ``records`` (:class:`~daskgp.gpc.state.IterationRecord`): each iteration's site-only
    passes and its gradient pass over its rows."""
    return sum((r.site_passes + 1) * r.rows for r in records)


def in_finish(records, n: int) -> list:
    """The records of the finish: the iterations over all ``n`` rows after the minibatch phase."""
    first = next((i for i, r in enumerate(records) if r.rows == n), len(records))
    return records[first:]


def finish_allowance(records, n: int, share: float) -> float:
    """Row passes the finish may spend after ``records``' minibatch phase (module docstring)."""
    start = len(records) - len(in_finish(records, n))
    return share / (1.0 - share) * row_passes(records[:start])


def run_fit(chunks, state: EPState, method: GPCMethod, max_iter: int, *, share: float = FINISH_SHARE,
            damping: float, learn: bool, learn_inducing: bool, batch_size: int | None, seed: int,
            callback=None, time_budget: float | None = None) -> int:
    """A classifier's fit of ``method`` on ``chunks`` (:func:`~daskgp.gpc.fit.run_ep`'s arguments), from
    ``state`` to ``max_iter`` iterations in all; when it :func:`finishes`, ``max_iter`` minibatch iterations
    of ``batch_size`` rows, then batch iterations over every row (module docstring), and with
    ``time_budget`` seconds the minibatch phase ends at (1 − ``share``) of it and the finish at its end (or
    earlier: at ``share`` of the time the fit took, when ``max_iter`` ended the minibatch phase first).
    Resumes a state whose records end in either phase. ``state`` is updated in place (FloatingPointError as
    :func:`~daskgp.gpc.fit.run_ep`); returns the finish's iterations (0: none)."""
    if not finishes(method, batch_size, learn, share):
        run_ep(chunks, state, method, max(0, int(max_iter) - len(state.records)), damping=damping,
               learn=learn, learn_inducing=learn_inducing, batch_size=batch_size, seed=seed,
               callback=callback, time_budget=time_budget)
        return 0
    t0, n = time.perf_counter(), chunks.n
    name, before = method.name.upper(), len(state.records)
    minibatches = dict(damping=damping, learn=True, learn_inducing=learn_inducing, batch_size=batch_size,
                       seed=seed, callback=callback)
    if not in_finish(state.records, n):
        run_ep(chunks, state, method, max(0, int(max_iter) - len(state.records)), **minibatches,
               time_budget=None if time_budget is None else (1.0 - share) * time_budget)
        made = len(state.records)
        if made < FINISH_AFTER:
            timed = time_budget is not None and made < max_iter
            log.info("daskgp: %s made %d minibatch iterations%s, fewer than the %d after which batch "
                     "iterations gain more than further minibatches: no batch iterations at the end%s", name,
                     made, f" in {1 - share:.0%} of its time budget" if timed else "", FINISH_AFTER,
                     " (the rest of the budget on minibatches too)" if timed else "")
            if timed:
                run_ep(chunks, state, method, int(max_iter) - made, **minibatches,
                       time_budget=time_budget - (time.perf_counter() - t0))
            return 0
    done = len(in_finish(state.records, n))
    allowance = finish_allowance(state.records, n, share)

    def spent(st) -> bool:
        return row_passes(in_finish(st.records, n)) >= allowance

    # timed: the finish's share of this call's time (the budget's end, or share / (1 − share) of the seconds
    # the minibatch phase took when it stopped at max_iter first); a timed call that made no minibatch
    # iteration (resumed at or after the switch) spends the row-pass allowance instead
    timed = time_budget is not None and len(state.records) - done > before
    mb_seconds = time.perf_counter() - t0
    remaining = (min(time_budget - mb_seconds, share / (1.0 - share) * mb_seconds) if timed
                 else None if time_budget is None else time_budget - mb_seconds)
    if not timed and done == 0 and allowance < 2 * n:
        log.info("daskgp: %s made %s row passes on minibatches, fewer than a batch iteration's %s: no batch "
                 "iterations at the end (a larger max_iter, or a time budget, gives them)", name,
                 f"{row_passes(state.records):,.0f}", f"{2 * n:,}")
        return 0
    if (remaining is not None and remaining <= 0) or (not timed and spent(state)):
        return done  # the time budget, or the finish's row passes, already spent
    why = (f"up to {remaining:.0f} s, {share:.0%} of the fit's time" if timed
           else f"up to {allowance:,.0f} row passes, {share:.0%} of the fit's")
    log.info("daskgp: %s continues with batch iterations over all %s rows (%s)", name, f"{n:,}", why)
    t1 = time.perf_counter()
    ends = [t1]

    def out_of_time(st) -> bool:
        # stop before an iteration that would end past the budget (a batch iteration is seconds, not the
        # minibatch phase's milliseconds): the longest so far is taken as the next one's cost
        ends.append(time.perf_counter())
        return ends[-1] - t1 + max(b - a for a, b in pairwise(ends)) > remaining

    run_ep(chunks, state, method, 10**9, damping=method.default_damping, learn=True,
           learn_inducing=learn_inducing, batch_size=None, seed=seed, callback=callback,
           time_budget=remaining, until=out_of_time if timed else spent)
    made = len(in_finish(state.records, n)) - done
    log.info("daskgp: %s made %d batch iteration%s in %.1f s: evidence %.1f nats", name, made,
             "" if made == 1 else "s", time.perf_counter() - t1, state.records[-1].evidence)
    return done + made
