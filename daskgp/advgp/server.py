"""ADVGP's parameter server on dask.distributed: asynchronous delayed proximal gradients with a staleness
bound (Peng, Zhe & Qi 2017, section 4 and Algorithm 1; Li et al. 2014's bounded-delay consistency).

The data partitions live as futures on the workers (placed and, after a lost worker, placed again by
:class:`daskgp.compute.rows.RowChunks`). The server is this process: it holds the parameter vector θ, its
version t and the ADADELTA state, and keeps one task in flight per partition through ``as_completed``. A
task computes its partition's G_k and ∇G_k at the θ it was given (version t_k). When a gradient arrives the
server applies one update if every partition's latest gradient is at most τ versions old (t − t_k ≤ τ for
all k):

    θ' = θ + ADADELTA(Σ_k ∇G_k(θ^{t_k})),   then (μ, U) ← prox_γ(μ', U') (eqs. 18–20, γ the per-coordinate
    ADADELTA step),

and sends the partition the new θ; a partition whose gradient is already at the newest version waits for the
next update. τ = 0 is exactly synchronous proximal gradient descent; the gradients are always summed in
partition order, so a run with a fixed seed is reproducible.

Why the client process and not a Dask actor: an actor call bypasses the scheduler (about 1 ms against a few
ms per task here), but an actor is lost with its worker and has no resilience; the server's state is small
and here it lives in the process that also checkpoints it. The cost is one scheduler round trip per
gradient, measured per update in the records (``seconds``).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import CancelledError
from dataclasses import InitVar, dataclass, field

import numpy as np
from distributed import KilledWorker

from ..core.optim import Adadelta
from ..core.random import minibatch_rows
from ..inference.settings import checked_settings, settings_fields
from ..runs.fits import FitStore
from .model import ADVGPParams, partition_objective, regulariser
from .updates import get_update, update_names

__all__ = ["AUTO_BATCH_MIN", "AUTO_BATCH_ROWS_M100", "AUTO_PARTITIONS_PER_WORKER", "OPTIMIZERS", "Adadelta",
           "ArrivalOrder", "ParameterServer", "ServerCheckpoint", "UpdateRecord", "auto_batch_size"]

# the built-in updates (daskgp.advgp.updates): 'adam', Adam with one step size per group on the kernel part
# and natural-gradient steps on q(w), the default; 'adadelta', the paper's Algorithm 1 (ADADELTA on
# everything, then the Euclidean prox on q(w)). update_names() lists every registered one.
OPTIMIZERS = ("adam", "adadelta")

# plateaus of the objective before a fit with Adam stops: its step sizes are halved at each earlier one
PLATEAUS = 4


@dataclass
class UpdateRecord:
    """One server update: its version (after it), the staleness t − t_k of every partition's contribution,
    the objective estimate Σ_k G_k(θ^{t_k}) + h(θ^t) (nats, standardised y), wall seconds since the start."""

    version: int
    staleness: list
    objective: float
    seconds: float
    partition: int = -1  # whose gradient triggered it


# Rows per gradient task that batch_size='auto' gives at m = 100 inducing inputs; a task's arithmetic grows as
# m² per row, so the rows scale as (100 / m)², within [AUTO_BATCH_MIN, the partition]. Measured on the
# 2013 NYC flights, 2 workers, 4 partitions of 61,617 rows (benchmarks/results/advgp_batch.json): see the
# ADVGP guide's "Rows per gradient".
AUTO_BATCH_ROWS_M100 = 16384
AUTO_BATCH_MIN = 1024
# An update at τ = 0 sums a gradient from every partition, so its rows are the task's rows times the
# partitions. The balance above was measured with two partitions per worker (the default for in-memory
# rows); a Parquet folder's partitions are its files (100 at 10⁸ rows), and 16,384 rows from each made an
# update of 1.6·10⁶ rows — ten times the rows of one at 10⁷ rows (10 files) for the same step. On the
# 10⁷-row taxi table, divided (6,554 a task) the rule stopped ADVGP after 2,550 updates in 475 s, against
# 4,450 in 2,030 s with 16,384 a task, at the same test RMSE within 0.006 (benchmarks/results/scale.json).
# Beyond AUTO_PARTITIONS_PER_WORKER partitions a worker, the rows a task are divided so that an update
# keeps the balance's rows (AUTO_BATCH_MIN still bounds a task from below).
AUTO_PARTITIONS_PER_WORKER = 2


def auto_batch_size(partition_rows: int, m: int, partitions: int = 1, workers: int = 1) -> int | None:
    """Rows per gradient task for ``batch_size='auto'``: ``AUTO_BATCH_ROWS_M100`` · (100 / m)², times
    2·``workers`` / ``partitions`` when the partitions are more than two a worker, at least
    ``AUTO_BATCH_MIN``; None (the whole partition, exact gradients) when that covers ``partition_rows``. A
    task's cost then stays near the server's round trip whatever n (a 5·10⁶-row partition no longer costs
    seconds per update), and an update's rows stay the same however many files the data came in."""
    rows = AUTO_BATCH_ROWS_M100 * (100 / max(int(m), 1)) ** 2
    share = AUTO_PARTITIONS_PER_WORKER * max(int(workers), 1) / max(int(partitions), 1)
    rows = max(AUTO_BATCH_MIN, round(rows * min(1.0, share)))
    return None if rows >= partition_rows else int(rows)


def _partition_task(chunk, theta, template: dict, delay: float, batch: tuple | None = None,
                    natural: bool = False):
    """On the worker holding the partition: (G_k, ∇G_k) at θ (after ``delay`` seconds of
    artificial work, the straggler experiment). ``batch`` = (size, seed): an unbiased estimate from that many
    rows drawn without replacement (the sums scaled by n_k / size). ``natural``: q(w)'s part of ∇G_k is the
    partition's natural parameters instead (:func:`daskgp.advgp.model.partition_objective`)."""
    if delay > 0:
        time.sleep(delay)
    p = ADVGPParams.from_plain(template).with_vector(theta)
    X, y = chunk["X"], chunk["Y"][:, 0]
    n_k = len(y)
    idx = minibatch_rows(n_k, batch)
    if idx is None:
        return partition_objective(X, y, p, natural=natural)
    G, g = partition_objective(X[idx], y[idx], p, natural=natural)
    c = n_k / batch[0]
    return G * c, g * c


class ServerCheckpoint(FitStore):
    """The server's state in a fit checkpoint folder (:class:`daskgp.runs.fits.FitStore`: one JSON commit
    of plain data with a digest, the previous commit, the writer's lock): θ, its version, the optimiser's
    state, the records so far, tied to the data and settings by its key. Committed after every ``every``
    updates."""

    kind = "daskgp.advgp-checkpoint"
    what = "ADVGP"
    legacy_suffix = ".json"  # daskgp <= 0.3 wrote OUT.checkpoint.json

    def __init__(self, path, every: int = 10):
        super().__init__(path)
        self.every = int(every)

    def write(self, key: str, theta, version: int, opt, records: list, template: dict,
              plateaus: int = 0, step_scale: float = 1.0, update: str | None = None) -> None:
        """Commit the server's state; ``opt``: the optimiser state of the update named ``update``, stored
        under that name (None: 'adadelta' or 'adam' by the state's type, as 0.4 called it)."""
        if update is None:
            update = "adadelta" if isinstance(opt, Adadelta) else "adam"
        state = {"version": int(version), "theta": np.asarray(theta, float), "plateaus": int(plateaus),
                 "step_scale": float(step_scale), str(update): opt.to_dict(),
                 "template": {k: v for k, v in template.items() if k in ("feature_map", "groups", "kernel")},
                 "records": [dict(r.__dict__) for r in records]}
        self.commit(key, int(version), state)

    def read(self, key: str) -> dict:
        """The state committed for ``key``: 'version', 'theta', 'plateaus', 'step_scale', the optimiser's
        under its update's name ('adam', 'adadelta'), 'template', 'records' (:meth:`ParameterServer.restore`
        checks them)."""
        return self.read_state(key)[1]


class ArrivalOrder:
    """``as_completed``'s interface (``add``, iteration) with the order of arrival set by a policy instead of
    by the clock: ``policy(partitions)`` gets the partitions of the gradients in flight, in the order they
    were sent, and returns the position of the one the server takes next (and waits for). The schedule of
    updates, and so the fit, is then a function of the policy alone, on any cluster and under any load:
    for tests of the asynchronous algebra and for reproducible studies of staleness.
    ``ArrivalOrder.seeded(seed)``: a uniformly random order from a seed; ``ArrivalOrder.last(k)``: partition
    k's gradient is taken only when no other is in flight (the slowest possible straggler)."""

    def __init__(self, policy):
        self.policy = policy
        self._partition: dict = {}
        self._pending: list = []

    def start(self, futures: list, partitions: list) -> ArrivalOrder:
        self._pending, self._partition = [], {}
        for f, k in zip(futures, partitions, strict=True):
            self.add(f, k)
        return self

    def add(self, future, partition: int) -> None:
        self._pending.append(future)
        self._partition[future] = partition

    def __iter__(self):
        while self._pending:
            i = int(self.policy([self._partition[f] for f in self._pending]))
            yield self._pending.pop(i)

    @classmethod
    def seeded(cls, seed: int) -> ArrivalOrder:
        rng = np.random.default_rng(seed)
        return cls(lambda parts: rng.integers(len(parts)))

    @classmethod
    def last(cls, k: int) -> ArrivalOrder:
        return cls(lambda parts: next((i for i, j in enumerate(parts) if j != k), 0))


@dataclass
class ParameterServer:
    """Drive ADVGP on the partitions ``chunks`` (a :class:`daskgp.compute.rows.RowChunks` with "X" and "Y"
    per chunk) from ``params`` with staleness bound ``tau``. ``delays``: artificial seconds per task, per
    partition (None: none). ``arrivals``: an :class:`ArrivalOrder` to take the gradients in its order rather
    than as they complete (None: as they complete). ``optimizer``: the registered update's name
    (:mod:`daskgp.advgp.updates`) and ``options`` its settings (plain data, checked against its settings
    dataclass: ``learning_rate``, ``inducing_rate``, ``q_step`` for 'adam'; ``rho``, ``eps`` for
    'adadelta'); 0.4's keywords ``rho``, ``eps``, ``learning_rate``, ``inducing_rate`` and ``q_step`` still
    set the update's settings of those names (and are inert for an update without them). Call :meth:`run`.
    """

    chunks: object
    params: ADVGPParams
    tau: int = 0
    delays: list | None = None
    batch_size: int | None = None
    optimizer: str = "adadelta"
    options: dict | None = None
    seed: int = 0
    records: list = field(default_factory=list)
    lost: int = 0  # partitions placed again after a lost worker
    converged: bool = False  # the last run stopped by its rule on the objective
    plateaus: int = 0  # windows without material progress so far (:meth:`converged_at`)
    step_scale: float = 1.0  # the factor on Adam's step sizes and the natural step, halved at each plateau
    gradients: list = field(default_factory=list)  # gradients received per partition
    arrivals: ArrivalOrder | None = None
    # 0.4's keywords for the built-in updates' settings (None: the update's default or ``options``')
    rho: InitVar[float | None] = None
    eps: InitVar[float | None] = None
    learning_rate: InitVar[float | None] = None
    inducing_rate: InitVar[float | None] = None
    q_step: InitVar[float | None] = None

    def __post_init__(self, rho, eps, learning_rate, inducing_rate, q_step):
        if not isinstance(self.tau, (int, np.integer)) or isinstance(self.tau, bool) or self.tau < 0:
            raise ValueError(f"tau must be an integer >= 0, got {self.tau!r}")
        r = len(self.chunks.futures)
        self.delays = [0.0] * r if self.delays is None else [float(d) for d in self.delays]
        if len(self.delays) != r:
            raise ValueError(f"delays must have one entry per partition ({r}), got {len(self.delays)}")
        # what every task rebuilds the model from: the parameters' plain data (their structure's fields)
        self.template = self.params.to_plain()
        if self.optimizer not in update_names():
            raise ValueError(f"optimizer must be one of {update_names()}, got {self.optimizer!r}")
        self.update = get_update(self.optimizer)
        legacy = {"rho": rho, "eps": eps, "learning_rate": learning_rate, "inducing_rate": inducing_rate,
                  "q_step": q_step}
        own = {f.name for f in settings_fields(self.update.settings)}
        values = {k: v for k, v in legacy.items() if v is not None and k in own}
        self.settings = checked_settings(self.update.settings, {**values, **(self.options or {})},
                                         f"the {self.optimizer!r} update")
        self.theta = self.params.to_vector()
        self.version = 0
        self.ada = self.update.new_state(self, self.settings)

    def restore(self, state: dict) -> None:
        """Continue from a checkpoint's state (:meth:`ServerCheckpoint.read`)."""
        theta = np.asarray(state["theta"], float)
        if theta.shape != self.theta.shape or not np.all(np.isfinite(theta)):
            raise ValueError("the checkpoint's parameters do not fit this model")
        self.theta, self.version = theta, int(state["version"])
        self.plateaus, self.step_scale = int(state.get("plateaus", 0)), float(state.get("step_scale", 1.0))
        if self.update.name not in state:
            raise ValueError(f"the checkpoint was written by another optimizer than {self.optimizer!r}")
        self.ada = self.update.state_from_dict(state[self.update.name], self, self.settings)
        self.records = [UpdateRecord(**r) for r in state["records"]]

    @property
    def current(self) -> ADVGPParams:
        return self.params.with_vector(self.theta)

    def _apply(self, grad, delay: float = 0.0) -> None:
        """One update along the summed partition gradients ``grad``; ``delay``: their mean age in versions
        (0 when every one is fresh, always so at τ = 0). A delayed gradient is stable only with steps that
        shrink with the delay (Agarwal & Duchi 2011), so Adam's and the natural step are divided by
        1 + delay: the delay measured, not the bound τ, which stragglers rarely reach. Measured on
        power_plant (4 partitions, 2 workers, m = 100) at τ = 8: undivided, the test RMSE swung between 4.3
        and 5.0 over 600 updates; divided by 1 + τ = 9 it held 4.24–4.31 but crawled (flights with two
        straggling partitions: at τ = 5, 1,035 updates in 90 s ended at 38.92 minutes against τ = 0's 38.52
        from 304)."""
        shrink = 1.0 / (1.0 + float(delay))
        self.theta = self.update.apply(self, self.settings, grad, shrink)
        self.version += 1

    def converged_at(self, tol: float) -> bool:
        """The stopping rule on the objective, checked once per window of updates (max(20, 5 r) for r
        partitions, so each partition has sent several fresh gradients in it): when the objective's trend
        over the last two windows — its least-squares slope plus two standard errors — gains less than
        ``tol`` nats per training row per window, the fit has reached the noise floor of its step sizes.
        Adam's step sizes and the natural step are then halved (stale and minibatch gradients keep a
        constant-step method circling its optimum at a distance proportional to the step), and the fit
        stops at the :data:`PLATEAUS`-th such plateau. ADADELTA (the paper) has no step size to halve: it
        stops at the first plateau."""
        w = max(20, 5 * len(self.chunks.futures))
        if len(self.records) < 2 * w or self.version % w:
            return False
        obj = np.array([r.objective for r in self.records[-2 * w:]])
        # the objective's trend over the last two windows, as a least-squares slope per update, and that
        # slope's standard error from the residuals: a plateau only when even the slope's upper bound
        # (two standard errors) gains less than tol per row per window — noisy (minibatch, stale)
        # objectives then wait for evidence instead of stopping on a lucky window
        t = np.arange(2 * w) - (2 * w - 1) / 2
        slope = float(t @ (obj - obj.mean()) / (t @ t))
        resid = obj - obj.mean() - slope * t
        se = float(np.sqrt(resid @ resid / (2 * w - 2) / (t @ t)))
        if (-slope + 2 * se) * w >= tol * self.chunks.n:
            return False
        self.plateaus += 1
        if not self.update.halves_on_plateau or self.plateaus >= PLATEAUS:
            return True
        self.step_scale *= 0.5
        self.update.rescale(self, self.settings)
        return False

    def run(self, max_updates: int, *, time_budget: float | None = None, callback=None,
            checkpoint: ServerCheckpoint | None = None, key: str = "", tol: float | None = None) -> list:
        """Apply updates until ``max_updates`` in all (counting those before a restore), ``time_budget``
        seconds, or — with ``tol`` — until :meth:`converged_at` (``self.converged`` then True).
        ``callback(record)`` after every update. Returns the records."""
        from distributed import as_completed

        client, futures = self.chunks.client, self.chunks.futures
        r = len(futures)
        t0 = time.perf_counter() - (self.records[-1].seconds if self.records else 0.0)
        latest, versions, values = [None] * r, [-1] * r, [math.nan] * r
        if len(self.gradients) != r:
            self.gradients = [0] * r
        meta = {}

        def submit(k):
            # the minibatch's seed names the partition and the version: reproducible, new at every version
            batch = None if self.batch_size is None else (int(self.batch_size), [self.seed, k, self.version])
            f = client.submit(_partition_task, self.chunks.futures[k], self.theta, self.template,
                              self.delays[k], batch, self.update.natural_tasks, pure=False)
            meta[f] = (k, self.version)
            return f

        first = [submit(k) for k in range(r)]
        if self.arrivals is not None:
            ac = self.arrivals.start(first, list(range(r)))
        else:  # on the chunks' client's loop: as_completed otherwise looks for the process's default client
            ac = as_completed(first, loop=client.loop)

        def resend(k):
            if self.arrivals is not None:
                ac.add(submit(k), k)
            else:
                ac.add(submit(k))
        waiting: set[int] = set()
        try:
            for fut in ac:
                k, v = meta.pop(fut)
                try:
                    G, g = fut.result()
                except (CancelledError, KilledWorker):
                    self._replace(k)
                    resend(k)
                    continue
                latest[k], versions[k], values[k] = g, v, G
                self.gradients[k] += 1
                if min(versions) >= max(0, self.version - self.tau) and self.version < max_updates:
                    # partition order: reproducible
                    self._apply(np.sum(latest, axis=0), float(np.mean([self.version - t for t in versions])))
                    cur = self.current
                    rec = UpdateRecord(self.version, [self.version - 1 - t for t in versions],
                                       float(np.sum(values) + regulariser(cur.mu, cur.U)),
                                       time.perf_counter() - t0, k)
                    self.records.append(rec)
                    if callback is not None:
                        callback(rec)
                    # judged before the checkpoint, so one written at a window's end holds that window's
                    # plateau and step halving: a restored run then continues as the uninterrupted one
                    self.converged = tol is not None and self.converged_at(tol)
                    if checkpoint is not None and self.version % checkpoint.every == 0:
                        self._write(checkpoint, key)
                    done = self.version >= max_updates or self.converged or (
                        time_budget is not None and rec.seconds >= time_budget)
                    if done:
                        break
                    for j in sorted(waiting | {k}):
                        resend(j)
                    waiting.clear()
                elif versions[k] < self.version:
                    resend(k)  # a newer θ exists: no reason to wait
                else:
                    waiting.add(k)
        finally:
            for f in list(meta):
                f.cancel()
        if checkpoint is not None:
            self._write(checkpoint, key)
        return self.records

    def _write(self, checkpoint: ServerCheckpoint, key: str) -> None:
        checkpoint.write(key, self.theta, self.version, self.ada, self.records, self.template, self.plateaus,
                         self.step_scale, update=self.update.name)

    def _replace(self, k: int) -> None:
        """Partition k's data were lost with a worker: place them again from the source (or fail in one
        line when they cannot be)."""
        from ..compute.rows import WorkerLostError

        if not self.chunks.replaceable:
            raise WorkerLostError(f"a Dask worker was lost with ADVGP partition {k}, which cannot be placed "
                                  "again")
        import logging

        logging.getLogger(__name__).warning("daskgp: a worker was lost with ADVGP partition %d; placing it "
                                            "again from the data and recomputing its gradient", k)
        self.chunks.futures[k] = self.chunks.replace([k])[0]
        self.lost += 1
