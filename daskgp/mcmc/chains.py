"""The driver of a run: several MCMC chains of the GP hyperparameter posterior, in parallel on a Dask
cluster, checkpointed (Filippone & Engler 2015, section 4).

A chain advances in segments of ``checkpoint_every`` iterations, each one Dask task
(:func:`daskgp.mcmc.segments.run_segment`, a pure function of the chain's plain-data state). The driver
submits each chain's next segment as soon as its last one returns, writes every block of
``checkpoint_every`` draws of all chains to a zarr store (:mod:`daskgp.runs.draws`) and commits the chain
states with it: an interruption loses at most the block in flight, and :func:`resume` continues every chain
with its random stream after checking every committed draw and every chain state it reads back. A
:class:`daskgp.mcmc.control.RunControl` pauses or stops it from another thread.

Methods: the samplers registered in :mod:`daskgp.mcmc.samplers` — 'sghmc' (underdamped Langevin on unbiased
ULISSE / CG gradients through the kernel operator, the gradient noise subtracted from the momentum refresh),
'sgld' (the paper's SGLD on the same gradients; the step size decreases, then freezes by the paper's rule)
and 'mh' (adaptive random-walk Metropolis–Hastings on the exact Cholesky posterior: small n only). The
driver asks a sampler what it needs (:class:`daskgp.mcmc.samplers.Sampler`), never its name.

Warmup ('map', the default): before the chains, one task climbs from the MAP of a random subset to the
full-data mode by stochastic gradient ascent and estimates the Laplace covariance there
(:mod:`daskgp.exact.mode`; MH uses the exact Cholesky MAP); the chains start from N(mode, (overdispersion)²·
Laplace) and the Laplace covariance is the samplers' metric M. With 'subset' the chains start from
N(φ_MAP, H⁻¹) of the subset and M is H⁻¹ scaled by subset/n (the paper's M with α scaled by subset/n).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from concurrent.futures import CancelledError
from dataclasses import asdict, replace

import numpy as np

from .._version import __version__
from ..compute.precision import FLOAT32_MAX_BOUND
from ..core.kernels import make_kernel
from ..core.plaindata import expect_keys
from ..core.priors import GammaPrior
from ..core.validation import check_not_degenerate, check_X, check_y
from ..exact.posterior import subset_map
from ..runs.draws import (
    DrawStore,
    RunDamaged,
    RunError,
    RunLocked,
    check_appendable,
    check_new_run_path,
    read_committed,
)
from ..runs.fits import is_fit_store
from .config import SamplerConfig, check_method_fits, check_run_size, fingerprint
from .control import RunControl, RunStopped
from .diagnostics import RunStatus, run_status
from .layout import chain_layout
from .segments import (
    ChainState,
    block_arrays,
    initial_states,
    progress_topic,
    release_operators,
    run_segment,
)
from .warmup import (
    DONE,
    FULL_LAPLACE,
    WarmupStore,
    check_warmup_state,
    warmup_path,
    warmup_segment,
    warmup_start,
)

__all__ = ["sample", "resume", "check_resumable", "check_states", "extended_config", "RunStatus"]

log = logging.getLogger(__name__)


def sample(X, y, config: SamplerConfig | None = None, *, out: str, client=None,
           data_spec: dict | None = None, data_meta: dict | None = None, overwrite: bool = False,
           progress=None, control: RunControl | None = None, on_block=None, on_warmup=None, **overrides):
    """Run ``config.n_chains`` chains in parallel on the Dask cluster, checkpointing to the zarr store
    ``out``.

    X (n, d), y (n,): standardised training data, stored with the run (constant_data / observed_data) so
    that it resumes and predicts with nothing but itself; ``data_meta`` (:meth:`daskgp.Dataset.meta`: names
    and the scalers that undo the standardisation) is stored with them; ``data_spec`` (e.g. {'dataset':
    'concrete'} or {'csv': path, 'target': col}) records where the data came from.
    With ``target_ess`` (a config field) the run stops at the first committed block where every parameter's
    bulk and tail ESS reach it and every R-hat is below ``target_rhat`` (``n_iter`` is then only a cap).
    progress(status): called after every committed block with a :class:`daskgp.mcmc.diagnostics.RunStatus`
    (iterations, R-hat, ESS, seconds per effective sample, time to the target);
    on_block(posterior, sample_stats, first_draw): the block just committed ({name: (chains, B)} arrays);
    control: a :class:`RunControl` to pause / resume / stop the run from another thread;
    on_warmup(event): before the chains, the warmup's progress — a dict {'stage', 'k' (gradients done in the
    stage), 'cap' (its most), 'seconds' (in the stage), 'total' (since the warmup began)}, first with stage
    'subset MAP' (on the client), then the stages of :data:`daskgp.mcmc.segments.WARMUP_STAGES` (from the
    worker, about every second; on the client's event loop).
    Returns the run as an ArviZ DataTree (see :func:`daskgp.mcmc.diagnostics.open_run`).
    """
    # a given config is already resolved; overrides alone resolve their method's defaults (e.g. n_probes)
    cfg = SamplerConfig.from_dict({**(asdict(config) if config is not None else {}), **overrides})
    X = check_X(X)
    y = check_y(y, X.shape[0])
    cfg = cfg.for_rows(X.shape[0])  # method 'auto': the sampler the data's size calls for, stored as such
    check_not_degenerate(X.std(axis=0), y.std(), "X, y", X.mean(axis=0), y.mean())
    _warn_unless_standardised(X, y)
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
    check_method_fits(cfg, X.shape[0], n_params=kernel.n_params + 1)
    check_new_run_path(out, overwrite)  # before the MAP: a refused output costs nothing
    check_no_warmup_beside(out, overwrite)
    prior = GammaPrior(cfg.prior_shape, cfg.prior_rate)
    t0 = time.perf_counter()
    if on_warmup is not None:
        on_warmup({"stage": "subset MAP", "k": 0, "cap": 1, "seconds": 0.0, "total": 0.0})
    phi_map, H_inv = subset_map(X, y, kernel, 0.3, prior=prior, size=cfg.subset_size,
                                rng=np.random.default_rng(_seeds(cfg)[cfg.n_chains + 1]))
    cfg = _rows_dtype(cfg, X.shape[0], phi_map, H_inv, on_warmup, time.perf_counter() - t0)
    start = {"config": asdict(cfg), "data": data_spec or {}, "data_meta": data_meta or {},
             "fingerprint": fingerprint(X, y), "overwrite": bool(overwrite), "phi_map": phi_map,
             "laplace_cov": H_inv, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
             "setup_seconds": time.perf_counter() - t0}
    return _begin(X, y, cfg, start, None, out, client, (progress, control, on_block), on_warmup)


def _rows_dtype(cfg: SamplerConfig, n: int, phi_map, H_inv, on_warmup, seconds: float) -> SamplerConfig:
    """``cfg`` with its cached rows' dtype resolved from the subset MAP in its covariance scaled to n
    (:meth:`SamplerConfig.for_start`); float64 instead of float32 is said in one line (every product then
    reads twice the memory)."""
    cfg, bound = cfg.for_start(n, phi_map, np.asarray(H_inv) * (min(cfg.subset_size, n) / n))
    if bound is not None and cfg.cache_dtype == "float64":
        note = (f"kernel rows cached in float64, not float32: the noise variance is small against the "
                f"kernel's (ε₃₂·n·s/σ² up to {bound:.2g} > {FLOAT32_MAX_BOUND}), where float32 rounding "
                "would stall CG; each product reads twice the memory")
        if on_warmup is not None:
            _tell(on_warmup, {"stage": "subset MAP", "k": 1, "cap": 1, "seconds": seconds, "total": seconds,
                              "note": note})
        else:
            log.info("daskgp: %s", note)
    return cfg


def _seeds(cfg: SamplerConfig) -> list:
    """The run's random streams, children of its seed by index: chains 0..C−1, then the start spread, the
    subset, the warmup's probes."""
    return np.random.SeedSequence(cfg.seed).spawn(cfg.n_chains + 3)


def _begin(X, y, cfg: SamplerConfig, start: dict, warm_state: dict | None, out: str, client, hooks,
           on_warmup):
    """From the subset MAP to the driven chains: the warmup (``warm_state``: where a resumed one stands),
    the chains' starts, the new run, the driver. ``start``: the run's beginning as plain data (its
    configuration, data spec, subset MAP and Laplace covariance), kept with the warmup's checkpoint."""
    from ..compute.cluster import borrowed_client

    n, C, seeds = X.shape[0], cfg.n_chains, _seeds(cfg)
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
    phi_map, H_inv = np.asarray(start["phi_map"], dtype=float), np.asarray(start["laplace_cov"], dtype=float)
    M = H_inv * (min(cfg.subset_size, n) / n)  # the subset's posterior covariance scaled to n data
    control = hooks[1] or RunControl()
    hooks = (hooks[0], control, hooks[2])
    with borrowed_client(client) as client, contextlib.ExitStack() as held:
        _layout(client, cfg, n)  # a layout the cluster cannot hold is refused before the warmup
        centre, spread, warm = phi_map, H_inv, None
        route = cfg.warmup_route(n)
        if route != "subset":
            if warm_state is not None or route == "ascent":
                ckpt = held.enter_context(WarmupStore(warmup_path(out)).writing())
                warm = _warmup(X, y, cfg, start, warm_state, seeds[C + 2], client, control, on_warmup, ckpt)
                hooks = (hooks[0], control, _removing_warmup(ckpt, hooks[2]))
                cfg = _tuned_from_warmup(cfg, warm)
            else:
                warm = _exact_warmup(X, y, cfg, kernel, phi_map, seeds[C + 2], on_warmup)
            centre, M = warm["phi"], warm["cov"]
            spread = cfg.overdispersion**2 * M
        phi_init = np.random.default_rng(seeds[C]).multivariate_normal(centre, spread, size=C)
        states = initial_states(X, y, cfg, phi_init, M, seeds)
        names = kernel.param_names + ["noise"]
        meta = start["data_meta"]
        attrs = {"config": asdict(cfg), "param_names": names, "data": start["data"], "n": n,
                 "d": X.shape[1], "fingerprint": start["fingerprint"], "phi_map": phi_map.tolist(),
                 "laplace_cov": H_inv.tolist(), "M": M.tolist(), "phi_init": phi_init.tolist(),
                 "warmup": _plain(warm) if warm is not None else {"method": "subset"},
                 "data_meta": {k: v for k, v in meta.items()
                               if k not in ("x_center", "x_scale")},  # those are arrays in constant_data
                 "daskgp_version": __version__, "created": start["created"]}
        stored = {"X": X, "y": y, **{k: np.asarray(meta[k], dtype=float)
                                     for k in ("x_center", "x_scale") if k in meta}}
        store = DrawStore.create(out, attrs, cfg.checkpoint_every, overwrite=start["overwrite"],
                                 warmup_draws=min(cfg.adapt, cfg.n_iter), data=stored)
        setup = float(start["setup_seconds"]) + (float(warm.get("seconds", 0.0)) if warm else 0.0)
        ckpt = {"states": states, "elapsed": setup, "messages": {}}
        return _drive(store, X, y, cfg, M, ckpt, names, client, hooks)


def _tuned_from_warmup(cfg: SamplerConfig, warm: dict) -> SamplerConfig:
    """The configuration with the probes (``cfg.probes_from_noise``) and the adaptation length
    (``cfg.adapt_from_noise``; at most a fifth of the cap, as any target run's) that the gradient noise
    measured by a stochastic warmup calls for, where the warmup
    converged to a positive definite Laplace covariance — a saddle-free or subset metric may be far off, and
    keeps the full adaptation to correct it. A pure function of the warmup's result: a resumed warmup
    gives the same length."""
    noise = warm.get("noise_at_mode")
    trusted = warm.get("converged") and warm.get("cov_from") == FULL_LAPLACE
    if not (noise and trusted):
        return cfg
    noise = float(noise)
    if cfg.probes_from_noise:
        probes = cfg.sampler.probes_from_noise(cfg, noise)
        if probes is not None and probes != cfg.n_probes:
            noise *= cfg.n_probes / probes  # Hutchinson's variance: 1/N_r
            cfg = replace(cfg, n_probes=probes)
    if not cfg.adapt_from_noise:
        return cfg
    n_adapt = cfg.sampler.adaptation_from_noise(cfg, noise)
    if n_adapt is None:
        return cfg
    return replace(cfg, n_adapt=min(n_adapt, cfg.n_iter // 5))


def _removing_warmup(ckpt: WarmupStore, on_block):
    """``on_block`` that first removes the warmup's checkpoint: the run's first committed block holds what
    the warmup found (its attributes), so from then on the run itself resumes."""
    def hook(*block):
        if ckpt.exists():
            ckpt.remove()
        if on_block is not None:
            on_block(*block)

    return hook


def check_no_warmup_beside(out: str, overwrite: bool) -> None:
    """A new run at ``out`` while the warmup of another is checkpointed beside it: refused (resume that one)
    unless ``overwrite``, which removes it (refused while a live process writes it)."""
    ckpt = WarmupStore(warmup_path(out))
    if not ckpt.exists():
        return
    if not overwrite:
        raise FileExistsError(f"the warmup of a run at {out} is checkpointed in {ckpt.path}: resume it "
                              "(daskgp sample --resume), or overwrite it explicitly")
    if not is_fit_store(ckpt.path):
        raise ValueError(f"refusing to overwrite {ckpt.path}: it is not a daskgp warmup checkpoint")
    ckpt.remove()


def _warn_unless_standardised(X, y) -> None:
    """The model (zero mean, Gamma(2, 1) priors on σ², l and the noise) is for standardised data; raw units
    (``Dataset.X`` rather than ``X_std``) would be sampled under priors that mean something else. Far off
    only (a column's |mean| > 3 or sd outside [0.1, 10]; a constant column, sd 0 after standardising, is
    not counted): a subset of standardised rows is not flagged."""
    import warnings

    means, sds = np.append(X.mean(axis=0), y.mean()), np.append(X.std(axis=0), y.std())
    if np.any(np.abs(means) > 3) or np.any(((sds > 1e-8) & (sds < 0.1)) | (sds > 10)):
        warnings.warn("sample() models standardised data (zero mean, unit variance), and these are not: pass "
                      "Dataset.X_std / y_std, or use BayesianGPRegressor, which standardises and predicts "
                      "in the data's units", UserWarning, stacklevel=3)


def _exact_warmup(X, y, cfg: SamplerConfig, kernel, phi_sub, seed, on_warmup=None) -> dict:
    """The 'map' warmup by the exact Cholesky MAP and Hessian on all n rows: MH's (it runs only where n
    fits a Cholesky), and a gradient sampler's up to EXACT_WARMUP_MAX_N rows, where it is faster than the
    stochastic ascent and exact. In the client's process: at that size it is not worth a task."""
    t0 = time.perf_counter()
    if on_warmup is not None:
        on_warmup({"stage": "exact MAP", "k": 0, "cap": 1, "seconds": 0.0, "total": 0.0, "n": X.shape[0]})
    prior = GammaPrior(cfg.prior_shape, cfg.prior_rate)
    phi, cov = subset_map(X, y, kernel, float(np.exp(phi_sub[-1])), prior=prior, size=X.shape[0],
                          rng=np.random.default_rng(seed))
    seconds = time.perf_counter() - t0
    if on_warmup is not None:
        on_warmup({"stage": "done", "k": 0, "cap": 1, "seconds": seconds, "total": seconds, "route": "exact"})
    return {"method": "map", "phi": phi, "cov": cov, "cov_from": "exact Laplace (Cholesky)",
            "iterations": 0, "converged": True, "seconds": seconds}


def _warmup(X, y, cfg: SamplerConfig, start: dict, state: dict | None, seed, client, control: RunControl,
            on_warmup, ckpt: WarmupStore) -> dict:
    """The 'map' warmup of a gradient sampler (:mod:`daskgp.mcmc.warmup`): segments of at most
    ``checkpoint_every`` gradients, each a task on the run's workers (the whole cluster's, by the layout
    rule for one chain), its state committed to ``ckpt`` with the run's ``start``; from ``state`` when
    resumed, else from the subset MAP in the subset's scaled Laplace metric."""
    control._check()
    n = X.shape[0]
    if state is None:
        M_sub = np.asarray(start["laplace_cov"], dtype=float) * (min(cfg.subset_size, n) / n)
        state = warmup_start(start["phi_map"], M_sub, int(seed.generate_state(1)[0]))
    run_key = f"{start['fingerprint'][:12]}-warmup-{secrets.token_hex(4)}"
    (workers,) = _layout(client, replace(cfg, n_chains=1), n)  # one chain: the whole cluster
    if on_warmup is not None:
        client.subscribe_topic(progress_topic(run_key), lambda event: _tell(on_warmup, event[1]))
    cfg_dict = asdict(cfg)
    segment = 0
    try:
        while state["stage"] < DONE:
            for attempt in range(_SEGMENT_RETRIES + 1):
                # on the first of its workers (preferred, not required): computing in its own process, a
                # segment elsewhere would cache the kernel rows a second time
                f = client.submit(warmup_segment, X, y, cfg_dict, state, run_key, workers, pure=False,
                                  key=f"daskgp-warmup-{run_key}-{segment}-{attempt}", workers=workers[:1],
                                  allow_other_workers=True)
                control._track(client, f)
                try:
                    state = f.result()
                    break
                except CancelledError:
                    # stopped; or, spread over several workers, lost with its driver's worker as a chain's
                    # segment can be: a pure function of its arguments, so run again to the same end point
                    if control.stopped or attempt == _SEGMENT_RETRIES:
                        raise RunStopped(_warmup_kept(ckpt)) from None
                    log.warning("daskgp: a warmup segment was lost with its worker; running it again")
                finally:
                    control._untrack(f)
            ckpt.commit(start["fingerprint"], state["gradients"], {"start": start, "warmup": state})
            segment += 1
            control._check()
    finally:
        # every process a segment ran in keeps the operator it built (a lost driver's successor built
        # another), and the workers its blocks ran on keep their rows: all freed here, however it ended
        _release_on_workers(client, run_key)
        if on_warmup is not None:
            with contextlib.suppress(Exception):  # a closing client has no topics left
                client.unsubscribe_topic(progress_topic(run_key))
    out = state["result"]
    done = {"stage": "done", "k": int(out.get("gradients", out.get("iterations", 0))), "cap": 1,
            "seconds": float(out["seconds"]), "total": float(out["seconds"]), "route": "ascent",
            "converged": bool(out.get("converged")), "failed": out.get("failed")}
    if on_warmup is not None:
        _tell(on_warmup, done)
    elif out.get("failed"):  # nobody watches the progress: the failure still gets its line
        log.warning("daskgp: warmup: %s; the chains start from the subset MAP in its Laplace covariance "
                    "scaled by subset/n", out["failed"])
    control._check()
    return {"method": "map", **out}


def _warmup_kept(ckpt: WarmupStore) -> str:
    """What a stop during the warmup leaves: the committed segments, or nothing."""
    done = ckpt.iterations()
    if not done:
        return "the run was stopped during its warmup; nothing was saved"
    return f"the run was stopped during its warmup; its {done} gradients are kept in {ckpt.path}"


def _tell(callback, msg) -> None:
    """A progress event to a user's callback, on the client's event loop: a failing display must not touch
    the run."""
    try:
        callback(msg)
    except Exception:
        log.debug("daskgp: the warmup progress callback failed", exc_info=True)


def _layout(client, cfg: SamplerConfig, n: int) -> list[list[str]]:
    """Each chain's workers on this cluster (:func:`daskgp.mcmc.layout.chain_layout`); ValueError (one line)
    for a ``workers_per_chain`` the cluster cannot hold."""
    return chain_layout(client.scheduler_info()["workers"], cfg.n_chains, n, cfg.workers_per_chain)


def _near(workers: list[str]) -> dict:
    """A chain's segment runs beside its blocks (on its first worker) when they are spread over several;
    a preference, so that a lost worker does not strand it. One worker: wherever the scheduler likes."""
    return dict(workers=workers[:1], allow_other_workers=True) if len(workers) > 1 else {}


def _plain(d: dict) -> dict:
    """JSON-ready attributes (arrays as lists)."""
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}


def resume(out: str, *, X=None, y=None, client=None, progress=None, control: RunControl | None = None,
           on_block=None, n_iter: int | None = None, target_ess: int | None = None,
           workers_per_chain: int | None = None, on_warmup=None):
    """Continue an interrupted run to its configured length (or its ESS target), every chain from its last
    committed state; with ``n_iter`` and/or ``target_ess``, extend it — a finished run included — to that
    length or target (the chains continue as they were: their adaptation is not redone).

    The data are reloaded from the run's data spec unless X, y are given; either way they must match the
    fingerprint stored with the run. A run that is complete is returned as it is (no cluster is started).
    ``workers_per_chain``: another layout than the run's own (the draws do not depend on it).
    Raises :class:`daskgp.runs.draws.RunError` (one line) when the run is damaged, locked by a live writer
    or cannot be continued, ValueError when the extension is not one.

    A run interrupted in its warmup (:mod:`daskgp.mcmc.warmup`: its checkpoint beside ``out`` until the
    first block is committed) continues the warmup from its last committed segment — to the same end point
    as an uninterrupted warmup — then starts its chains as :func:`sample` does (``on_warmup`` as there).
    Its data come from the data spec unless X, y are given (a run started from bare arrays needs them)."""
    warm = warmup_to_resume(out)
    if warm is not None:
        return _resume_warmup(out, warm, X, y, client, (progress, control, on_block), on_warmup,
                              dict(n_iter=n_iter, target_ess=target_ess, workers_per_chain=workers_per_chain))
    store, committed = DrawStore.open(out)
    attrs, ckpt = committed.attrs, committed.checkpoint
    try:
        cfg, names, M = _resume_plan(attrs, ckpt, store.path)
        if n_iter is not None or target_ess is not None:
            cfg = extended_config(cfg, store.n_draws, n_iter, target_ess, store.path)
        if workers_per_chain is not None:
            cfg = SamplerConfig.from_dict({**asdict(cfg), "workers_per_chain": workers_per_chain})
        finished = _finished(cfg, store.n_draws, committed.data, names)
        if X is None and not finished:
            X, y = _stored_or_spec(committed, attrs)
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
    whole = _whole_chains(committed.data, names)
    history = {k: [v] for k, v in whole.items() if k != "stats"}
    history["stats"] = {k: [v] for k, v in whole["stats"].items()}
    return _drive(store, X, y, cfg, M, ckpt, names, client, (progress, control, on_block), history)


def warmup_to_resume(out: str) -> tuple[WarmupStore, int, dict] | None:
    """The warmup checkpoint of a run at ``out`` (reading only): (its store, gradients committed, its state
    {'start', 'warmup'} checked), or None when there is none. Raises :class:`RunDamaged` (one line) when
    it is damaged or malformed."""
    ckpt = WarmupStore(warmup_path(out))
    if not ckpt.exists():
        return None
    step, st = ckpt.read_state()
    try:
        expect_keys(st, ("start", "warmup"), "warmup checkpoint")
        start = expect_keys(st["start"], ("config", "data", "data_meta", "fingerprint", "overwrite",
                                          "phi_map", "laplace_cov", "created", "setup_seconds"),
                            "the run's start")
        cfg = SamplerConfig.from_dict(_older(start["config"]))
        p = np.asarray(start["phi_map"]).shape[0]
        check_warmup_state(st["warmup"], p)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise RunDamaged(f"{ckpt.path}: the warmup checkpoint is malformed ({e}); start the run afresh "
                         "(--overwrite)") from None
    st["config"] = cfg
    return ckpt, step, st


def _resume_warmup(out: str, warm, X, y, client, hooks, on_warmup, changes: dict):
    """:func:`resume` of a run interrupted in its warmup: its data checked against the start's fingerprint,
    its configuration with ``changes`` (n_iter, target_ess, workers_per_chain: the chains have not begun,
    so any length goes), then :func:`_begin` from the committed warmup state."""
    ckpt, _, st = warm
    start, cfg = st["start"], st["config"]
    d = {**asdict(cfg), **{k: v for k, v in changes.items() if v is not None}}
    if changes["target_ess"] is not None and changes["n_iter"] is None and cfg.target_ess is None:
        d["n_iter"] = max(cfg.n_iter, 50_000)  # a target's default cap (see SamplerConfig)
    cfg = SamplerConfig.from_dict(d)
    if X is None:
        if not start["data"]:
            raise RunError(f"{ckpt.path} is the warmup of a run started from arrays: pass X, y to resume it")
        from ..datasets import load_spec

        ds = load_spec(start["data"])
        X, y = ds.X_std, ds.y_std
    X = check_X(X)
    y = check_y(y, X.shape[0])
    if fingerprint(X, y) != start["fingerprint"]:
        raise ValueError(f"the data given to resume {out} differ from the data the run started with")
    return _begin(X, y, cfg, start, st["warmup"], out, client, hooks, on_warmup)


def _stored_or_spec(committed, attrs: dict):
    """The training data of a run to continue: the copy stored in it, else (a run of an earlier daskgp that
    stored none) reloaded from its data spec."""
    X, y = committed.data["constant_data"].get("X"), committed.data["observed_data"].get("y")
    if X is not None and y is not None:
        return X, y
    from ..datasets import load_spec

    ds = load_spec(attrs["data"])
    return ds.X_std, ds.y_std


def _older(stored: dict) -> dict:
    """A stored configuration with the fields an older daskgp did not write set to what it did: K⁻¹y
    solved to ``tol`` (before ``mean_tol``)."""
    return {"mean_tol": stored.get("tol") if isinstance(stored, dict) else None, **stored}


def _resume_plan(attrs: dict, ckpt: dict, where: str) -> tuple[SamplerConfig, list[str], np.ndarray]:
    """The configuration, parameter names and preconditioner of a run to continue, after checking that it
    can be continued (not salvaged, every chain state well formed)."""
    check_appendable(where, ckpt)
    try:  # an extended run's configuration travels with its checkpoint
        stored = ckpt.get("config") or attrs["config"]
        # a run stored before ULISSE's roulette was an option used the paper's exponential one, and one
        # stored before K⁻¹y had its own tolerance solved it to the probes'
        cfg = SamplerConfig.from_dict({"roulette": "exponential", **_older(stored)})
        names, M = list(attrs["param_names"]), np.array(attrs["M"], dtype=float)
    except (KeyError, TypeError, ValueError) as e:
        raise RunDamaged(f"{where}/zarr.json: the run's configuration is malformed ({e})") from None
    check_states(ckpt["states"], cfg, len(names), attrs.get("n"), ckpt["n_draws"], where)
    return cfg, names, M


def check_resumable(path, n_iter: int | None = None, target_ess: int | None = None):
    """Everything :func:`resume` checks before it runs a chain — an intact run, no live writer, well-formed
    chain states, a valid extension — reading only (no lock is taken). Returns (the run's committed content,
    its config as extended, whether that is already finished)."""
    c = read_committed(path)
    if c.lock is not None and c.lock.state != "stale":
        raise RunLocked(f"{c.path} cannot be resumed: {c.lock.describe()}")
    cfg, names, _ = _resume_plan(c.attrs, c.checkpoint, c.path)
    n = c.checkpoint["n_draws"]
    if n_iter is not None or target_ess is not None:
        cfg = extended_config(cfg, n, n_iter, target_ess, c.path)
        check_run_size(cfg, len(names))
    return c, cfg, _finished(cfg, n, c.data, names)


def extended_config(cfg: SamplerConfig, n_draws: int, n_iter: int | None, target_ess: int | None,
                    where: str) -> SamplerConfig:
    """The configuration of a run extended to ``n_iter`` iterations per chain and/or an ESS target: the
    adaptation and step-schedule lengths are pinned to the run's own, so the chains continue unchanged.
    ``n_iter`` alone on a run with an ESS target runs to ``n_iter`` (the target, which such a run may already
    meet, no longer stops it); both: the new target, capped at ``n_iter``. Raises ValueError when the run
    cannot grow that way."""
    d = asdict(cfg)
    d["n_adapt"], d["step_iter"] = cfg.adapt, cfg.step_iter
    if n_iter is not None and target_ess is None:
        d["target_ess"] = None
    if target_ess is not None:
        d["target_ess"] = target_ess
        if n_iter is None and cfg.target_ess is None:
            d["n_iter"] = max(cfg.n_iter, 50_000)  # a target's default cap (see SamplerConfig)
    if n_iter is not None:
        if n_iter < n_draws:
            raise ValueError(f"{where} has {n_draws} draws per chain already: --iterations {n_iter} would "
                             "not extend it")
        d["n_iter"] = n_iter
    return SamplerConfig.from_dict(d)  # a short last block is a block: block_ends(n_draws) restarts there


def _whole_chains(data: dict, names) -> dict:
    """{name: (chains, draws)}, 'warmup' flags and 'stats' {record: (chains, draws)} (the fidelity checks'
    records) of a run's committed data, warmup draws first."""
    def both(group: str, key: str):
        parts = [data[g][key] for g in (f"warmup_{group}", group) if key in data.get(g, {})]
        return np.concatenate(parts, axis=1)

    kept = {**data.get("warmup_sample_stats", {}), **data.get("sample_stats", {})}
    return {**{nm: both("posterior", nm) for nm in names}, "warmup": both("sample_stats", "warmup"),
            "stats": {k: both("sample_stats", k) for k in _fidelity_records(kept, names)}}


def _finished(cfg: SamplerConfig, n_draws: int, data: dict, names) -> bool:
    """A run is finished at its length, or, with an ESS target, once its committed draws meet the target."""
    if n_draws >= cfg.n_iter:
        return True
    if cfg.target_ess is None or n_draws == 0:
        return False
    whole = _whole_chains(data, names)
    st = run_status({nm: [whole[nm]] for nm in names}, [whole["warmup"]], warmup_draws=cfg.adapt,
                    done=n_draws, n_iter=cfg.n_iter, elapsed=0.0, target_ess=cfg.target_ess,
                    target_rhat=cfg.target_rhat, stats_blocks={k: [v] for k, v in whole["stats"].items()})
    return st.converged


def check_states(states, cfg: SamplerConfig, p: int, n, n_draws: int, where: str = "the checkpoint") -> None:
    """Check chain states read back from a checkpoint before any worker runs them: each must rebuild as a
    :class:`daskgp.mcmc.segments.ChainState` of ``cfg.method`` (fields, shapes, dtypes, finite values, valid
    generator states) at an iteration equal to the committed draws (unless the chain stopped). Raises
    RunDamaged."""
    if not isinstance(states, list) or len(states) != cfg.n_chains:
        raise RunDamaged(f"{where}: expected {cfg.n_chains} chain states, found "
                         f"{len(states) if isinstance(states, list) else type(states).__name__}")
    for c, st in enumerate(states):
        try:
            chain = ChainState.from_dict(st, cfg, p, n)
            t, stopped = chain.sampler.t, chain.sampler.stopped
            if t > cfg.n_iter or (stopped is None and t != n_draws):
                raise ValueError(f"iteration {t} for {n_draws} committed draws")
        except ValueError as e:
            raise RunDamaged(f"{where}: the state of chain {c} is malformed ({e}); daskgp repair cannot "
                             "rebuild it: sample the run again") from None


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
    C, N = cfg.n_chains, cfg.n_iter
    ends = cfg.block_ends(store.n_draws)  # block b holds draws starts[b] … ends[b] − 1
    starts = [0, *ends[:-1]]
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

        layout = _layout(client, cfg, X.shape[0])
        data = client.scatter([X, y], broadcast=True, hash=False)  # [X, y] futures, placed again if lost
        Mf = np.asarray(M)
        ac = as_completed()
        live = _LiveProgress(progress, C, N, done0, elapsed0, t_start, control, paused0, cfg.adapt)
        if progress is not None:
            client.subscribe_topic(progress_topic(run_key), live.on_event)

        attempts: dict[tuple[int, int], int] = {}

        def submit(c: int, block: int):
            control._check()
            n = ends[block] - starts[block]
            again = attempts.get((c, block), 0)
            key = f"daskgp-chain{c}-block{block}-{run_key}" + (f"-{again}" if again else "")
            f = client.submit(run_segment, *data, cfg_dict, Mf, states[c], n, run_key, c, layout[c],
                              pure=False, key=key, **_near(layout[c]))
            futures[f.key] = (c, block, f)
            control._track(client, f)
            ac.add(f)

        next_block = ends.index(done0) + 1 if done0 else 0  # a boundary: block_ends(done0) holds it
        if done0 < N:
            for c in range(C):
                submit(c, next_block)
        expected_blocks = len(ends)
        converged = False
        for f in ac:
            c, block, _ = futures.pop(f.key)
            control._untrack(f)
            if control.stopped:
                raise RunStopped("the run was stopped; its committed draws are kept")
            try:
                records, new_state = f.result()
            except CancelledError:
                # the scheduler forgot a segment whose worker died while it held a worker client (its
                # chain's products on other workers); the segment is a pure function of the chain's state,
                # which states[c] still holds: run it again, to the same draws
                attempts[(c, block)] = attempts.get((c, block), 0) + 1
                if control.stopped or attempts[(c, block)] > _SEGMENT_RETRIES:
                    raise
                log.warning("daskgp: chain %d's segment %d was lost with its worker; running it again", c,
                            block)
                data[:] = client.scatter([X, y], broadcast=True, hash=False)  # its replicas may be gone too
                submit(c, block)
                continue
            pending.setdefault(block, {})[c] = (records, new_state)
            if block + 1 < expected_blocks:
                states[c] = new_state  # this chain's next segment starts from here
                submit(c, block + 1)
            while next_block in pending and len(pending[next_block]) == C:
                blk = pending.pop(next_block)
                n = ends[next_block] - starts[next_block]
                recs = [blk[c][0] for c in range(C)]
                chain_states = [blk[c][1] for c in range(C)]
                for c in range(C):
                    if chain_states[c].get("stopped") and str(c) not in messages:
                        messages[str(c)] = chain_states[c]["stopped"]
                post, stats = block_arrays(recs, n, names, cfg.method)
                ran = time.perf_counter() - t_start - (control.paused_seconds - paused0)
                store.append(post, stats, {"states": chain_states, "elapsed": elapsed0 + ran,
                                           "messages": messages, "config": cfg_dict})
                for nm in names:
                    history[nm].append(post[nm])
                history["warmup"].append(stats["warmup"])
                for key in _fidelity_records(stats, names):
                    history.setdefault("stats", {}).setdefault(key, []).append(stats[key])
                if on_block is not None:
                    on_block(post, stats, starts[next_block])
                next_block += 1
                if progress is not None or cfg.target_ess is not None:
                    status = run_status({nm: history[nm] for nm in names}, history["warmup"],
                                        warmup_draws=cfg.adapt, done=store.n_draws, n_iter=N,
                                        elapsed=elapsed0 + ran,
                                        seconds_per_draw=ran / (store.n_draws - done0),
                                        target_ess=cfg.target_ess, target_rhat=cfg.target_rhat,
                                        messages=messages, stats_blocks=history.get("stats"))
                    converged = cfg.target_ess is not None and status.converged
                    if progress is not None:
                        live.committed(status)
                    if converged:
                        break
            if converged:
                break
        if futures:  # chains a block ahead of a met target: released, they end at their next gradient
            from distributed import wait

            _release_on_workers(client, run_key)
            try:
                wait([f for _, _, f in futures.values()], timeout=60)
            except TimeoutError:
                pass
            client.cancel([f for _, _, f in futures.values()])
    except BaseException:
        client.cancel([f for _, _, f in futures.values()])
        raise
    finally:
        if progress is not None:
            with contextlib.suppress(Exception):  # a closing client has no topics left
                client.unsubscribe_topic(progress_topic(run_key))
        _release_on_workers(client, run_key)


_SEGMENT_RETRIES = 3  # a segment lost more often than this fails the run (as distributed's allowed-failures)


def _fidelity_records(stats: dict, names) -> list[str]:
    """The sample-stats records the fidelity checks read, those of them this method keeps."""
    return [k for k in [*(f"grad_{nm}" for nm in names), "kinetic", "stability"] if k in stats]


class _LiveProgress:
    """Calls ``progress`` after every committed block and, between blocks, whenever the chains' segments
    report more iterations (worker events, :func:`daskgp.mcmc.segments.progress_topic`): then with the last
    committed :class:`RunStatus` whose ``running`` is the least iteration count over the chains. The events
    arrive on the client's event loop; a lock keeps the two callers' lines whole."""

    def __init__(self, progress, n_chains: int, n_iter: int, done0: int, elapsed0: float, t_start: float,
                 control: RunControl, paused0: float, warmup_draws: int = 0):
        self.progress, self.n_iter = progress, n_iter
        self.latest = [done0] * n_chains
        self.status = RunStatus(done=done0, n_iter=n_iter, elapsed=elapsed0,
                                warmup_draws=min(int(warmup_draws), n_iter))
        self.clock = (elapsed0, t_start, control, paused0)
        self.shown = done0
        self.lock = threading.Lock()

    def _elapsed(self) -> float:
        elapsed0, t_start, control, paused0 = self.clock
        return elapsed0 + time.perf_counter() - t_start - (control.paused_seconds - paused0)

    def committed(self, status: RunStatus) -> None:
        with self.lock:
            self.status = status
            running = max(min(self.latest), status.done)
            self.shown = max(self.shown, running)
            self.progress(replace(status, running=running) if running > status.done else status)

    def on_event(self, event) -> None:
        _, msg = event
        with self.lock:
            c, t = int(msg["chain"]), int(msg["t"])
            if 0 <= c < len(self.latest):
                self.latest[c] = max(self.latest[c], t)
            running = min(self.latest)
            if running <= self.shown:
                return
            self.shown = running
            try:
                self.progress(replace(self.status, running=running, elapsed=self._elapsed()))
            except Exception:  # on the client's event loop: a failing display must not touch the run
                log.debug("daskgp: the progress callback failed between blocks", exc_info=True)


def _release_on_workers(client, run_key: str) -> None:
    """Free the run's kernel operators on every worker; a cluster already gone has nothing to free."""
    try:
        client.run(release_operators, run_key)
    except Exception:  # a lost scheduler or a closing client: the workers' memory went with them
        pass
