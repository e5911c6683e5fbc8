"""Several MCMC chains of the GP hyperparameter posterior, run in parallel on a Dask cluster, checkpointed.

A chain advances in segments of ``checkpoint_every`` iterations. Each segment is one Dask task: it rebuilds
the chain's sampler on the worker (the data are broadcast to the workers once; the kernel operator is kept
per worker thread between segments so its cached kernel rows are reused), restores the chain's exact state
(parameters, step size, gradient batch, probes, warm starts, random streams), runs, and returns the records
and the new state. A segment is a pure function of its inputs, so a task lost with its worker is recomputed
to the same draws, and a resumed run continues exactly where the uninterrupted one would have been.

The driver writes every block of ``checkpoint_every`` draws of all chains to a zarr store
(:mod:`daskgp.mcmc.runstore`) and commits the chain states with it, as plain data: an interruption loses at
most the block in flight, and :func:`resume` continues every chain with its random stream after checking
every committed draw and every chain state it reads back.

Methods: 'sgld' (SGLD with unbiased ULISSE gradients through the kernel operator; the step size decreases,
then freezes by the paper's rule) and 'mh' (adaptive random-walk Metropolis–Hastings on the exact Cholesky
posterior: small n only). Chains start from N(φ_MAP, H⁻¹) of the exact posterior on a random subset. SGLD's
preconditioner is that Laplace covariance scaled by subset/n (how a posterior covariance shrinks with n), so
step sizes mean the same on every data size (the paper's M with α scaled by subset/n).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import threading
import time
from dataclasses import asdict, dataclass, fields

import numpy as np

from .._version import __version__
from ..core.kernels import KERNELS, make_kernel
from ..core.priors import GammaPrior
from ..core.validation import check_positive, check_X, check_y
from ..exact.marginal import max_exact_n
from ..exact.posterior import GPPosterior, exact_log_posterior, subset_map
from .runstore import DrawStore, RunDamaged, RunLocked, check_appendable, check_new_run_path, read_committed
from .samplers import SGLD, MHState, RandomWalkMH, SGLDState, StepSchedule, rng_from_state

__all__ = ["SamplerConfig", "sample", "resume", "check_resumable", "fingerprint", "RunControl", "RunStopped"]

METHODS = ("sgld", "mh")


@dataclass
class SamplerConfig:
    """Everything that defines a run (stored with it, so ``resume`` rebuilds the same chains).

    Model: ``kernel`` ('rbf' | 'matern32' | 'matern52'), ``ard``; Gamma(``prior_shape``, ``prior_rate``)
    priors on every natural-scale parameter. Run: ``method``, ``n_chains``, ``n_iter`` iterations per chain,
    ``checkpoint_every`` iterations per block, ``seed``, ``subset_size`` rows for the MAP/Laplace start.
    SGLD: step sizes ``step_start`` → ``step_end`` with exponent ``step_gamma``; freeze when the ratio over a
    ``batch`` of gradients is below ``freeze_threshold``; ``n_probes`` Hutchinson probes redrawn every
    ``redraw_every`` iterations; ``solver`` 'ulisse' | 'cg' with ``es_tol``, ``tol``, ``beta``; ``precond``
    None | 'pivchol' of rank ``precond_rank``; a chain whose |φ| exceeds ``max_abs_phi`` stops (divergence).
    MH: ``n_adapt`` adaptation iterations (default a fifth of the run).
    """

    method: str = "sgld"
    n_chains: int = 4
    n_iter: int = 2000
    kernel: str = "rbf"
    ard: bool = False
    prior_shape: float = 2.0
    prior_rate: float = 1.0
    seed: int = 0
    checkpoint_every: int = 100
    subset_size: int = 500
    step_start: float = 0.1
    step_end: float = 1e-3
    step_gamma: float = 0.55
    batch: int = 100
    freeze_threshold: float = 0.01
    n_probes: int = 4
    redraw_every: int = 20
    solver: str = "ulisse"
    es_tol: float = 1e-2
    tol: float = 1e-6
    beta: float = 1.0
    precond: str | None = "pivchol"
    precond_rank: int = 100
    max_abs_phi: float = 30.0
    n_adapt: int | None = None

    def validate(self) -> SamplerConfig:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {self.kernel!r}")
        for name in ("n_chains", "n_iter", "checkpoint_every", "subset_size", "batch", "n_probes",
                     "redraw_every", "precond_rank"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("prior_shape", "prior_rate", "step_start", "step_end", "freeze_threshold", "es_tol",
                     "tol", "beta", "max_abs_phi"):
            check_positive(name, getattr(self, name))
        if self.step_start < self.step_end:
            raise ValueError(f"step_start ({self.step_start}) must be >= step_end ({self.step_end})")
        if not 0 < self.step_gamma <= 1:
            raise ValueError(f"step_gamma must be in (0, 1], got {self.step_gamma}")
        if self.solver not in ("ulisse", "cg"):
            raise ValueError(f"solver must be 'ulisse' or 'cg', got {self.solver!r}")
        if self.precond not in (None, "pivchol"):
            raise ValueError(f"precond must be None or 'pivchol', got {self.precond!r}")
        if self.n_adapt is not None and not 0 <= self.n_adapt < self.n_iter:
            raise ValueError(f"n_adapt must be in [0, n_iter), got {self.n_adapt}")
        if self.method == "sgld" and self.n_iter < self.batch:
            raise ValueError(f"SGLD needs n_iter >= batch ({self.batch}) to judge the freeze rule")
        return self

    @property
    def adapt(self) -> int:
        return self.n_iter // 5 if self.n_adapt is None else self.n_adapt

    @classmethod
    def from_dict(cls, d: dict) -> SamplerConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known}).validate()


def fingerprint(X, y) -> str:
    """sha1 of the (standardised) training data: a resumed run must see the same numbers."""
    h = hashlib.sha1()
    h.update(np.ascontiguousarray(X, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(y, dtype=np.float64).tobytes())
    return h.hexdigest()


# ------------------------------------------------------------------------------------------ worker side
# Kernel operators kept between a run's segments, per (run key, worker thread), with their cached kernel rows
# (n² · 8 bytes: 4 GB on house_8L). A run's driver releases them on every worker when the run ends, stops or
# fails, so a long-lived cluster (the dashboard's) does not keep the memory of finished runs.
_OPERATORS: dict = {}
_RELEASED: set[str] = set()  # runs already released: a cancelled segment finishing late releases its own
_OPERATORS_LOCK = threading.Lock()


def _operator(X, cfg: SamplerConfig, run_key: str):
    """This worker thread's kernel operator for the run, kept between segments (its cached kernel rows
    are rebuilt in the same memory when θ moves)."""
    from ..compute.operator import KernelOperator

    key = (run_key, threading.get_ident())
    with _OPERATORS_LOCK:
        op = _OPERATORS.get(key)
    if op is None:
        try:
            from distributed import get_worker

            n_threads = 1 if get_worker().state.nthreads <= 1 else None
        except (ImportError, ValueError):
            n_threads = None
        kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
        op = KernelOperator(X, kernel, 1.0, mode="local", n_threads=n_threads)
        with _OPERATORS_LOCK:
            _OPERATORS[key] = op
    return op


def release_operators(run_key: str) -> int:
    """Close and forget every kernel operator this process keeps for run ``run_key``, freeing their cached
    kernel rows; returns how many. The driver runs it on every worker when a run ends, stops or fails."""
    with _OPERATORS_LOCK:
        _RELEASED.add(run_key)
        ops = [_OPERATORS.pop(k) for k in [k for k in _OPERATORS if k[0] == run_key]]
    for op in ops:
        op.close()
    return len(ops)


def _grad_kwargs(cfg: SamplerConfig) -> dict:
    return dict(solver=cfg.solver, es_tol=cfg.es_tol, tol=cfg.tol, beta=cfg.beta, precond=cfg.precond,
                precond_rank=cfg.precond_rank)


def run_segment(X, y, cfg_dict: dict, M, state: dict, n: int, run_key: str):
    """Advance one chain by up to n iterations from ``state``; returns (records, new state).

    records: 'phi' (k, p) log-parameters and per-iteration statistics (k,), k ≤ n (shorter only when the
    chain stopped). Runs on a worker (or anywhere: its results depend on its arguments only; ``run_key``
    only names the kernel operator kept for the run's next segments)."""
    cfg = SamplerConfig.from_dict(cfg_dict)
    prior = GammaPrior(cfg.prior_shape, cfg.prior_rate)
    p = len(state["phi"])
    if state.get("stopped"):
        return {"phi": np.empty((0, p))}, state
    if cfg.method == "sgld":
        op = _operator(X, cfg, run_key)
        post = GPPosterior(op, y, prior, n_probes=cfg.n_probes, redraw_every=cfg.redraw_every,
                           **_grad_kwargs(cfg))
        post.set_state(state["posterior"])
        sampler = SGLD(post.stochastic_grad, p, M=M,
                       schedule=StepSchedule(cfg.step_start, cfg.step_end, cfg.n_iter, cfg.step_gamma),
                       batch=cfg.batch, freeze_threshold=cfg.freeze_threshold, max_abs_phi=cfg.max_abs_phi)
        st = SGLDState(np.array(state["phi"]), state["t"], state["alpha_frozen"], np.array(state["grads"]),
                       rng_from_state(state["rng"]))
        res = sampler.run(st, n)  # a failing gradient stops the chain with a message, draws kept
        k = len(res.draws)
        records = {"phi": res.draws, "step": res.step, "frozen": res.frozen, "ratio": res.ratio,
                   "cg_iterations": res.info.get("cg_iterations", np.zeros(k)).astype(float)[:k],
                   "n_products": res.info.get("n_products", np.zeros(k)).astype(float)[:k],
                   "seconds": res.seconds, "warmup": ~res.frozen}
        new = {"phi": st.phi, "t": st.t, "alpha_frozen": st.alpha_frozen, "grads": st.grads,
               "rng": st.rng.bit_generator.state, "posterior": post.get_state(), "stopped": st.stopped}
        if run_key in _RELEASED:  # the run ended while this segment ran (a cancelled task runs to its end)
            release_operators(run_key)
            op.close()  # already forgotten by the release, but it cached rows again since
        return records, new
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
    sampler = RandomWalkMH(lambda phi: _safe_logp(X, y, kernel, prior, phi), p, n_adapt=cfg.adapt)
    st = MHState(np.array(state["phi"]), state["logp"], state["t"], state["scale"], np.array(state["chol"]),
                 np.array(state["adapt_draws"]), np.array(state["adapt_accepted"]),
                 rng_from_state(state["rng"]))
    t_start = st.t
    res = sampler.run(st, n)
    records = {"phi": res.draws, "accepted": res.accepted, "logp": res.logp, "scale": res.scale,
               "seconds": res.seconds, "warmup": t_start + np.arange(n) < cfg.adapt}
    new = {"phi": st.phi, "logp": st.logp, "t": st.t, "scale": st.scale, "chol": st.chol,
           "adapt_draws": st.adapt_draws, "adapt_accepted": st.adapt_accepted,
           "rng": st.rng.bit_generator.state, "stopped": None}
    return records, new


def _safe_logp(X, y, kernel, prior, phi) -> float:
    if np.abs(phi).max() > 25:  # far outside any sensible posterior: reject the proposal
        return -np.inf
    try:
        return float(exact_log_posterior(X, y, kernel, prior, phi, gradient=False))
    except np.linalg.LinAlgError:  # numerically singular covariance: reject
        return -np.inf


# ------------------------------------------------------------------------------------------ driver side
class RunStopped(Exception):
    """Raised by :func:`sample` / :func:`resume` when their :class:`RunControl` was stopped; the draws
    committed so far stay in the store and the run can be resumed."""


class RunControl:
    """Pause, resume or stop a running :func:`sample` / :func:`resume` from another thread (a dashboard).

    Pausing stops submitting chain segments (those in flight finish and are written); stopping cancels the
    segments in flight at once and makes the run raise :class:`RunStopped`. ``paused_seconds`` is kept out
    of the run's wall time."""

    def __init__(self):
        self._running = threading.Event()
        self._running.set()
        self._lock = threading.Lock()
        self._stopped = False
        self._futures: set = set()
        self._client = None
        self._paused_at: float | None = None
        self.paused_seconds = 0.0

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        with self._lock:
            if self._running.is_set() and not self._stopped:
                self._paused_at = time.perf_counter()
                self._running.clear()

    def resume(self) -> None:
        with self._lock:
            if not self._running.is_set():
                self.paused_seconds += time.perf_counter() - (self._paused_at or time.perf_counter())
                self._paused_at = None
                self._running.set()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            futures, client = list(self._futures), self._client
        self._running.set()  # wake a paused driver so that it can exit
        if client is not None and futures:
            client.cancel(futures)

    def _check(self) -> None:
        """Called by the driver before each submission: blocks while paused, raises once stopped."""
        self._running.wait()
        if self._stopped:
            raise RunStopped("the run was stopped; its committed draws are kept")

    def _track(self, client, future) -> None:
        with self._lock:
            self._client = client
            self._futures.add(future)

    def _untrack(self, future) -> None:
        with self._lock:
            self._futures.discard(future)


def _initial_states(X, y, cfg: SamplerConfig, phi_init: np.ndarray, M: np.ndarray, seeds) -> list[dict]:
    states = []
    p = phi_init.shape[1]
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
    prior = GammaPrior(cfg.prior_shape, cfg.prior_rate)
    for c in range(cfg.n_chains):
        s_rng, p_rng = (np.random.default_rng(s) for s in seeds[c].spawn(2))
        if cfg.method == "sgld":
            states.append({"phi": phi_init[c], "t": 0, "alpha_frozen": None,
                           "grads": np.zeros((cfg.batch, p)), "rng": s_rng.bit_generator.state,
                           "posterior": {"probes": None, "x0": None, "rng": p_rng.bit_generator.state},
                           "stopped": None})
        else:
            mh = RandomWalkMH(lambda phi: _safe_logp(X, y, kernel, prior, phi), p, proposal_cov=M,
                              n_adapt=cfg.adapt)
            st = mh.init(phi_init[c], s_rng)
            states.append({"phi": st.phi, "logp": st.logp, "t": 0, "scale": st.scale, "chol": st.chol,
                           "adapt_draws": st.adapt_draws, "adapt_accepted": st.adapt_accepted,
                           "rng": st.rng.bit_generator.state, "stopped": None})
    return states


def check_method_fits(cfg: SamplerConfig, n: int, memory_bytes: float | None = None) -> None:
    """MH needs a dense Cholesky per iteration: refuse n where it would not fit in memory."""
    if cfg.method == "mh":
        limit = max_exact_n(memory_bytes)
        if n > limit:
            raise MemoryError(f"MH uses the exact Cholesky: n={n} needs {2 * 8 * n * n / 2**30:.1f} GiB, "
                              f"more than this machine can spare (n <= {limit}); use method='sgld'")


def sample(X, y, config: SamplerConfig | None = None, *, out: str, client=None,
           data_spec: dict | None = None, overwrite: bool = False, progress=None,
           control: RunControl | None = None, on_block=None, **overrides):
    """Run ``config.n_chains`` chains in parallel on the Dask cluster, checkpointing to the zarr store
    ``out``.

    X (n, d), y (n,): standardised training data. ``data_spec`` (e.g. {'dataset': 'concrete'} or
    {'csv': path, 'target': col}) is stored so ``resume`` can reload the data by itself.
    progress(done (chains,) iterations, n_iter, rhat or None, messages): called after every block;
    on_block(posterior, sample_stats, first_draw): the block just committed ({name: (chains, B)} arrays);
    control: a :class:`RunControl` to pause / resume / stop the run from another thread.
    Returns the run as an ArviZ DataTree (see :func:`daskgp.mcmc.diagnostics.open_run`).
    """
    cfg = SamplerConfig.from_dict({**asdict(config or SamplerConfig()), **overrides})
    X = check_X(X)
    y = check_y(y, X.shape[0])
    check_method_fits(cfg, X.shape[0])
    check_new_run_path(out, overwrite)  # before the MAP: a refused output costs nothing
    n = X.shape[0]
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
    prior = GammaPrior(cfg.prior_shape, cfg.prior_rate)
    t0 = time.perf_counter()
    seeds = np.random.SeedSequence(cfg.seed).spawn(cfg.n_chains + 2)
    phi_map, H_inv = subset_map(X, y, kernel, 0.3, prior=prior, size=cfg.subset_size,
                                rng=np.random.default_rng(seeds[-1]))
    m = min(cfg.subset_size, n)
    M = H_inv * (m / n)  # SGLD preconditioner; MH's initial proposal shape
    phi_init = np.random.default_rng(seeds[-2]).multivariate_normal(phi_map, H_inv, size=cfg.n_chains)
    states = _initial_states(X, y, cfg, phi_init, M, seeds)
    names = kernel.param_names + ["noise"]
    attrs = {"config": asdict(cfg), "param_names": names, "data": data_spec or {}, "n": n, "d": X.shape[1],
             "fingerprint": fingerprint(X, y), "phi_map": phi_map.tolist(), "laplace_cov": H_inv.tolist(),
             "M": M.tolist(), "phi_init": phi_init.tolist(), "daskgp_version": __version__,
             "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    store = DrawStore.create(out, attrs, cfg.checkpoint_every, overwrite=overwrite)
    setup = time.perf_counter() - t0
    ckpt = {"states": states, "elapsed": setup, "messages": {}}
    return _drive(store, X, y, cfg, M, ckpt, names, client, (progress, control, on_block))


def resume(out: str, *, X=None, y=None, client=None, progress=None, control: RunControl | None = None,
           on_block=None):
    """Continue an interrupted run to its configured length, every chain from its last committed state.

    The data are reloaded from the run's data spec unless X, y are given; either way they must match the
    fingerprint stored with the run. A run that is complete is returned as it is (no cluster is started).
    Raises :class:`daskgp.mcmc.runstore.RunError` (one line) when the run is damaged, locked by a live writer
    or cannot be continued."""
    store, committed = DrawStore.open(out)
    attrs, ckpt = committed.attrs, committed.checkpoint
    try:
        cfg, names, M = _resume_plan(attrs, ckpt, store.path)
        finished = store.n_draws >= cfg.n_iter
        if X is None and not finished:
            from ..core.datasets import load_spec

            ds = load_spec(attrs["data"])
            X, y = ds.X, ds.y
        if X is not None:
            X = check_X(X)
            y = check_y(y, X.shape[0])
            if fingerprint(X, y) != attrs["fingerprint"]:
                raise ValueError(f"the data given to resume {out} differ from the data the run started with")
        if finished:
            store.close()
            from .diagnostics import open_run

            return open_run(store.path)
    except BaseException:
        store.close()
        raise
    history = {**{nm: [committed.data["posterior"][nm]] for nm in names},
               "warmup": [committed.data["sample_stats"]["warmup"]]}
    return _drive(store, X, y, cfg, M, ckpt, names, client, (progress, control, on_block), history)


def _resume_plan(attrs: dict, ckpt: dict, where: str) -> tuple[SamplerConfig, list[str], np.ndarray]:
    """The configuration, parameter names and preconditioner of a run to continue, after checking that it
    can be continued (not salvaged, every chain state well formed)."""
    check_appendable(where, ckpt)
    try:
        cfg = SamplerConfig.from_dict(attrs["config"])
        names, M = list(attrs["param_names"]), np.array(attrs["M"], dtype=float)
    except (KeyError, TypeError, ValueError) as e:
        raise RunDamaged(f"{where}/zarr.json: the run's configuration is malformed ({e})") from None
    check_states(ckpt["states"], cfg, len(names), attrs.get("n"), ckpt["n_draws"], where)
    return cfg, names, M


def check_resumable(path):
    """Everything :func:`resume` checks before it runs a chain — an intact run, no live writer, well-formed
    chain states — reading only (no lock is taken). Returns (the run's committed content, its config)."""
    c = read_committed(path)
    if c.lock is not None and c.lock.state != "stale":
        raise RunLocked(f"{c.path} cannot be resumed: {c.lock.describe()}")
    cfg, _, _ = _resume_plan(c.attrs, c.checkpoint, c.path)
    return c, cfg


def check_states(states, cfg: SamplerConfig, p: int, n, n_draws: int, where: str = "the checkpoint") -> None:
    """Check chain states read back from a checkpoint before any worker runs them: the fields, shapes and
    dtypes :func:`run_segment` expects for ``cfg.method``, finite parameters, valid random-generator states,
    and an iteration count equal to the committed draws (unless the chain stopped). Raises RunDamaged."""
    def bad(c, what):
        return RunDamaged(f"{where}: the state of chain {c} is malformed ({what}); daskgp repair cannot "
                          "rebuild it: sample the run again")

    if not isinstance(states, list) or len(states) != cfg.n_chains:
        raise RunDamaged(f"{where}: expected {cfg.n_chains} chain states, found "
                         f"{len(states) if isinstance(states, list) else type(states).__name__}")

    def array(v, shape, kind="f"):
        return (isinstance(v, np.ndarray) and v.dtype.kind == kind and v.shape == shape
                and (kind != "f" or np.all(np.isfinite(v))))

    def number(v, positive=False):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and \
            (not positive or v > 0)

    own = ({"alpha_frozen", "grads", "posterior"} if cfg.method == "sgld" else
           {"logp", "scale", "chol", "adapt_draws", "adapt_accepted"})
    fields = {"phi", "rng", "t", "stopped"} | own
    for c, st in enumerate(states):
        if not isinstance(st, dict) or set(st) != fields:
            raise bad(c, f"fields {sorted(st) if isinstance(st, dict) else type(st).__name__}")
        if not array(st["phi"], (p,)):
            raise bad(c, "phi")
        if not (type(st["t"]) is int and 0 <= st["t"] <= cfg.n_iter) or \
                (st["stopped"] is None and st["t"] != n_draws):
            raise bad(c, f"iteration {st['t']!r} for {n_draws} committed draws")
        if not (st["stopped"] is None or isinstance(st["stopped"], str)):
            raise bad(c, "stopped")
        rngs = [st["rng"]]
        if cfg.method == "sgld":
            post = st["posterior"]
            if not (st["alpha_frozen"] is None or number(st["alpha_frozen"], positive=True)):
                raise bad(c, "alpha_frozen")
            if not array(st["grads"], (cfg.batch, p)):
                raise bad(c, "grads")
            if not (isinstance(post, dict) and set(post) == {"probes", "x0", "rng"}):
                raise bad(c, "posterior")
            for key, cols in (("probes", cfg.n_probes), ("x0", cfg.n_probes + 1)):
                if post[key] is not None and not array(post[key], (n, cols)):
                    raise bad(c, f"posterior {key}")
            rngs.append(post["rng"])
        else:
            k = cfg.adapt
            if not (number(st["logp"]) and number(st["scale"], positive=True) and array(st["chol"], (p, p))
                    and array(st["adapt_draws"], (k, p)) and array(st["adapt_accepted"], (k,), "b")):
                raise bad(c, "MH proposal or adaptation state")
        for r in rngs:
            try:
                rng_from_state(r)
            except ValueError as e:
                raise bad(c, str(e)) from None


def _running_rhat(history: dict[str, list]) -> float | None:
    """Largest rank R-hat over parameters on the draws so far, cut to their sampling phase by the rule of
    the run summaries (:func:`daskgp.mcmc.diagnostics.running_diagnostics`); None while too short to judge."""
    import xarray as xr

    from .diagnostics import running_diagnostics

    def group(keys):
        return xr.Dataset({k: (("chain", "draw"), np.concatenate(history[k], axis=1)) for k in keys})

    dt = xr.DataTree.from_dict({"posterior": group([k for k in history if k != "warmup"]),
                                "sample_stats": group(["warmup"])})
    rhat = running_diagnostics(dt, ess=False)["rhat"]
    return max(rhat.values()) if rhat else None


def _drive(store: DrawStore, X, y, cfg: SamplerConfig, M, ckpt: dict, names, client, hooks,
           history: dict | None = None):
    """Run the driver loop on a borrowed client and release the store whatever happens. ``history``: the
    committed draws and warmup flags of a resumed run ({name: [(chains, draws)]}), for the running R-hat."""
    from ..compute.cluster import borrowed_client

    try:
        with borrowed_client(client) as client:
            _loop(store, X, y, cfg, M, ckpt, names, client, hooks,
                  history or {k: [] for k in [*names, "warmup"]})
    finally:
        store.close()  # releases the run; a new run that committed nothing is deleted
    from .diagnostics import open_run

    return open_run(store.path)


def _loop(store: DrawStore, X, y, cfg: SamplerConfig, M, ckpt: dict, names, client, hooks, history) -> None:
    """The driver loop: submit each chain's next segment as soon as its last one returns, write every
    complete block in order, commit."""
    progress, control, on_block = hooks
    control = control or RunControl()
    C, B, N = cfg.n_chains, cfg.checkpoint_every, cfg.n_iter
    states = list(ckpt["states"])
    elapsed0 = float(ckpt["elapsed"])
    messages = dict(ckpt.get("messages", {}))
    done0 = store.n_draws
    t_start = time.perf_counter()
    paused0 = control.paused_seconds
    cfg_dict = asdict(cfg)
    run_key = f"{fingerprint(X, y)[:12]}-{secrets.token_hex(4)}"  # this drive's operators on the workers
    pending: dict[int, dict[int, dict]] = {}  # block index -> {chain: records}
    futures: dict = {}  # key -> (chain, block, future)
    try:
        from distributed import as_completed

        Xf, yf = client.scatter([X, y], broadcast=True, hash=False)
        Mf = np.asarray(M)
        ac = as_completed()

        def submit(c: int, block: int):
            control._check()
            n = min(B, N - block * B)
            f = client.submit(run_segment, Xf, yf, cfg_dict, Mf, states[c], n, run_key, pure=False,
                              key=f"daskgp-chain{c}-block{block}-{run_key}")
            futures[f.key] = (c, block, f)
            control._track(client, f)
            ac.add(f)

        next_block = done0 // B
        if done0 < N:
            for c in range(C):
                submit(c, next_block)
        expected_blocks = math.ceil(N / B)
        for f in ac:
            c, block, _ = futures.pop(f.key)
            control._untrack(f)
            if control.stopped:
                raise RunStopped("the run was stopped; its committed draws are kept")
            records, new_state = f.result()
            pending.setdefault(block, {})[c] = (records, new_state)
            if block + 1 < expected_blocks:
                states[c] = new_state  # this chain's next segment starts from here
                submit(c, block + 1)
            while next_block in pending and len(pending[next_block]) == C:
                blk = pending.pop(next_block)
                n = min(B, N - next_block * B)
                recs = [blk[c][0] for c in range(C)]
                chain_states = [blk[c][1] for c in range(C)]
                for c in range(C):
                    if chain_states[c].get("stopped") and str(c) not in messages:
                        messages[str(c)] = chain_states[c]["stopped"]
                post, stats = _block_arrays(recs, n, names, cfg.method)
                elapsed = elapsed0 + time.perf_counter() - t_start - (control.paused_seconds - paused0)
                store.append(post, stats, {"states": chain_states, "elapsed": elapsed, "messages": messages})
                for nm in names:
                    history[nm].append(post[nm])
                history["warmup"].append(stats["warmup"])
                if on_block is not None:
                    on_block(post, stats, next_block * B)
                next_block += 1
                if progress is not None:
                    progress([store.n_draws] * C, N, _running_rhat(history), messages)
    except BaseException:
        client.cancel([f for _, _, f in futures.values()])
        raise
    finally:
        _release_on_workers(client, run_key)


def _release_on_workers(client, run_key: str) -> None:
    """Free the run's kernel operators on every worker; a cluster already gone has nothing to free."""
    try:
        client.run(release_operators, run_key)
    except Exception:  # a lost scheduler or a closing client: the workers' memory went with them
        pass


# the per-iteration records of each method and their dtypes: every block stores the same arrays
RECORDS = {"sgld": {"step": float, "frozen": bool, "ratio": float, "cg_iterations": float,
                    "n_products": float, "seconds": float, "warmup": bool},
           "mh": {"accepted": bool, "logp": float, "scale": float, "seconds": float, "warmup": bool}}


def _block_arrays(recs: list[dict], n: int, names, method: str) -> tuple[dict, dict]:
    """Per-chain records (a stopped chain's are short, or empty) → (chains, n) arrays of the method's
    records; missing draws are NaN in the posterior and True in flags (a stopped chain counts as warmup)."""
    C = len(recs)
    p = len(names)
    phi = np.full((C, n, p), np.nan)
    for c, r in enumerate(recs):
        phi[c, :len(r["phi"])] = r["phi"]
    stats = {}
    for key, dtype in RECORDS[method].items():
        arr = np.full((C, n), True if dtype is bool else np.nan, dtype=dtype)
        for c, r in enumerate(recs):
            if key in r:
                arr[c, :len(r[key])] = r[key]
        stats[key] = arr
    stats["diverged"] = np.isnan(phi[:, :, 0])
    post = {nm: np.exp(phi[:, :, j]) for j, nm in enumerate(names)}
    return post, stats
