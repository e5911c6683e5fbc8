"""Runs as ArviZ posterior containers and the convergence summaries of the paper, computed by ArviZ.

* :func:`to_datatree` — (chain, draw, p) log-parameter draws → an ``xarray.DataTree`` with a ``posterior``
  group in natural units (one variable per parameter) and a ``sample_stats`` group (per-iteration records).
* :func:`psrf_evolution` — R-hat on growing prefixes of the chains: median and 97.5% quantile across
  parameters, as in the paper's figures (ArviZ has no R-hat evolution plot).
* :func:`summary` — ArviZ's summary table plus seconds per effective sample.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["to_datatree", "psrf_evolution", "summary"]


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
