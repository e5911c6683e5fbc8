"""What a run to continue is, read before any chain moves: the resume plan of
:func:`daskgp.mcmc.chains.resume`. A run's committed checkpoint gives its configuration (as extended), its
parameter names and metric, and its chain states — each checked to rebuild as its sampler's state — and
whether it is finished (its length, or its ESS target met by the committed draws); a run stopped in its
warmup is read from the warmup's checkpoint beside it (:mod:`daskgp.mcmc.warmup`). Everything here reads
only: a damaged or malformed run is :class:`daskgp.runs.draws.RunDamaged` (one line), a live writer's
:class:`daskgp.runs.draws.RunLocked`.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from ..core.plaindata import expect_keys
from ..runs.draws import RunDamaged, RunLocked, check_appendable, read_committed
from .config import SamplerConfig, check_run_size
from .diagnostics import run_status
from .fidelity import fidelity_records
from .segments import ChainState
from .warmup import WarmupStore, check_warmup_state, warmup_path

__all__ = ["warmup_to_resume", "resume_plan", "check_resumable", "extended_config", "whole_chains",
           "finished", "check_states", "stored_or_spec", "with_older_fields"]


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
        cfg = SamplerConfig.from_dict(with_older_fields(start["config"]))
        p = np.asarray(start["phi_map"]).shape[0]
        check_warmup_state(st["warmup"], p)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise RunDamaged(f"{ckpt.path}: the warmup checkpoint is malformed ({e}); start the run afresh "
                         "(--overwrite)") from None
    st["config"] = cfg
    return ckpt, step, st


def resume_plan(attrs: dict, ckpt: dict, where: str) -> tuple[SamplerConfig, list[str], np.ndarray]:
    """The configuration, parameter names and metric M (p, p) of a run to continue, after checking that it
    can be continued (not salvaged, every chain state well formed)."""
    check_appendable(where, ckpt)
    try:  # an extended run's configuration travels with its checkpoint
        stored = ckpt.get("config") or attrs["config"]
        # a run stored before ULISSE's roulette was an option used the paper's exponential one, and one
        # stored before K⁻¹y had its own tolerance solved it to the probes'
        cfg = SamplerConfig.from_dict({"roulette": "exponential", **with_older_fields(stored)})
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
    cfg, names, _ = resume_plan(c.attrs, c.checkpoint, c.path)
    n = c.checkpoint["n_draws"]
    if n_iter is not None or target_ess is not None:
        cfg = extended_config(cfg, n, n_iter, target_ess, c.path)
        check_run_size(cfg, len(names))
    return c, cfg, finished(cfg, n, c.data, names)


def extended_config(cfg: SamplerConfig, n_draws: int, n_iter: int | None, target_ess: int | None,
                    where: str) -> SamplerConfig:
    """The configuration of a run extended to ``n_iter`` iterations per chain and/or an ESS target: the
    adaptation and step-schedule lengths are pinned to the run's own, so the chains continue unchanged.
    ``n_iter`` alone on a run with an ESS target runs to ``n_iter`` (the target, which such a run may already
    meet, no longer stops it); both: the new target, capped at ``n_iter``. Raises ValueError when the run
    cannot grow that way."""
    d = asdict(cfg)
    d["n_adapt"] = cfg.adapt  # and the options, SGLD's step_iter among them, as the run resolved them
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


def with_older_fields(stored: dict) -> dict:
    """A stored configuration with the fields an older daskgp did not write set to what it did: K⁻¹y
    solved to ``tol`` (before ``mean_tol``)."""
    return {"mean_tol": stored.get("tol") if isinstance(stored, dict) else None, **stored}


def stored_or_spec(committed, attrs: dict):
    """The training data of a run to continue: the copy stored in it, else (a run of an earlier daskgp that
    stored none) reloaded from its data spec."""
    X, y = committed.data["constant_data"].get("X"), committed.data["observed_data"].get("y")
    if X is not None and y is not None:
        return X, y
    from ..datasets import load_spec

    ds = load_spec(attrs["data"])
    return ds.X_std, ds.y_std


def whole_chains(data: dict, names) -> dict:
    """{name: (chains, draws)}, 'warmup' flags and 'stats' {record: (chains, draws)} (the fidelity checks'
    records) of a run's committed data, warmup draws first."""
    def both(group: str, key: str):
        parts = [data[g][key] for g in (f"warmup_{group}", group) if key in data.get(g, {})]
        return np.concatenate(parts, axis=1)

    kept = {**data.get("warmup_sample_stats", {}), **data.get("sample_stats", {})}
    return {**{nm: both("posterior", nm) for nm in names}, "warmup": both("sample_stats", "warmup"),
            "stats": {k: both("sample_stats", k) for k in fidelity_records(kept, names)}}


def finished(cfg: SamplerConfig, n_draws: int, data: dict, names) -> bool:
    """A run is finished at its length, or, with an ESS target, once its committed draws meet the target."""
    if n_draws >= cfg.n_iter:
        return True
    if cfg.target_ess is None or n_draws == 0:
        return False
    whole = whole_chains(data, names)
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
