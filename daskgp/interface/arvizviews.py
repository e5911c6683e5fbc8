"""The dashboard's views drawn by ArviZ (arviz-plots' Bokeh backend) rather than by hand: a run's trace and
marginals, rank plots, ESS evolution and pairs from its kept draws, and the held-out posterior predictive
as ArviZ's predictive interval plot. Each call draws a new Bokeh layout (there are no data sources to stream
into), so the page redraws them whole, at most every :data:`ARVIZ_EVERY` seconds; the per-second live views
stay in :mod:`daskgp.interface.figures`."""

from __future__ import annotations

import numpy as np

__all__ = ["ARVIZ_PLOTS", "ARVIZ_EVERY", "arviz_figures", "PPC_POINTS", "PPC_REPLICATES", "heldout_ppc_tree",
           "heldout_ppc_figure"]

# redrawn whole when blocks have committed, at most every ARVIZ_EVERY seconds, in a background thread
ARVIZ_PLOTS = {"trace_dist": "Trace and marginal per chain (kept draws)",
               "rank": "Rank plots (uniform when the chains agree)",
               "ess_evolution": "Bulk and tail ESS as the draws grow",
               "pair": "Posterior pairs"}
ARVIZ_EVERY = 5.0


def arviz_figures(dt, width: int = 840) -> dict:
    """{name: Bokeh layout} of :data:`ARVIZ_PLOTS`, drawn by ArviZ (arviz-plots' Bokeh backend) from the kept
    draws of the run ``dt`` (:func:`daskgp.mcmc.diagnostics.post_warmup`: the warmup's draws and diverged
    chains left out, as in the run summaries), each grid's columns narrowed to fit ``width`` pixels in all
    (arviz-plots draws 400 px a panel). ValueError while there are too few kept draws."""
    import arviz as az

    from ..mcmc.diagnostics import post_warmup

    sampled, _ = post_warmup(dt)
    draw = {"trace_dist": az.plot_trace_dist, "rank": az.plot_rank, "ess_evolution": az.plot_ess_evolution,
            "pair": az.plot_pair}
    out = {}
    for name, plot in draw.items():
        if name == "pair" and len(sampled["posterior"].data_vars) < 2:
            continue
        grid = plot(sampled, backend="bokeh").viz["figure"].item()
        cols = 1 + max(c for _, _, c in grid.children)
        for fig, _, _ in grid.children:
            fig.width = min(fig.width or 400, width // cols - 10)
        out[name] = grid
    return out


PPC_POINTS = 60  # held-out points in ArviZ's predictive interval plot: one interval each, readable at 840 px
PPC_REPLICATES = 50  # replicated y per posterior draw


def heldout_ppc_tree(pred, observed, *, max_points: int = PPC_POINTS, replicates: int = PPC_REPLICATES,
                     seed: int = 0):
    """ArviZ's layout of the held-out posterior predictive: ``posterior_predictive`` y (chain 1, draw S·K,
    obs) — for each of the S posterior draws in ``pred`` (:func:`daskgp.exact.predict.predictive`:
    ``draw_mean``, ``draw_var`` (S, points), y units) K = ``replicates`` draws of y* from that draw's
    N(m_s, v_s), so the draws are the mixture predictive's — and ``observed_data`` y (``observed``, the
    held-out targets). At most ``max_points`` held-out points, evenly spread over them ordered by predictive
    mean (so the plot reads left to right)."""
    import xarray as xr

    means, var = np.asarray(pred["draw_mean"].values), np.asarray(pred["draw_var"].values)
    order = np.argsort(means.mean(axis=0), kind="stable")
    keep = order[np.unique(np.linspace(0, len(order) - 1, min(len(order), max_points)).astype(int))]
    m, v = means[:, keep], var[:, keep]
    rng = np.random.default_rng(seed)
    y = m[:, None, :] + np.sqrt(v)[:, None, :] * rng.standard_normal((m.shape[0], replicates, m.shape[1]))
    obs = {"obs": np.arange(len(keep))}
    return xr.DataTree.from_dict({
        "posterior_predictive": xr.Dataset({"y": (("chain", "draw", "obs"), y.reshape(1, -1, len(keep)))},
                                           {**obs, "chain": [0], "draw": np.arange(y.shape[0] * y.shape[1])}),
        "observed_data": xr.Dataset({"y": ("obs", np.asarray(observed, float)[keep])}, obs)})


def heldout_ppc_figure(pred, observed, width: int = 840):
    """ArviZ's predictive interval plot (arviz-plots ``plot_ppc_interval``, Bokeh backend: the mean, the
    central 50 % and 95 % intervals — as the held-out figure beside it — and the observed value per held-out
    point) of :func:`heldout_ppc_tree`."""
    import arviz as az

    grid = az.plot_ppc_interval(heldout_ppc_tree(pred, observed), backend="bokeh", ci_kind="eti",
                                ci_probs=(0.5, 0.95)).viz["figure"].item()
    for fig, _, _ in grid.children:
        fig.width = min(fig.width or width, width)
    return grid
