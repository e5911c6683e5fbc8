"""The worker side of a run: one chain advanced by one segment of iterations, a pure function of plain data.

A chain between segments is a :class:`ChainState` — its sampler's state (the registered
:class:`daskgp.mcmc.samplers.Sampler` of the run's ``method`` builds and checks it) and, for a sampler on the
stochastic gradient, the gradient's :class:`ProbeState` (probes, CG warm starts, generator; Filippone &
Engler 2015, section 3.2) — and travels, and is committed, as its ``to_dict``: plain arrays, numbers and
generator states. :func:`run_segment` rebuilds it with ``from_dict`` (which checks every field), runs the
sampler on its :class:`_Target` and returns the records and the next state's dict, so a task lost with its
worker is recomputed to the same draws and a resumed run continues exactly where an uninterrupted one would
be.

The kernel operator with its cached kernel rows (n² · 4 bytes in float32: 2 GB on house_8L) is kept
between a run's segments — per (run, worker thread) when the chain computes in its own process, per (run,
chain) when its products run on several workers (:mod:`daskgp.mcmc.layout`: the segment, the chain's
driver, then secedes from the worker's thread pool through ``worker_client`` and its row blocks run as
pinned tasks on the chain's workers, each caching its blocks' rows) — and :func:`release_operators`, run on
every worker, frees both when the run ends, stops or fails, so a long-lived cluster (the dashboard's) does
not keep the memory of finished runs.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import numpy as np

from ..core.priors import GammaPrior
from ..exact.posterior import GPPosterior, ProbeState, exact_log_posterior
from ..model.kernels import make_kernel
from .config import SamplerConfig
from .layout import chain_block_rows
from .samplers import get_sampler
from .samplers.base import ChainStateLike
from .ticker import ChainTicker

__all__ = ["ChainState", "initial_states", "run_segment", "release_operators", "RunReleased",
           "block_arrays"]

@dataclass
class ChainState:
    """One chain between segments: ``sampler`` its sampler's state (SGHMC, SGLD, MH or a registered one's)
    and, for a sampler that reads the stochastic gradient, ``probes`` the gradient's probe / warm-start
    state (None otherwise)."""

    sampler: ChainStateLike
    probes: ProbeState | None = None

    def to_dict(self) -> dict:
        """Plain data (what the run store commits): the sampler's fields, and the probe state under
        'posterior' for a gradient sampler."""
        d = self.sampler.to_dict()
        if self.probes is not None:
            d["posterior"] = self.probes.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict, cfg: SamplerConfig, p: int, n: int) -> ChainState:
        """The state ``to_dict`` wrote for a chain of ``cfg.method`` with p parameters on n rows, every field
        checked (arrays copied). Raises ValueError naming the first malformed field."""
        if not isinstance(d, dict):
            raise ValueError(f"a chain state must be a mapping, got {type(d).__name__}")
        sampler = cfg.sampler
        if not sampler.uses_gradient:
            return cls(sampler.state_from_dict(d, cfg, p))
        if "posterior" not in d:
            raise ValueError(f"the {cfg.method.upper()} state has no probe state ('posterior')")
        state = sampler.state_from_dict({k: v for k, v in d.items() if k != "posterior"}, cfg, p)
        return cls(state, ProbeState.from_dict(d["posterior"], n, cfg.n_probes, p,
                                               finite=state.stopped is None))


def initial_states(X, y, cfg: SamplerConfig, phi_init: np.ndarray, M: np.ndarray,
                   seeds: list[np.random.SeedSequence]) -> list[dict]:
    """Every chain's state before iteration 0, as plain data: chain c starts at ``phi_init[c]`` (p,) with
    its sampler and probe generators spawned from ``seeds[c]``; M (p, p) is the sampler's preconditioner or
    first proposal shape (a sampler on the exact density may evaluate its start: :class:`_Target`)."""
    sampler, target = cfg.sampler, _Target(X, y, cfg)
    states = []
    for c in range(cfg.n_chains):
        s_rng, p_rng = (np.random.default_rng(s) for s in seeds[c].spawn(2))
        chain = ChainState(sampler.initial(phi_init[c], cfg, M, s_rng, target),
                           ProbeState.initial(p_rng) if sampler.uses_gradient else None)
        states.append(chain.to_dict())
    return states


def run_segment(X, y, cfg_dict: dict, M, state: dict, n: int, run_key: str,
                chain_index: int | None = None, workers: list[str] | None = None) -> tuple[dict, dict]:
    """Advance one chain by up to n iterations from ``state`` (a :class:`ChainState` dict); returns
    (records, the next state's dict).

    X (n_rows, d), y (n_rows,) standardised data; M (p, p) the sampler's preconditioner. records: 'phi'
    (k, p) log-parameters and the sampler's ``records`` (k,), k ≤ n (shorter only when the chain stopped).
    Runs on a worker (or anywhere: its results depend on its arguments only; ``run_key`` only names the
    kernel operator kept for the run's next segments and the progress events, sent when ``chain_index`` is
    given). ``workers``: two or more worker addresses that compute the chain's kernel products (its
    :func:`daskgp.mcmc.layout.chain_layout` share), in a task only; None or one: this process computes
    them. The draws are the same either way."""
    cfg = SamplerConfig.from_dict(cfg_dict)
    p = np.shape(M)[0]
    chain = ChainState.from_dict(state, cfg, p, X.shape[0])
    if chain.sampler.stopped:
        return {"phi": np.empty((0, p))}, chain.to_dict()
    t_start = chain.sampler.t
    with products_on(workers) as client:
        target = _Target(X, y, cfg, run_key, ChainTicker(run_key, chain_index, t_start, t_start + n))
        if cfg.sampler.uses_gradient:
            # the probe state advances in place with the sampler's
            target.open_gradient(chain.probes, client, workers, f"chain{chain_index}")
        try:
            records = cfg.sampler.run(target, cfg, np.asarray(M, dtype=float), chain.sampler, n)
        except RunReleased:
            # nobody reads this segment's draws: it ends quietly (an exception would print the worker's
            # "Compute Failed" and its traceback in the user's terminal), its chain where it started
            records, chain = {"phi": np.empty((0, p))}, ChainState.from_dict(state, cfg, p, X.shape[0])
        if target.operator is not None and run_key in _RELEASED:
            # the run ended while this segment ran (a cancelled task runs to its end): the rows it cached
            # since the driver's release go too
            release_operators(run_key, here_only=False)
            target.operator.close()
    return records, chain.to_dict()


@contextlib.contextmanager
def products_on(workers):
    """The client through which a chain's products reach its ``workers`` (None when it computes them in its
    own process). The segment secedes from its worker's thread pool while it holds the client (distributed's
    ``worker_client``): it waits on its blocks most of the time, and a worker with one thread could not run
    a block of its own otherwise."""
    if not workers or len(workers) < 2:
        yield None
        return
    try:
        from distributed import get_worker, worker_client

        get_worker()
    except ValueError:  # not in a worker task: nothing to secede from; the process computes the products
        yield None
        return
    with worker_client() as client:
        yield client


class RunReleased(Exception):
    """Raised inside a segment by its target's next evaluation once the driver has released the run
    (:func:`release_operators`): the segment ends there."""


class _Target:
    """The posterior as a segment's sampler sees it (:class:`daskgp.mcmc.samplers.Target`): the exact
    log density (a dense Cholesky, built on first use) or the stochastic gradient through this worker's
    kernel operator (:meth:`open_gradient`); each evaluation counts an iteration on the progress ticker."""

    def __init__(self, X, y, cfg: SamplerConfig, run_key: str | None = None, tick=None):
        self.X, self.y, self.cfg, self.run_key, self.tick = X, y, cfg, run_key, tick
        self.posterior = self.operator = self._logp = self._logp_grad = self._force = None

    def open_gradient(self, probes: ProbeState, client=None, workers=None, name: str = "chain") -> None:
        """The stochastic gradient of the run's configuration, continuing the chain's ``probes``; its
        products on ``workers`` through ``client`` when given (:func:`chain_operator`)."""
        cfg = self.cfg
        self.operator = chain_operator(self.X, cfg, self.run_key, client, workers, name)
        self.posterior = chain_posterior(self.operator, self.y, cfg,
                                         redraw_every=cfg.sampler.redraw_every(cfg))
        self.posterior.state = probes

    def _check_released(self) -> None:
        if self.run_key in _RELEASED:  # the driver ended the run (target met, stopped): end this segment now
            raise RunReleased("the run ended while this segment ran")

    def grad(self, phi, t: int):
        self._check_released()
        if self.posterior is None:
            raise RuntimeError(f"sampler {self.cfg.method!r} reads the gradient but does not declare "
                               "uses_gradient")
        if self.tick is not None:
            self.tick(t)
        return self.posterior.stochastic_grad(phi, t)

    def log_density(self, phi) -> float:
        self._check_released()
        if self._logp is None:
            self._logp = _mh_target(self.X, self.y, self.cfg)
        if self.tick is not None:  # one evaluation per iteration
            self.tick()
        return self._logp(phi)

    def force(self, phi) -> np.ndarray:
        """∇ log p(φ | y) by a dense Cholesky in single precision where its error is small
        (:func:`daskgp.exact.marginal.single_precision_ok`), in double otherwise — a deterministic function
        of φ, for HMC's trajectories; NaN where it cannot be evaluated."""
        self._check_released()
        if self._force is None:
            self._force = _exact_target(self.X, self.y, self.cfg, single=True)
        lp, g = self._force(phi)
        return g if np.isfinite(lp) else np.full(len(g), np.nan)

    def log_density_and_grad(self, phi) -> tuple[float, np.ndarray]:
        """(log p(φ | y), ∇ log p) exact, by a dense Cholesky of all the rows (−inf and zeros where it
        cannot be evaluated); no progress tick (a trajectory evaluates it many times per iteration: the
        sampler ticks). A segment a block ahead of a met target ends at its next evaluation, as the stochastic
        gradient's does: HMC's in-flight blocks ran to their ends (20 s of a 130 s concrete run)."""
        self._check_released()
        if self._logp_grad is None:
            self._logp_grad = _exact_target(self.X, self.y, self.cfg)
        return self._logp_grad(phi)


def chain_posterior(op, y, cfg: SamplerConfig, redraw_every: int, rng=None) -> GPPosterior:
    """The GP log posterior of the run's model (Gamma priors) with the stochastic gradient of its solver
    settings (probes, ULISSE or CG and their tolerances, the preconditioner kept ``redraw_every`` iterations
    of the run's configuration) for the operator's n rows: one place for the chains and the warmup."""
    n, parts = op.n, cfg.specs()
    model, solver = parts.model, parts.solver
    return GPPosterior(op, y, GammaPrior(model.prior_shape, model.prior_rate), n_probes=solver.n_probes,
                       redraw_every=redraw_every, precond_every=solver.redraw_every, rng=rng,
                       solver=cfg.solver_for(n), es_tol=solver.es_tol, tol=solver.tol,
                       mean_tol=solver.mean_tol, beta=solver.beta,
                       roulette=solver.roulette, precond=solver.precond, precond_rank=cfg.precond_rank_for(n))


def _exact_target(X, y, cfg: SamplerConfig, single: bool = False):
    """HMC's target: the exact Cholesky log posterior and its gradient, (−inf, 0) where it cannot be
    evaluated (as :func:`_mh_target`); ``single``: in single precision where its error allows
    (:func:`daskgp.exact.posterior.exact_log_posterior`)."""
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
    prior = GammaPrior(cfg.prior_shape, cfg.prior_rate)
    X, y = np.ascontiguousarray(X, dtype=float), np.asarray(y, dtype=float)

    def logp_grad(phi):
        phi = np.asarray(phi, dtype=float)
        if np.abs(phi).max() > 25:
            return -np.inf, np.zeros(phi.size)
        try:
            v, g = exact_log_posterior(X, y, kernel, prior, phi, gradient=True, single=single)
        except (np.linalg.LinAlgError, FloatingPointError, ValueError):
            return -np.inf, np.zeros(phi.size)
        return float(v), g

    return logp_grad


def _mh_target(X, y, cfg: SamplerConfig):
    """MH's log target: the exact Cholesky log posterior, −inf where it cannot be evaluated."""
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
    prior = GammaPrior(cfg.prior_shape, cfg.prior_rate)

    def logp(phi) -> float:
        if np.abs(phi).max() > 25:  # far outside any sensible posterior: reject the proposal
            return -np.inf
        try:
            return float(exact_log_posterior(X, y, kernel, prior, phi, gradient=False))
        except np.linalg.LinAlgError:  # numerically singular covariance: reject
            return -np.inf

    return logp


# Kernel operators kept between a run's segments: per (run key, worker thread) for a chain computing in
# its own process, per (run key, chain name) for one whose blocks run on several workers.
_OPERATORS: dict = {}
_KEPT: dict = {}  # (run key, name) -> what a run's segments keep here besides the operator (kept())
_RELEASED: set[str] = set()  # runs already released: a cancelled segment finishing late releases its own
_OPERATORS_LOCK = threading.Lock()


def kept(run_key: str, name: str) -> dict:
    """A dict that run ``run_key``'s segments named ``name`` keep in this process from one to the next
    (the warmup's posterior, with its preconditioner), freed with the run's operators by
    :func:`release_operators`. Only an optimisation: a segment in a new process starts from an empty one."""
    with _OPERATORS_LOCK:
        return _KEPT.setdefault((run_key, name), {})


def chain_operator(X, cfg: SamplerConfig, run_key: str, client=None, workers=None, name: str = "chain"):
    """The chain's kernel operator for the run, kept between segments (its cached kernel rows are rebuilt
    in the same memory when θ moves): computing in this process, or — given a client and two or more
    ``workers`` — on those workers, its caches named after the run and ``name`` so that the chain's next
    segment finds them wherever it runs; through another client than the kept one's, an operator on a new
    executor under the same cache name (an executor is injected, never re-pointed). Row blocks of
    :func:`daskgp.mcmc.layout.chain_block_rows` either way, so the draws do not depend on the layout."""
    from ..compute.cluster import cluster_workers
    from ..compute.executors import DaskExecutor
    from ..compute.operator import KernelOperator

    spread = client is not None and workers is not None and len(workers) > 1
    key = (run_key, name) if spread else (run_key, threading.get_ident())
    with _OPERATORS_LOCK:
        op = _OPERATORS.get(key)  # its executor re-pins by itself after a lost worker
    if op is not None and (not spread or op.executor.client is client):
        return op
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
    device = None if cfg.device == "cpu" else cfg.device
    # a run resolves 'auto' from its start (SamplerConfig.for_start); a configuration used without a run
    # (a test's, a benchmark's operator) gets float32, the rows' dtype before 'auto' existed
    dtype = "float32" if cfg.cache_dtype == "auto" else cfg.cache_dtype
    options = dict(cache_dtype=dtype, block_rows=chain_block_rows(X.shape[0]))
    if spread:
        # the driver's layout predates any worker lost since: the survivors, or any live worker
        live = set(cluster_workers(client))
        workers = [w for w in workers if w in live] or sorted(live)
        executor = DaskExecutor(X, client, device, workers=workers, id=f"{run_key}/{name}")
        op = KernelOperator(X, kernel, 1.0, executor=executor, **options)
    else:
        try:
            from distributed import get_worker

            n_threads = 1 if get_worker().state.nthreads <= 1 else None
        except (ImportError, ValueError):
            n_threads = None
        op = KernelOperator(X, kernel, 1.0, mode="local", n_threads=n_threads, device=device, **options)
    with _OPERATORS_LOCK:
        _OPERATORS[key] = op
    return op


def release_operators(run_key: str, here_only: bool = True) -> int:
    """Close and forget every kernel operator this process keeps for run ``run_key``, and free the cached
    rows it holds for any chain of that run whose blocks ran here; returns how many operators. The driver
    runs it on every worker when a run ends, stops or fails. ``here_only`` False (a task that ends its own
    run, the warmup): an operator on several workers also frees its blocks there."""
    from ..compute.executors import release_worker_caches

    with _OPERATORS_LOCK:
        _RELEASED.add(run_key)
        ops = [_OPERATORS.pop(k) for k in [k for k in _OPERATORS if k[0] == run_key]]
        for k in [k for k in _KEPT if k[0] == run_key]:
            del _KEPT[k]
    for op in ops:
        if op.mode == "local":
            op.close()
        elif not here_only:  # from a task thread: its client may call the workers
            with contextlib.suppress(Exception):  # workers already gone have nothing left to free
                op.executor.close()
    release_worker_caches(f"{run_key}/")
    return len(ops)


def block_arrays(recs: list[dict], n: int, names, method: str) -> tuple[dict, dict]:
    """Every chain's records of one block (a stopped chain's are short, or empty) → the block's posterior
    {name: (chains, n)} in natural units and sample stats {record: (chains, n)} of the method's
    ``records`` plus 'diverged' (and 'grad_<name>' for a sampler with ``gradient_records``); missing
    draws are NaN in the posterior and True in flags (a stopped chain counts as warmup)."""
    C = len(recs)
    p = len(names)
    phi = np.full((C, n, p), np.nan)
    for c, r in enumerate(recs):
        phi[c, :len(r["phi"])] = r["phi"]
    stats = {}
    sampler = get_sampler(method)
    for key, dtype in sampler.records.items():
        arr = np.full((C, n), True if dtype is bool else np.nan, dtype=dtype)
        for c, r in enumerate(recs):
            if key in r:
                arr[c, :len(r[key])] = r[key]
        stats[key] = arr
    if sampler.gradient_records:
        for j, nm in enumerate(names):
            arr = np.full((C, n), np.nan)
            for c, r in enumerate(recs):
                if "grads" in r:
                    arr[c, :len(r["grads"])] = r["grads"][:, j]
            stats[f"grad_{nm}"] = arr
    stats["diverged"] = np.isnan(phi[:, :, 0])
    post = {nm: np.exp(phi[:, :, j]) for j, nm in enumerate(names)}
    return post, stats
