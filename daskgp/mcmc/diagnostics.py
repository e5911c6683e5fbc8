"""Runs as ArviZ posterior containers and the convergence summaries of the paper, computed by ArviZ.

* :func:`to_datatree` — (chain, draw, p) log-parameter draws → an ``xarray.DataTree`` with a ``posterior``
  group in natural units (one variable per parameter) and a ``sample_stats`` group (per-iteration records).
* :func:`psrf_evolution` — R-hat on growing prefixes of the chains: median and 97.5% quantile across
  parameters, as in the paper's figures (ArviZ has no R-hat evolution plot).
* :func:`summary` — ArviZ's summary table plus seconds per effective sample.
* :func:`run_status` / :class:`RunStatus` — a growing run's R-hat, bulk and tail ESS, seconds per effective
  sample and time to its ESS target: the driver's progress and stopping rule.
* :func:`open_run` — a run written by :mod:`daskgp.mcmc.chains` (committed draws, verified, read-only);
  :func:`post_warmup` — its sampling-phase draws (after every chain froze its step size / stopped adapting),
  without chains that diverged; :func:`run_summary` — the summary of a run on disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["to_datatree", "psrf_evolution", "summary", "open_run", "post_warmup", "whole_chains",
           "split_at_warmup", "running_diagnostics", "run_status", "RunStatus", "DEFAULT_TARGET_ESS",
           "run_summary", "run_fidelity", "save_netcdf"]


def to_datatree(log_draws, param_names, sample_stats: dict | None = None, attrs: dict | None = None):
    """log_draws (chains, draws, p) of φ = log θ; sample_stats {name: (chains, draws)} → DataTree whose
    posterior holds θ = exp(φ) per parameter (natural units)."""
    d = np.asarray(log_draws, dtype=float)
    if d.ndim != 3 or d.shape[2] != len(param_names):
        raise ValueError(f"draws must be (chains, draws, {len(param_names)}), got {d.shape}")
    post = {name: np.exp(d[:, :, j]) for j, name in enumerate(param_names)}
    groups = {"posterior": post}
    if sample_stats:
        groups["sample_stats"] = {k: np.asarray(v) for k, v in sample_stats.items()}
    dt = az.from_dict(groups)
    if attrs:
        dt.attrs.update(attrs)
    return dt


def _posterior_ds(dt) -> xr.Dataset:
    return dt.posterior.to_dataset() if isinstance(dt, xr.DataTree) else dt


def psrf_evolution(dt, n_points: int = 20, method: str = "identity") -> xr.Dataset:
    """R-hat of every parameter on prefixes of n draws (n over ``n_points`` values), with the median and
    97.5% quantile across parameters. ``method='identity'`` is the classic Gelman–Rubin PSRF of the paper."""
    ds = _posterior_ds(dt)
    D = ds.sizes["draw"]
    if ds.sizes["chain"] < 2 or D < 8:
        raise ValueError("PSRF needs at least 2 chains and 8 draws")
    ns = np.unique(np.linspace(min(8, D), D, n_points).astype(int))
    ev = xr.concat([az.rhat(ds.isel(draw=slice(0, k)), method=method) for k in ns], "n_draws")
    ev = ev.assign_coords(n_draws=ns)
    stacked = ev.to_array("parameter")
    return xr.Dataset({"rhat": stacked, "median": stacked.median("parameter"),
                       "q975": stacked.quantile(0.975, dim="parameter").drop_vars("quantile")})


def summary(dt, seconds: float | None = None) -> pd.DataFrame:
    """ArviZ summary (mean, sd, intervals, ESS bulk/tail, R-hat) plus ``sec_per_ess`` = wall seconds of the
    whole run / bulk ESS when ``seconds`` is given."""
    table = pd.DataFrame(az.summary(dt))
    if seconds is not None:
        table["sec_per_ess"] = seconds / table["ess_bulk"]
    return table


def open_run(path) -> xr.DataTree:
    """The run at ``path`` as an ArviZ DataTree in memory: posterior (chain, draw) in natural units,
    sample_stats, and attrs with the decoded configuration plus 'elapsed' (wall seconds so far),
    'n_draws' (committed draws per chain), 'messages' ({chain: why it stopped}) and 'writer' (what holds
    the run while it is being written, else None).

    Reads only, and only the committed draws, each block checked against its digest: safe beside a running
    writer. Raises FileNotFoundError, or :class:`daskgp.runs.draws.RunError` with one line saying what is
    damaged and what ``daskgp repair`` can do."""
    from ..runs.draws import read_run

    return read_run(path)


def post_warmup(dt) -> tuple[xr.DataTree, list[str]]:
    """The sampling phase of a run in ArviZ's layout (``posterior`` holds the kept draws, the warmup's are in
    ``warmup_posterior``), without the chains that diverged. Notes chains still flagged as warming up among
    the kept draws (SGLD whose step size froze after the warmup's end). Returns (DataTree with posterior and
    sample_stats, notes); ValueError when there are fewer than 4 kept draws or every chain diverged."""
    if "posterior" not in dt.children or not dt["posterior"].to_dataset().sizes.get("draw", 0):
        raise ValueError("no draws after the warmup yet: run longer")
    post = dt["posterior"].to_dataset()
    stats = dt["sample_stats"].to_dataset() if "sample_stats" in dt.children else None
    notes = []
    first = next(iter(post.data_vars))
    ok = ~np.isnan(post[first].values).any(axis=1)
    messages = dt.attrs.get("messages", {})
    for c in np.flatnonzero(~ok):
        notes.append(f"chain {c} dropped: {messages.get(str(c), 'it stopped early')}")
    if not ok.any():
        raise ValueError("every chain diverged: " + "; ".join(notes))
    post = post.isel(chain=np.flatnonzero(ok))
    if stats is not None:
        stats = stats.isel(chain=np.flatnonzero(ok))
        if "warmup" in stats and stats["warmup"].values.any():
            warm = stats["warmup"].values.astype(bool)
            late = [f"{c} ({int(w.sum())} draws)" for c, w in zip(post["chain"].values, warm, strict=True)
                    if w.any()]
            notes.append(f"chains {', '.join(late)} were still in warmup after the warmup's end (SGLD's step "
                         "size not frozen yet): a longer n_adapt leaves them out")
    if post.sizes["draw"] < 4:
        raise ValueError(f"only {post.sizes['draw']} post-warmup draws: run longer")
    groups = {"posterior": post} if stats is None else {"posterior": post, "sample_stats": stats}
    out = xr.DataTree.from_dict(groups)
    n_warm = dt["warmup_posterior"].to_dataset().sizes["draw"] if "warmup_posterior" in dt.children else 0
    out.attrs = dict(dt.attrs, warmup_draws=int(dt.attrs.get("warmup_draws", n_warm)))
    return out, notes


def split_at_warmup(posterior: dict, sample_stats: dict, warmup_draws: int) -> xr.DataTree:
    """Whole chains ({name: (chains, draws)} arrays, warmup first) in ArviZ's layout: the first
    ``warmup_draws`` in warmup_posterior / warmup_sample_stats, the rest in posterior / sample_stats (what
    :func:`open_run` gives for a run on disk; the inverse of :func:`whole_chains`)."""
    W = int(warmup_draws)

    def group(arrays: dict, part: slice):
        # chain and draw coordinates (draw from 0 in each group), as a run on disk has them: ArviZ's rank
        # plot needs them
        ds = xr.Dataset({k: (("chain", "draw"), np.asarray(v)[:, part]) for k, v in arrays.items()})
        return ds.assign_coords({dim: np.arange(n) for dim, n in ds.sizes.items()})

    dt = xr.DataTree.from_dict({"warmup_posterior": group(posterior, slice(0, W)),
                                "warmup_sample_stats": group(sample_stats, slice(0, W)),
                                "posterior": group(posterior, slice(W, None)),
                                "sample_stats": group(sample_stats, slice(W, None))})
    dt.attrs["warmup_draws"] = W
    return dt


def whole_chains(dt) -> xr.DataTree:
    """A run's warmup and kept draws joined along ``draw`` (warmup first) as posterior / sample_stats: the
    whole trajectories, for trace plots that shade the warmup."""
    groups = {}
    for g in ("posterior", "sample_stats"):
        parts = [dt[k].to_dataset() for k in (f"warmup_{g}", g) if k in dt.children]
        if parts:
            joined = xr.concat([p.drop_vars("draw", errors="ignore") for p in parts], "draw")
            groups[g] = joined.assign_coords(draw=np.arange(joined.sizes["draw"]))
    out = xr.DataTree.from_dict(groups)
    out.attrs = dict(dt.attrs)
    return out


def running_diagnostics(dt, ess: bool = True) -> dict:
    """The live view of a growing run (the CLI's progress line, the dashboard): its kept draws as
    :func:`post_warmup` gives them, with 'phase' 'none' (no draws yet, or every chain diverged), 'warmup' (no
    kept draws yet, or some chain still warming up among them) or 'sampling'; 'start' (the warmup's length)
    and 'sampled' (the kept posterior Dataset); 'rhat' (rank) and, with ``ess``, 'ess' (bulk) per parameter,
    both empty while there are fewer than 8 draws or 2 chains."""
    out = {"phase": "none", "start": None, "sampled": None, "rhat": {}, "ess": {}}
    try:
        sampled, notes = post_warmup(dt)
    except ValueError:  # too few draws yet, or every chain diverged
        if "warmup_posterior" in dt.children and (
                "posterior" not in dt.children or dt["posterior"].to_dataset().sizes.get("draw", 0) < 4):
            out["phase"] = "warmup"
        return out
    ds = sampled["posterior"].to_dataset()
    out.update(phase="warmup" if any("warmup" in note for note in notes) else "sampling",
               start=int(sampled.attrs["warmup_draws"]), sampled=ds)
    if ds.sizes["draw"] >= 8 and ds.sizes["chain"] >= 2:
        out["rhat"] = {k: float(v) for k, v in az.rhat(ds).items()}
        if ess:
            out["ess"] = {k: float(v) for k, v in az.ess(ds).items()}
    return out


# the ESS a run must reach to be called converged when it was given no target (ArviZ's guidance: 100 per
# chain for 4 chains) — the dashboard's flag and the CLI summary's verdict
DEFAULT_TARGET_ESS = 400


@dataclass
class RunStatus:
    """Where a run stands after a committed block (the ``progress`` callback's argument).

    done: committed iterations per chain; n_iter: the run's length (its cap when it has a target);
    elapsed: wall seconds of the run so far (warmup included, pauses excluded); phase: 'none' | 'warmup' |
    'sampling' (see :func:`running_diagnostics`); rhat: largest rank R-hat; ess_bulk, ess_tail: smallest
    bulk and tail ESS over the parameters (post-warmup draws of all chains; None while too short);
    target_ess (None: :data:`DEFAULT_TARGET_ESS` judges ``converged``), target_rhat; eta: estimated seconds
    until the ESS target is reached (None while it cannot be estimated); messages: {chain: why it stopped};
    running: the least iteration count the chains' running segments have reported, when it is beyond
    ``done`` (else None); fidelity: the :class:`daskgp.mcmc.fidelity.Fidelity` checks of the kept draws
    (None for a method that records no gradients: MH, SGLD); warmup_draws: the iterations of the chains'
    adaptation (the kept draws begin after them); the diagnostics are those of the committed draws.
    """

    done: int
    n_iter: int
    elapsed: float
    phase: str = "none"
    rhat: float | None = None
    ess_bulk: float | None = None
    ess_tail: float | None = None
    target_ess: int | None = None
    target_rhat: float = 1.01
    eta: float | None = None
    messages: dict = field(default_factory=dict)
    running: int | None = None
    fidelity: object | None = None
    warmup_draws: int = 0

    @property
    def ess(self) -> float | None:
        """The smaller of the bulk and tail ESS (what a target must reach)."""
        return None if self.ess_bulk is None else min(self.ess_bulk, self.ess_tail)

    @property
    def sec_per_ess(self) -> float | None:
        """Wall seconds of the whole run per effective sample (the smaller of bulk and tail ESS)."""
        return self.elapsed / self.ess if self.ess else None

    @property
    def mixed(self) -> bool:
        """Sampling phase, every R-hat below ``target_rhat``, every bulk and tail ESS at the target."""
        target = self.target_ess or DEFAULT_TARGET_ESS
        return (self.phase == "sampling" and self.rhat is not None and self.rhat < self.target_rhat
                and self.ess is not None and self.ess >= target)

    @property
    def trustworthy(self) -> bool:
        """The fidelity checks pass (True where the method records none: MH is exact, SGLD unchecked)."""
        return self.fidelity is None or self.fidelity.trustworthy

    @property
    def converged(self) -> bool:
        """:attr:`mixed` and :attr:`trustworthy`: chains that agree on a biased distribution are not
        converged to the posterior."""
        return self.mixed and self.trustworthy


def run_status(posterior_blocks: dict[str, list], warmup_blocks: list, *, warmup_draws: int, done: int,
               n_iter: int, elapsed: float, seconds_per_draw: float | None = None,
               target_ess: int | None = None, target_rhat: float = 1.01,
               messages: dict | None = None, stats_blocks: dict[str, list] | None = None) -> RunStatus:
    """The :class:`RunStatus` of a growing run held as blocks in memory (the driver's progress and its
    stopping rule): ``posterior_blocks`` {name: [(chains, draws) arrays]}, ``warmup_blocks`` [(chains,
    draws) flags] of the whole chains, the first ``warmup_draws`` of them the warmup's (left out as
    :func:`running_diagnostics` leaves them out of a run on disk). ``seconds_per_draw``: wall
    seconds per iteration of every chain lately, for the time estimate — ESS grows in proportion to the
    sampled draws, so the draws still needed are sampled × (target / ESS − 1). ``stats_blocks`` {record:
    [(chains, draws)]}: the records the fidelity checks read ('grad_<name>', 'kinetic', 'stability'), when
    the method keeps them."""
    st = RunStatus(done=done, n_iter=n_iter, elapsed=elapsed, target_ess=target_ess, target_rhat=target_rhat,
                   messages=dict(messages or {}), warmup_draws=min(int(warmup_draws), n_iter))
    if not warmup_blocks:
        return st
    stats = {"warmup": np.concatenate(warmup_blocks, axis=1)}
    stats.update({k: np.concatenate(v, axis=1) for k, v in (stats_blocks or {}).items() if v})
    dt = split_at_warmup({k: np.concatenate(v, axis=1) for k, v in posterior_blocks.items()}, stats,
                         warmup_draws)
    live = running_diagnostics(dt, ess=False)
    st.phase = live["phase"]
    if stats_blocks and live["sampled"] is not None:
        st.fidelity = _fidelity(dt, list(posterior_blocks))
    if live["rhat"]:
        ds = live["sampled"]
        st.rhat = max(live["rhat"].values()) if ds.sizes["chain"] > 1 else None  # undefined for one chain
        st.ess_bulk = float(min(az.ess(ds, method="bulk").to_array().values))
        st.ess_tail = float(min(az.ess(ds, method="tail").to_array().values))
        target = target_ess or DEFAULT_TARGET_ESS
        if seconds_per_draw is not None and st.ess > 0:
            sampled = ds.sizes["draw"]
            st.eta = max(0.0, sampled * (target / st.ess - 1.0)) * seconds_per_draw
    return st


def _fidelity(dt, names):
    """The fidelity checks of the kept draws in ``dt``'s posterior / sample_stats; None when it records no
    gradients. Chains that diverged (NaN draws) are left out by the checks themselves, as
    :func:`post_warmup` leaves them out."""
    from .fidelity import fidelity_of_run

    if "sample_stats" not in dt.children or "posterior" not in dt.children:
        return None
    post, stats = dt["posterior"].to_dataset(), dt["sample_stats"].to_dataset()
    return fidelity_of_run({k: post[k].values for k in names},
                           {k: stats[k].values for k in stats.data_vars}, names)


def run_fidelity(dt):
    """The :class:`daskgp.mcmc.fidelity.Fidelity` checks of a run's kept draws (None for a method that
    records no gradients)."""
    sampled, _ = post_warmup(dt)
    names = [nm for nm in dt.attrs.get("param_names", []) if nm in sampled["posterior"].to_dataset()]
    return _fidelity(sampled, names)


def run_summary(dt) -> tuple[pd.DataFrame, list[str]]:
    """ArviZ summary of a run's post-warmup draws with seconds (wall time of the whole run) per bulk
    effective sample; plus the notes of :func:`post_warmup` and, first, the verdict of the fidelity checks
    (:mod:`daskgp.mcmc.fidelity`: 'NOT TRUSTWORTHY: …' when the chains sample another distribution)."""
    sampled, notes = post_warmup(dt)
    if sampled["posterior"].sizes["chain"] < 2:
        notes.append("R-hat is undefined for one chain (it compares chains): run 2 or more to judge mixing")
    names = [nm for nm in dt.attrs.get("param_names", []) if nm in sampled["posterior"].to_dataset()]
    fid = _fidelity(sampled, names) if names else None
    if fid is not None:
        notes.insert(0, fid.verdict())
    table = summary(sampled, dt.attrs.get("elapsed"))
    order = [nm for nm in dt.attrs.get("param_names", []) if nm in table.index]
    return (table.loc[order] if order else table), notes


RUN_EXPORT_KIND = "daskgp.run-export"  # the marker of a run written to netCDF by save_netcdf


def save_netcdf(dt, path, overwrite: bool = False) -> None:
    """Write a run (as from :func:`open_run`) to the netCDF file ``path`` (``.nc``), atomically and by the
    writer rule (:func:`daskgp.core.files.check_destination`: an existing file only with ``overwrite`` and
    only one this function wrote); structured attributes become JSON strings (ArviZ reads it:
    ``arviz.from_netcdf``)."""
    import json

    from ..core.files import MARK, check_destination, replaced_atomically

    check_destination(path, RUN_EXPORT_KIND, overwrite=overwrite, suffixes=(".nc",), flag="path")
    out = dt.copy()
    out.attrs = {k: v if isinstance(v, (str, int, float)) else json.dumps(v) for k, v in dt.attrs.items()}
    out.attrs[MARK] = RUN_EXPORT_KIND
    with replaced_atomically(path) as tmp:
        out.to_netcdf(tmp)
