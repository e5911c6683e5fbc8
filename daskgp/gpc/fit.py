"""The EP / SEP / ADF training loop on a Dask cluster (Hernández-Lobato et al. 2015, section 2 and the
algorithm boxes): per iteration one map over the row chunks on the workers that hold them (EP: a task per
chunk, its sites beside it; SEP and ADF: a task per worker over the chunks it holds), a tree sum of their
:class:`~daskgp.gpc.ep.ChunkResult` in chunk order, and a step at the centre.

Per iteration, each chunk (or a minibatch of its rows) computes, from the cavity source sent to it, the new
sites, their k-space sums, its evidence terms and its part of the evidence's gradient (:func:`chunk_pass`).
The centre then

* EP: takes the re-summed (damped) sites as the new factor (minibatches: adds the change of the batch's
  sites); the sites themselves stay on the workers, as futures beside their chunks. When learning, each
  iteration first makes a site-only pass (:data:`DEFAULT_SITE_PASSES`), so the gradient is taken near EP's
  fixed point at the current hyperparameters;
* SEP and ADF: move the global factor, t̃_g ← (1 − δ) t̃_g + δ Σ_i t̃_i (batch), or with n/|B| Σ_{i∈B} t̃_i,
  an unbiased estimate of that sum, in place of Σ_i t̃_i (minibatches: the paper's stochastic update, with
  SEP's δ = |B|/min(n, R) instead of the paper's |B|/n, :func:`minibatch_damping`, and δ and Adam's step
  both decaying as 1/√(1 + t/E), :func:`minibatch_decay`); the sites come from
  q\\1 for SEP and from q for ADF;

and, when learning, takes one Adam ascent step on (Z, log σ², log l) along the evidence gradient (a
minibatch's data terms scaled by n/|B|: an unbiased estimate of the full sum; SEP's and ADF's gradient with
per-point cavities, :func:`daskgp.gpc.ep.tied_gradient_pass`). The factor is in k-space, so the new q is
formed at the new hyperparameters without another pass over the data.

A worker lost mid-fit: its chunks are placed again from the data (:class:`daskgp.compute.rows.RowChunks`)
and, for EP, their sites restart at zero (logged); SEP and ADF keep no per-point state and lose nothing.
"""

from __future__ import annotations

import logging
import math
import operator
import time
from concurrent.futures import CancelledError

import numpy as np
from distributed import KilledWorker

from ..compute.reductions import sum_groups_in_tree_order, tree_sum
from ..compute.threads import blas_threads_for
from ..core.optim import Adam
from ..core.random import minibatch_rows
from .checkpoint import GPCCheckpoint
from .ep import ChunkResult, Factor, Posterior, assemble_gradient, chunk_pass
from .methods import SEP_MEMORY_ROWS, GPCMethod, get_method, method_names, minibatch_damping
from .state import EPState, IterationRecord

__all__ = ["DEFAULT_DAMPING", "DEFAULT_SITE_PASSES", "SEP_MEMORY_ROWS", "Adam", "EPState", "GPCCheckpoint",
           "IterationRecord", "REFINE_PASSES", "SITE_PASSES_MAX", "SITE_TOL", "auto_chunk_rows", "collapsed",
           "factor_change", "minibatch_damping", "minibatch_decay", "refine_factor", "run_ep"]

# the built-in methods' δ of a batch fit (why: in each method's module, daskgp.gpc.methods)
DEFAULT_DAMPING = {nm: get_method(nm).default_damping for nm in method_names()}

# Site-only passes before each gradient pass. The evidence gradient is exact at the fixed point; with one
# parallel pass per Adam step EP's sites fell behind the hyperparameters and the fit came apart (MNIST-5k
# odd/even, m = 200: evidence −569 at iteration 190, −1121 at 250, test error 41.5 %). One extra site pass
# per step keeps them at the fixed point (evidence −530, test error 4.6 %, NLL 0.130 at 250); the same for
# SEP's and ADF's factor (without it, undamped SEP diverged after about 60 iterations on the house_8L rows).
DEFAULT_SITE_PASSES = {nm: get_method(nm).site_passes for nm in method_names()}

# A batch fit whose evidence falls below its best by more than max(COLLAPSE_NATS, COLLAPSE_FRACTION·|best|)
# has collapsed: with every row in each pass the evidence is the method's exact log Z approximation for its q,
# and Adam's small steps move it by far less (breast cancer, m = 20, SEP: a steady climb to −42.6 nats at
# iteration 383, then −248.8 at 400 with the training error 0.016 → 0.217). One nat is the smallest
# evidence ratio (e) model comparison calls material; 1 % of |log Z| allows for the larger absolute wobble
# of a fit on many rows. The fit then keeps its best iterate. Minibatch evidences are estimates whose noise
# no such rule bounds: not judged.
COLLAPSE_NATS, COLLAPSE_FRACTION = 1.0, 0.01
# Iterations before any is a candidate for "best": the first q is the prior (a zero factor), and SEP's
# global factor needs about 20 iterations to converge at fixed hyperparameters (DEFAULT_DAMPING's note);
# until then the evidence is not that of a fitted q (5-iteration fits in scikit-learn's checks "collapsed"
# from iteration 1, the prior). A fit this short keeps its last iterate.
SETTLE_ITERATIONS = 20


# A batch fit that learns makes site-only passes before each gradient pass until the factor's relative change
# (factor_change) is at most SITE_TOL, at least the method's site_passes and at most SITE_PASSES_MAX of them
# (issue 58, item 2). With a fixed single pass the factor fell behind the hyperparameters as the kernel
# variance grew and the sites strengthened, the gradient was taken ever further from the fixed point, and the
# fit came apart: 10,000 flights rows (arrival delay > 15 min, m = 100, Adam 0.01), SEP and EP alike, evidence
# rising to iteration ~100 (test NLL 0.465), then falling, test NLL above 1.4 and test error above 0.68 within
# 240 iterations; breast cancer, m = 20, SEP at Adam 0.1: −29.3 nats at iteration 46, −54.6 at 100. With
# passes until the factor settles, both climbed steadily to iteration 240 (flights: NLL 0.458, SEP's evidence
# −4,377 against a one-pass best of −4,520; breast cancer: −25.8 at 100). SITE_TOL = 10⁻³ gave the same fits
# to 2·10⁻⁴ nats of test NLL at twice EP's passes (5–6 an iteration against 1–4; SEP, undamped, 3–4 against
# 3). An iteration that reaches the cap is counted and said (run_ep's log), never silently taken as converged.
SITE_TOL, SITE_PASSES_MAX = 1e-2, 10


def factor_change(before: Factor, after: Factor) -> float:
    """The relative change from one factor to the next: the larger of ‖ΔT‖_F / ‖T‖_F and ‖Δc‖ / ‖c‖ (each
    against the newer factor; 0 where both are zero). Scale-free: T and c grow with σ² and with the rows."""
    def rel(a, b):
        den = np.linalg.norm(b)
        num = np.linalg.norm(b - a)
        return 0.0 if num == 0.0 else (math.inf if den == 0.0 else float(num / den))

    return max(rel(before.T, after.T), rel(before.c, after.c))


def minibatch_decay(iteration: int, epoch: float) -> float:
    """The factor on the minibatch damping and on Adam's step at ``iteration`` (0-based): 1/√(1 + t/E) with
    ``epoch`` E = n/|B| minibatches per pass over the data."""
    return 1.0 / math.sqrt(1.0 + iteration / epoch)


def collapsed(best: float, last: float) -> bool:
    """Whether an evidence ``last`` (nats) lies materially below the ``best`` of the same fit (rule above);
    a non-finite ``last`` always does."""
    return not np.isfinite(last) or last < best - max(COLLAPSE_NATS, COLLAPSE_FRACTION * abs(best))


# Passes over every row that re-make a tied factor after a fit on minibatches (:func:`refine_factor`). SEP's
# factor there is a weighted sum of recent minibatches' sites scaled by n/|B|, so q carries their sampling
# noise and its lag behind the hyperparameters; on flights (arrival delay > 15 min, 222,000 training rows,
# m = 100, 150 s of 10,000-row minibatches) its test NLL was 0.4572, and 0.4546 after one pass over every
# row at the final hyperparameters, 0.45462 after the second and unchanged to the sixth (about 1 s a pass).
REFINE_PASSES = 2

# Rows per chunk (one task each) that chunk_rows='auto' takes: CHUNK_ROWS, in at most AUTO_CHUNKS chunks.
# SEP's minibatch is drawn from every chunk, and each chunk's share costs a fixed ~0.8 ms a pass on its
# worker plus its m × m sums (240 kB at m = 100) gathered to the client: on 10⁷ rows in 500 chunks of 20,000,
# a 2,000-row minibatch took about 1 s an iteration and the client peaked at 616 MB. Measured on 2·10⁶ taxi
# rows (m = 100, 2,000-row minibatches, 2 workers; benchmarks/sep_chunks.py): 82 / 88 / 96 / 121 / 178 /
# 245 ms an iteration in 4 / 8 / 16 / 32 / 64 / 100 chunks. Sixteen chunks keep that overhead near a
# tenth and still give 16 workers a chunk each on a full pass; the count depends on n only, so a fit has
# the same bits (and resumes its checkpoint) on any cluster. Up to 320,000 rows nothing changes: chunks of
# CHUNK_ROWS.
CHUNK_ROWS, AUTO_CHUNKS = 20_000, 16


def auto_chunk_rows(n: int) -> int:
    """Rows per chunk for ``n`` training rows under chunk_rows='auto' (rule above)."""
    return max(CHUNK_ROWS, -(-int(n) // AUTO_CHUNKS))


SCATTER_M = 200  # from this many inducing points, q is scattered to the workers once per pass

log = logging.getLogger(__name__)


def _zero_sites(chunk):
    return np.zeros((chunk["Y"].shape[0], 2))


def _pass_task(chunk, sites, batch, source: Posterior, damping: float, grad: bool,
               gradient_at: Posterior | None = None):
    """On the worker holding the chunk: a pass over its rows (or the minibatch ``batch`` = (size, seed));
    ``gradient_at``: SEP's and ADF's q (:func:`daskgp.gpc.ep.tied_gradient_pass`)."""
    X, y = chunk["X"], chunk["Y"][:, 0]
    idx = minibatch_rows(len(y), batch)
    if idx is None:
        return chunk_pass(X, y, source, sites, damping, grad, gradient_at)
    res, new = chunk_pass(X[idx], y[idx], source, None if sites is None else sites[idx], damping, grad,
                          gradient_at)
    if sites is None:
        return res, None
    out = sites.copy()
    out[idx] = new
    return res, out


def _group_pass_task(group, batches, source: Posterior, damping: float, grad: bool,
                     gradient_at: Posterior | None = None) -> list[ChunkResult]:
    """On one worker, for a method without per-point sites (SEP, ADF): the pass over each chunk it holds (or
    its minibatch), one result per chunk — computed as a task per chunk would, so the fit's sum (in chunk
    order, :func:`daskgp.compute.reductions.sum_groups_in_tree_order`) has the same bits whatever the
    workers, while a minibatch of a few hundred rows per chunk costs one task per worker, not per chunk."""
    return [_pass_task(c, None, b, source, damping, grad, gradient_at)[0]
            for c, b in zip(group, batches, strict=True)]


def _by_worker(client, futures) -> list[list[int]]:
    """The indices of ``futures`` grouped by the worker holding each (one scheduler query; a future held by
    several workers goes with the first, one held by none — lost, or not yet computed — forms its own
    group). Asked by key: ``Client.who_has`` refuses a cancelled future, which a lost chunk's is."""
    held = client.sync(client.scheduler.who_has, keys=[f.key for f in futures])
    groups: dict = {}
    for i, f in enumerate(futures):
        where = sorted(held.get(f.key) or ())
        groups.setdefault(where[0] if where else ("nowhere", i), []).append(i)
    return list(groups.values())


def _batch_sizes(sizes, batch_size: int | None) -> list[int] | None:
    """Rows per chunk for a minibatch of ``batch_size`` rows in all, proportional to the chunks' sizes."""
    if batch_size is None or batch_size >= sum(sizes):
        return None
    n = sum(sizes)
    return [max(1, int(round(batch_size * s / n))) for s in sizes]


def run_ep(chunks, state: EPState, method: str | GPCMethod, n_iter: int, *, damping: float = 0.5,
           learn: bool = True, learn_inducing: bool = True, batch_size: int | None = None, seed: int = 0,
           site_passes: int | None = None, callback=None, time_budget: float | None = None,
           until=None) -> EPState:
    """``n_iter`` iterations of ``method`` (a registered :class:`daskgp.gpc.methods.GPCMethod` or its name) on
    ``chunks`` (:class:`~daskgp.compute.rows.RowChunks` with "X" and "Y" = labels ±1), from ``state``, or
    fewer when ``time_budget`` seconds have passed; returns the state updated. ``site_passes``: site updates
    without the gradient before each iteration's pass (None: the method's ``site_passes``; same minibatch).
    ``callback(record, state)`` after each iteration; ``until(state)``: stop after an iteration where it is
    true.

    Raises FloatingPointError when an iteration's evidence, gradient or step is not finite (ADF's factor,
    which counts the data again on every pass, can get there); ``state`` then holds the last finite
    iteration."""
    t0 = time.perf_counter()
    method = method if isinstance(method, GPCMethod) else get_method(method)
    if site_passes is None:
        site_passes = method.site_passes if learn else 0
    if method.keeps_sites and state.sites is None:
        state.sites = chunks.client.map(_zero_sites, chunks.futures, pure=False)
    per_chunk = _batch_sizes(chunks.sizes, batch_size)
    # minibatches per pass over the data, for the decay of a method's steps on minibatches (SEP's)
    epoch = chunks.n / sum(per_chunk) if per_chunk is not None and method.decays_on_minibatches else None
    # the centre's m × m algebra on one BLAS thread: multithreaded OpenBLAS took 17 ms for SEP's gradient
    # assembly at m = 100 where one thread takes 1 ms, and its threads compete with local workers
    with blas_threads_for(state.params.m):
        _iterate(chunks, state, method, n_iter, damping, learn, learn_inducing, per_chunk, epoch, seed,
                 site_passes, callback, time_budget, t0, until)
    return state


def refine_factor(chunks, state: EPState, method: str | GPCMethod,
                  passes: int = REFINE_PASSES) -> tuple[float, float]:
    """A tied factor (SEP's, ADF's) re-made from every row at ``state``'s hyperparameters: ``passes``
    site-only passes over all of ``chunks``, each replacing the factor with its new sites' sum (δ = 1).
    After a fit on minibatches the factor is an estimate from the last few minibatches, made partly at
    earlier hyperparameters (:data:`REFINE_PASSES`); this is the factor of the whole data. ``state.factor``
    is replaced; its records are not touched. Returns (the evidence of the refined q, nats, from the last
    pass; seconds)."""
    t0 = time.perf_counter()
    method = method if isinstance(method, GPCMethod) else get_method(method)
    if method.keeps_sites:
        raise ValueError(f"{method.name.upper()} keeps a site per point: there is no tied factor to re-make")
    n, batches = chunks.n, [None] * len(chunks.futures)
    ev = float("nan")
    with blas_threads_for(state.params.m):
        for _ in range(passes):
            q = state.posterior()
            source = method.source(q, n)
            total, _ = _map_pass(chunks, state, source, method, 1.0, batches, False)
            ev = method.evidence(q, source, total, n)  # of q, the factor the pass started from
            state.factor = method.factor_after(state.factor, total, 1.0, 1.0, False)
    return float(ev), time.perf_counter() - t0


def _iterate(chunks, state: EPState, method: GPCMethod, n_iter: int, damping: float, learn: bool,
             learn_inducing: bool, per_chunk, epoch, seed: int, site_passes: int, callback, time_budget,
             t0: float, until=None) -> None:
    """:func:`run_ep`'s loop: up to ``n_iter`` iterations on ``state`` (in place)."""
    short = 0  # iterations whose gradient was taken with the factor still moving after SITE_PASSES_MAX passes
    for _ in range(n_iter):
        last = (state.params, state.factor, state.sites, state.adam.m, state.adam.v, state.adam.t)
        # the decay is a function of the iteration count, not kept in the state (Adam's lr is untouched)
        decay = 1.0 if epoch is None else minibatch_decay(len(state.records), epoch)
        try:
            rec, judged = _iteration(chunks, state, method, damping, decay, learn, learn_inducing,
                                     per_chunk, seed, site_passes)
        except (FloatingPointError, np.linalg.LinAlgError) as e:
            state.params, state.factor, state.sites, state.adam.m, state.adam.v, state.adam.t = last
            raise FloatingPointError(f"{method.name.upper()} became numerically degenerate at iteration "
                                     f"{len(state.records) + 1} ({e}){method.degenerate_hint}") from e
        state.records.append(rec)
        state.last = (judged.params, judged.factor)
        # the first iterations start from the prior's zero factor and are not judged (as for "best")
        if (rec.iteration > SETTLE_ITERATIONS and rec.site_passes >= SITE_PASSES_MAX
                and rec.site_change > SITE_TOL):
            short += 1
            if short == 1:
                log.warning("daskgp: %s's sites still moved by %.1e after %d site passes at iteration %d; "
                            "its gradient is taken there, short of the fixed point (more such iterations "
                            "are counted at the end)", method.name.upper(), rec.site_change, rec.site_passes,
                            rec.iteration)
        if rec.iteration > SETTLE_ITERATIONS and (
                state.best is None or rec.evidence > state.records[state.best[0] - 1].evidence):
            state.best = (rec.iteration, judged.params, judged.factor)
        if callback is not None:
            callback(rec, state)
        if (time_budget is not None and time.perf_counter() - t0 >= time_budget) or (
                until is not None and until(state)):
            break
    if short > 1:
        log.warning("daskgp: %s took %d gradients short of the sites' fixed point (after %d site passes)",
                    method.name.upper(), short, SITE_PASSES_MAX)


def _iteration(chunks, state: EPState, method: GPCMethod, damping: float, decay: float, learn: bool,
               learn_inducing: bool, per_chunk, seed: int,
               site_passes: int) -> tuple[IterationRecord, Posterior]:
    """One iteration of :func:`run_ep` on ``state`` (updated in place); its record and the q whose evidence
    the record holds. ``decay`` multiplies both the factor's damping and Adam's step (SEP on minibatches)."""
    damping = damping * decay
    n, (m, q_) = chunks.n, state.params.Z.shape
    it = len(state.records)
    batches = ([None] * len(chunks.futures) if per_chunk is None
               else [(b, [seed, it, k]) for k, b in enumerate(per_chunk)])

    minibatch = per_chunk is not None

    def posteriors():
        q = state.posterior()
        return q, method.source(q, n)

    def fold(result, sites) -> None:  # the pass's sites into the method's factor (module docstring)
        state.factor = method.factor_after(state.factor, result, damping, n / result.n, minibatch)
        if method.keeps_sites:
            state.sites = sites

    q, source = posteriors()
    # site-only passes: the method's minimum, then, on a batch fit that learns, until the factor has stopped
    # moving (SITE_TOL) — the evidence gradient is the exact one only at the fixed point (SITE_PASSES_MAX)
    passes, moved = 0, math.inf
    adaptive = learn and not minibatch and method.passes_to_fixed_point
    while passes < site_passes or (adaptive and moved > SITE_TOL and passes < SITE_PASSES_MAX):
        before = state.factor
        fold(*_map_pass(chunks, state, source, method, damping, batches, False))
        moved = factor_change(before, state.factor)
        q, source = posteriors()
        passes += 1
    total, new_sites = _map_pass(chunks, state, source, method, damping, batches, learn,
                                 None if method.keeps_sites else q)
    rows = total.n
    scale = n / rows
    full = total if scale == 1.0 else total.scaled(scale)
    ev = method.evidence(q, source, full, n)
    # SEP's and ADF's gradient parts are EP's at q (per-point cavities q / t̃_i): their source is q
    g = assemble_gradient(q, q, full) if learn else np.zeros(state.params.to_vector().size)
    if learn and not learn_inducing:
        g[:m * q_] = 0.0
    step = decay * state.adam.step(g) if learn else np.zeros_like(g)
    with np.errstate(over="ignore", invalid="ignore"):
        positive = np.exp(state.params.to_vector()[m * q_:] + step[m * q_:])  # σ² and l after the step
    if not all(np.all(np.isfinite(a)) for a in (ev, g, total.factor.T, positive)):
        raise FloatingPointError("non-finite evidence, gradient or step")
    fold(total, new_sites)
    if learn:
        state.params = state.params.with_vector(state.params.to_vector() + step)
    return IterationRecord(it + 1, float(ev), float(total.errors) / rows, float(np.linalg.norm(g)), passes,
                           moved if passes else math.nan, int(rows)), q


def _map_pass(chunks, state: EPState, source: Posterior, method: GPCMethod, damping: float, batches,
              grad: bool, gradient_at: Posterior | None = None) -> tuple[ChunkResult, list | None]:
    """One map over the chunks and the sum of their results (in chunk order, the same bits however the
    chunks are placed or grouped); lost chunks are placed again (EP's sites
    restart at zero for them) and the pass repeated."""
    client = chunks.client
    for attempt in range(4):
        sites = state.sites if method.keeps_sites else [None] * len(chunks.futures)
        # large m: q's four m × m factors go once to each worker (8 MB at m = 500), not inside every chunk's
        # task; small ones ride with the tasks and save the scatter's round trip
        big = source.params.m >= SCATTER_M
        src, at = source, gradient_at if grad else None
        if big:
            src = client.scatter(source, broadcast=True, hash=False)
            at = None if at is None else (src if at is source else
                                          client.scatter(at, broadcast=True, hash=False))
        try:  # a lost chunk's future may already be cancelled when the pass is submitted
            if method.keeps_sites:
                futs = client.map(_pass_task, chunks.futures, sites, batches, source=src,
                                  damping=method.pass_damping(damping), grad=grad, gradient_at=at,
                                  pure=False)
                pending = tree_sum(client, futs)
            else:  # one task per worker: nothing per point comes back (no sites), so only the sums travel
                groups = _by_worker(client, chunks.futures)
                parts = [client.submit(_group_pass_task, [chunks.futures[i] for i in g],
                                       [batches[i] for i in g], source=src,
                                       damping=method.pass_damping(damping), grad=grad, gradient_at=at,
                                       pure=False)
                         for g in groups]
                # gathered and summed here, not in a task: the parts come to the centre either way, and a
                # summing task adds a scheduler round trip to every pass (two local workers, m = 100: 25.7 ms
                # a pass with the summing task, 18.1 ms gathering the two parts)
                total = sum_groups_in_tree_order([i for g in groups for i in g], *client.gather(parts))
                return total, None
            total = pending.result()
            return total, client.map(operator.itemgetter(1), futs, pure=False)
        except (CancelledError, KilledWorker):
            if attempt == 3 or not chunks.replaceable:
                raise
            lost = [i for i, f in enumerate(chunks.futures) if f.status != "finished"]
            log.warning("daskgp: a worker was lost with %d row chunk(s) during %s; placing them again from "
                        "the data%s", len(lost), method.name.upper(),
                        " (their sites restart at zero)" if method.keeps_sites else "")
            for i, f in zip(lost, chunks.replace(lost) if lost else [], strict=True):
                chunks.futures[i] = f
            if method.keeps_sites:
                state.sites = [s if s.status == "finished" else client.submit(_zero_sites, chunks.futures[i],
                                                                               pure=False)
                               for i, s in enumerate(state.sites)]
    raise AssertionError("unreachable")
