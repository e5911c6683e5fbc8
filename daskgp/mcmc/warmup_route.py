"""The warmup's route, on the client: what runs between the subset MAP and the chains' starts of
:func:`daskgp.mcmc.chains.sample` (Filippone & Engler 2015 start their chains from a subset's MAP; daskgp
first climbs to the full data's mode where it can).

* 'subset': the chains start from N(φ_MAP, H⁻¹) of the subset and the metric M is H⁻¹ scaled by subset/n.
* 'exact' ('map' where n fits a Cholesky, and MH's): the exact Cholesky MAP and Laplace covariance on all n
  rows, in the client's process (:func:`exact_warmup`).
* 'ascent' ('map' above that): the stochastic ascent and its Laplace curvature
  (:mod:`daskgp.mcmc.warmup`, :mod:`daskgp.exact.mode`) in segments, each a task on the run's workers, its
  state checkpointed beside the run (:func:`stochastic_warmup`); the noise it measures at the mode sets the
  run's probes and adaptation length (:func:`tuned_from_warmup`).

Every route's outcome is said: a failed ascent in one line with what the chains start from instead.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from concurrent.futures import CancelledError
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..compute.precision import FLOAT32_MAX_BOUND
from ..core.priors import GammaPrior
from ..exact.posterior import subset_map
from ..model.kernels import make_kernel
from ..runs.fits import is_fit_store
from .config import SamplerConfig
from .control import RunControl, RunStopped
from .driver import SEGMENT_RETRIES, RunHooks, cluster_layout, release_on_workers
from .progress import tell
from .ticker import progress_topic
from .warmup import DONE, FULL_LAPLACE, WarmupStore, warmup_path, warmup_segment, warmup_start

__all__ = ["WarmStart", "warm_start", "subset_metric", "rows_dtype", "tuned_from_warmup",
           "check_no_warmup_beside", "exact_warmup", "stochastic_warmup"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WarmStart:
    """Where the chains start: ``centre`` (p,) and ``spread`` (p, p) of their starting distribution, the
    samplers' metric ``M`` (p, p), the warmup's result (``warm``: plain data, None for the 'subset' route),
    and the run's configuration and hooks as the warmup left them (probes and adaptation tuned to its noise;
    the first committed block removes its checkpoint)."""

    cfg: SamplerConfig
    hooks: RunHooks
    warm: dict | None
    centre: np.ndarray
    spread: np.ndarray
    M: np.ndarray


def warm_start(X, y, cfg: SamplerConfig, start: dict, warm_state: dict | None, seed, out: str, client,
               hooks: RunHooks, on_warmup, held: contextlib.ExitStack) -> WarmStart:
    """The warmup of the route ``cfg.warmup_route(n)`` from the run's ``start`` (plain data: its subset MAP
    'phi_map' (p,) and Laplace covariance 'laplace_cov' (p, p), its fingerprint); ``warm_state``: where a
    resumed ascent stands. The ascent's checkpoint beside ``out`` is held open in ``held`` until the run
    ends."""
    n = X.shape[0]
    phi_map, H_inv = np.asarray(start["phi_map"], dtype=float), np.asarray(start["laplace_cov"], dtype=float)
    M = subset_metric(H_inv, cfg, n)
    route = cfg.warmup_route(n)
    if route == "subset":
        return WarmStart(cfg, hooks, None, phi_map, H_inv, M)
    if warm_state is not None or route == "ascent":
        ckpt = held.enter_context(WarmupStore(warmup_path(out)).writing())
        warm = stochastic_warmup(X, y, cfg, start, warm_state, seed, client, hooks.control, on_warmup, ckpt)
        hooks = replace(hooks, on_block=removing_warmup(ckpt, hooks.on_block))
        cfg = tuned_from_warmup(cfg, warm)
    else:
        kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=X.shape[1])
        warm = exact_warmup(X, y, cfg, kernel, phi_map, seed, on_warmup)
    return WarmStart(cfg, hooks, warm, warm["phi"], cfg.overdispersion**2 * warm["cov"], warm["cov"])


def subset_metric(laplace_cov, cfg: SamplerConfig, n: int) -> np.ndarray:
    """(p, p) the subset MAP's Laplace covariance scaled to n rows (× subset/n): the metric of the 'subset'
    route and where the ascent starts (the paper's M with α scaled by subset/n)."""
    return np.asarray(laplace_cov, dtype=float) * (min(cfg.subset_size, n) / n)


def rows_dtype(cfg: SamplerConfig, n: int, phi_map, H_inv, on_warmup, seconds: float) -> SamplerConfig:
    """``cfg`` with its cached rows' dtype resolved from the subset MAP in its covariance scaled to n
    (:meth:`SamplerConfig.for_start`); float64 instead of float32 is said in one line (every product then
    reads twice the memory)."""
    cfg, bound = cfg.for_start(n, phi_map, subset_metric(H_inv, cfg, n))
    if bound is not None and cfg.cache_dtype == "float64":
        note = (f"kernel rows cached in float64, not float32: the noise variance is small against the "
                f"kernel's (ε₃₂·n·s/σ² up to {bound:.2g} > {FLOAT32_MAX_BOUND}), where float32 rounding "
                "would stall CG; each product reads twice the memory")
        if on_warmup is not None:
            tell(on_warmup, {"stage": "subset MAP", "k": 1, "cap": 1, "seconds": seconds, "total": seconds,
                             "note": note})
        else:
            log.info("daskgp: %s", note)
    return cfg


def tuned_from_warmup(cfg: SamplerConfig, warm: dict) -> SamplerConfig:
    """The configuration with the probes (``cfg.probes_from_noise``) and the adaptation length
    (``cfg.adapt_from_noise``; at most a fifth of the cap, as any target run's) that the gradient noise
    measured by a stochastic warmup calls for, where the warmup converged to a positive definite Laplace
    covariance — a saddle-free or subset metric may be far off, and keeps the full adaptation to correct
    it. A pure function of the warmup's result: a resumed warmup gives the same length."""
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


def removing_warmup(ckpt: WarmupStore, on_block):
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


def exact_warmup(X, y, cfg: SamplerConfig, kernel, phi_sub, seed, on_warmup=None) -> dict:
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


def stochastic_warmup(X, y, cfg: SamplerConfig, start: dict, state: dict | None, seed, client,
                      control: RunControl, on_warmup, ckpt: WarmupStore) -> dict:
    """The 'map' warmup of a gradient sampler (:mod:`daskgp.mcmc.warmup`): segments of at most
    ``checkpoint_every`` gradients, each a task on the run's workers (the whole cluster's, by the layout
    rule for one chain), its state committed to ``ckpt`` with the run's ``start``; from ``state`` when
    resumed, else from the subset MAP in the subset's scaled Laplace metric."""
    control.check()
    n = X.shape[0]
    if state is None:
        M_sub = subset_metric(start["laplace_cov"], cfg, n)
        state = warmup_start(start["phi_map"], M_sub, int(seed.generate_state(1)[0]))
    run_key = f"{start['fingerprint'][:12]}-warmup-{secrets.token_hex(4)}"
    (workers,) = cluster_layout(client, replace(cfg, n_chains=1), n)  # one chain: the whole cluster
    if on_warmup is not None:
        client.subscribe_topic(progress_topic(run_key), lambda event: tell(on_warmup, event[1]))
    cfg_dict = asdict(cfg)
    segment = 0
    try:
        while state["stage"] < DONE:
            for attempt in range(SEGMENT_RETRIES + 1):
                # on the first of its workers (preferred, not required): computing in its own process, a
                # segment elsewhere would cache the kernel rows a second time
                f = client.submit(warmup_segment, X, y, cfg_dict, state, run_key, workers, pure=False,
                                  key=f"daskgp-warmup-{run_key}-{segment}-{attempt}", workers=workers[:1],
                                  allow_other_workers=True)
                control.track(client, f)
                try:
                    state = f.result()
                    break
                except CancelledError:
                    # stopped; or, spread over several workers, lost with its driver's worker as a chain's
                    # segment can be: a pure function of its arguments, so run again to the same end point
                    if control.stopped or attempt == SEGMENT_RETRIES:
                        raise RunStopped(_warmup_kept(ckpt)) from None
                    log.warning("daskgp: a warmup segment was lost with its worker; running it again")
                finally:
                    control.untrack(f)
            ckpt.commit(start["fingerprint"], state["gradients"], {"start": start, "warmup": state})
            segment += 1
            control.check()
    finally:
        # every process a segment ran in keeps the operator it built (a lost driver's successor built
        # another), and the workers its blocks ran on keep their rows: all freed here, however it ended
        release_on_workers(client, run_key)
        if on_warmup is not None:
            with contextlib.suppress(Exception):  # a closing client has no topics left
                client.unsubscribe_topic(progress_topic(run_key))
    out = state["result"]
    done = {"stage": "done", "k": int(out.get("gradients", out.get("iterations", 0))), "cap": 1,
            "seconds": float(out["seconds"]), "total": float(out["seconds"]), "route": "ascent",
            "converged": bool(out.get("converged")), "failed": out.get("failed")}
    if on_warmup is not None:
        tell(on_warmup, done)
    elif out.get("failed"):  # nobody watches the progress: the failure still gets its line
        log.warning("daskgp: warmup: %s; the chains start from the subset MAP in its Laplace covariance "
                    "scaled by subset/n", out["failed"])
    control.check()
    return {"method": "map", **out}


def _warmup_kept(ckpt: WarmupStore) -> str:
    """What a stop during the warmup leaves: the committed segments, or nothing."""
    done = ckpt.iterations()
    if not done:
        return "the run was stopped during its warmup; nothing was saved"
    return f"the run was stopped during its warmup; its {done} gradients are kept in {ckpt.path}"
