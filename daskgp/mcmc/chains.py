"""A run: several MCMC chains of the GP hyperparameter posterior, in parallel on a Dask cluster,
checkpointed (Filippone & Engler 2015, section 4) — :func:`sample` starts one, :func:`resume` continues or
extends one.

A run is cut along four seams, a module each: the warmup's route from the subset MAP to the chains' starts
(:mod:`daskgp.mcmc.warmup_route`), the driver loop that advances the chains in segments and commits every
block of draws with the chain states (:mod:`daskgp.mcmc.driver`; an interruption loses at most the block in
flight), the resume plan that reads and checks what a run to continue is (:mod:`daskgp.mcmc.resumption`),
and the progress the user sees between blocks (:mod:`daskgp.mcmc.progress`). A
:class:`daskgp.mcmc.control.RunControl` pauses or stops a run from another thread.

Methods: the samplers registered in :mod:`daskgp.mcmc.samplers` — 'sghmc' (underdamped Langevin on unbiased
ULISSE / CG gradients through the kernel operator, the gradient noise subtracted from the momentum refresh),
'sgld' (the paper's SGLD on the same gradients; the step size decreases, then freezes by the paper's rule),
'hmc' (leapfrog on the exact Cholesky gradient with an accept step: 'auto' at small n) and 'mh' (adaptive
random-walk Metropolis–Hastings on the exact Cholesky posterior: small n only). The driver asks a sampler
what it needs (:class:`daskgp.mcmc.samplers.Sampler`), never its name.

Warmup ('map', the default): before the chains, one task climbs from the MAP of a random subset to the
full-data mode by stochastic gradient ascent and estimates the Laplace covariance there
(:mod:`daskgp.exact.mode`; MH uses the exact Cholesky MAP); the chains start from N(mode, (overdispersion)²·
Laplace) and the Laplace covariance is the samplers' metric M. With 'subset' the chains start from
N(φ_MAP, H⁻¹) of the subset and M is H⁻¹ scaled by subset/n (the paper's M with α scaled by subset/n).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict

import numpy as np

from .._version import __version__
from ..core.priors import GammaPrior
from ..core.validation import check_not_degenerate, check_X, check_y
from ..exact.posterior import subset_map
from ..model.kernels import make_kernel
from ..runs.draws import DrawStore, RunError, check_new_run_path
from .config import SamplerConfig, check_method_fits, fingerprint
from .control import RunControl
from .diagnostics import RunStatus
from .driver import RunHooks, cluster_layout, drive
from .resumption import (
    check_resumable,
    check_states,
    extended_config,
    finished,
    resume_plan,
    stored_or_spec,
    warmup_to_resume,
    whole_chains,
)
from .segments import initial_states
from .warmup_route import check_no_warmup_beside, rows_dtype, warm_start

# check_resumable, check_states, extended_config, check_no_warmup_beside and warmup_to_resume live with the
# resume plan and the warmup's route; named here too, where the CLI and users have found them
__all__ = ["sample", "resume", "check_resumable", "check_states", "extended_config", "check_no_warmup_beside",
           "warmup_to_resume", "warn_unless_standardised", "RunStatus"]


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
    'subset MAP' (on the client), then the stages of :data:`daskgp.mcmc.ticker.WARMUP_STAGES` (from the
    worker, about every second; on the client's event loop).
    Returns the run as an ArviZ DataTree (see :func:`daskgp.mcmc.diagnostics.open_run`).
    """
    # a given config is already resolved; overrides alone resolve their method's defaults (e.g. n_probes)
    cfg = SamplerConfig.from_dict({**(asdict(config) if config is not None else {}), **overrides})
    X = check_X(X)
    y = check_y(y, X.shape[0])
    cfg = cfg.for_rows(X.shape[0])  # method 'auto': the sampler the data's size calls for, stored as such
    check_not_degenerate(X.std(axis=0), y.std(), "X, y", X.mean(axis=0), y.mean())
    warn_unless_standardised(X, y)
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
    cfg = rows_dtype(cfg, X.shape[0], phi_map, H_inv, on_warmup, time.perf_counter() - t0)
    start = {"config": asdict(cfg), "data": data_spec or {}, "data_meta": data_meta or {},
             "fingerprint": fingerprint(X, y), "overwrite": bool(overwrite), "phi_map": phi_map,
             "laplace_cov": H_inv, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
             "setup_seconds": time.perf_counter() - t0}
    return _begin(X, y, cfg, start, None, out, client, RunHooks.of(progress, control, on_block), on_warmup)


def _seeds(cfg: SamplerConfig) -> list:
    """The run's random streams, children of its seed by index: chains 0..C−1, then the start spread, the
    subset, the warmup's probes."""
    return np.random.SeedSequence(cfg.seed).spawn(cfg.n_chains + 3)


def _begin(X, y, cfg: SamplerConfig, start: dict, warm_state: dict | None, out: str, client,
           hooks: RunHooks, on_warmup):
    """From the subset MAP to the driven chains: the warmup (``warm_state``: where a resumed one stands),
    the chains' starts, the new run, the driver. ``start``: the run's beginning as plain data (its
    configuration, data spec, subset MAP and Laplace covariance), kept with the warmup's checkpoint."""
    from ..compute.cluster import borrowed_client

    n, C, seeds = X.shape[0], cfg.n_chains, _seeds(cfg)
    with borrowed_client(client) as client, contextlib.ExitStack() as held:
        cluster_layout(client, cfg, n)  # a layout the cluster cannot hold is refused before the warmup
        ws = warm_start(X, y, cfg, start, warm_state, seeds[C + 2], out, client, hooks, on_warmup, held)
        cfg, warm = ws.cfg, ws.warm
        phi_init = np.random.default_rng(seeds[C]).multivariate_normal(ws.centre, ws.spread, size=C)
        states = initial_states(X, y, cfg, phi_init, ws.M, seeds)
        names = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1]).param_names + ["noise"]
        meta = start["data_meta"]
        attrs = {"config": asdict(cfg), "param_names": names, "data": start["data"], "n": n,
                 "d": X.shape[1], "fingerprint": start["fingerprint"],
                 "phi_map": np.asarray(start["phi_map"], dtype=float).tolist(),
                 "laplace_cov": np.asarray(start["laplace_cov"], dtype=float).tolist(), "M": ws.M.tolist(),
                 "phi_init": phi_init.tolist(),
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
        return drive(store, X, y, cfg, ws.M, ckpt, names, client, ws.hooks)


def warn_unless_standardised(X, y) -> None:
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
        return _resume_warmup(out, warm, X, y, client, RunHooks.of(progress, control, on_block), on_warmup,
                              dict(n_iter=n_iter, target_ess=target_ess, workers_per_chain=workers_per_chain))
    store, committed = DrawStore.open(out)
    attrs, ckpt = committed.attrs, committed.checkpoint
    try:
        cfg, names, M = resume_plan(attrs, ckpt, store.path)
        if n_iter is not None or target_ess is not None:
            cfg = extended_config(cfg, store.n_draws, n_iter, target_ess, store.path)
        if workers_per_chain is not None:
            cfg = SamplerConfig.from_dict({**asdict(cfg), "workers_per_chain": workers_per_chain})
        done = finished(cfg, store.n_draws, committed.data, names)
        if X is None and not done:
            X, y = stored_or_spec(committed, attrs)
        if X is not None:
            X = check_X(X)
            y = check_y(y, X.shape[0])
            if fingerprint(X, y) != attrs["fingerprint"]:
                raise ValueError(f"the data given to resume {out} differ from the data the run started with")
        if done:
            store.close()
            from .diagnostics import open_run

            return open_run(store.path)
    except BaseException:
        store.close()
        raise
    whole = whole_chains(committed.data, names)
    history = {k: [v] for k, v in whole.items() if k != "stats"}
    history["stats"] = {k: [v] for k, v in whole["stats"].items()}
    return drive(store, X, y, cfg, M, ckpt, names, client, RunHooks.of(progress, control, on_block), history)


def _resume_warmup(out: str, warm, X, y, client, hooks: RunHooks, on_warmup, changes: dict):
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
