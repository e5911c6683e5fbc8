"""ADVGP's fit on the page (:class:`daskgp.advgp.server.ServerCheckpoint`): every server update's −ELBO
estimate against wall seconds, the staleness of the partitions' contributions and the updates each partition
triggered, and the held-out RMSE and NLPD the command line logs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .base import FitKind, register
from .sgpr import REGRESSION_HELDOUT


class ADVGPKind(FitKind):
    name = "advgp"
    checkpoint = "daskgp.advgp.server:ServerCheckpoint"
    what = "−ELBO estimate (nats)"
    heldout = REGRESSION_HELDOUT
    method_flag = "--optimizer"
    method_label = "Server update"

    def methods(self):
        from ...advgp.updates import ADVGP_UPDATES

        return ADVGP_UPDATES

    def trace(self, state):
        recs = state["records"]
        return pd.DataFrame({"step": [int(r["version"]) for r in recs],
                             "objective": [float(r["objective"]) for r in recs],
                             "seconds": [float(r["seconds"]) for r in recs],
                             "staleness": [list(map(int, r["staleness"])) for r in recs],
                             "staleness_max": [max(map(int, r["staleness"])) for r in recs],
                             "partition": [int(r.get("partition", -1)) for r in recs]})

    def results(self, ds, out):
        out.trace = pd.DataFrame({k: ds[v].values for k, v in (
            ("step", "update"), ("objective", "objective"), ("seconds", "seconds"),
            ("staleness_max", "max_staleness"), ("partition", "partition"))})
        if "contributions" in ds:
            out.staleness = (ds["staleness"].values.astype(int), ds["contributions"].values.astype(int))

    def extra_figures(self):
        from bokeh.models import ColumnDataSource
        from bokeh.plotting import figure

        stale = ColumnDataSource({"staleness": [], "count": []})
        f = figure(height=260, width=420, title="staleness of the contributions (all updates)",
                   x_axis_label="updates behind")
        f.vbar(x="staleness", top="count", width=0.8, source=stale)
        parts = ColumnDataSource({"partition": [], "count": []})
        g = figure(height=260, width=420, title="updates triggered per partition", x_axis_label="partition")
        g.vbar(x="partition", top="count", width=0.8, source=parts)
        return {"staleness": f, "partitions": g, "_sources": {"staleness": stale, "partitions": parts}}

    def update_extra(self, sources, trace, latent=None, staleness=None):
        if not len(trace):
            return
        if staleness is not None:  # a finished fit's counts (its results file keeps no per-update lists)
            values, counts = staleness
        else:
            values, counts = np.unique(np.concatenate([np.asarray(s, int) for s in trace["staleness"]]),
                                       return_counts=True)
        sources["staleness"].data = {"staleness": list(map(int, values)), "count": list(map(int, counts))}
        parts, pc = np.unique(np.asarray(trace["partition"], int), return_counts=True)
        sources["partitions"].data = {"partition": parts.tolist(), "count": pc.tolist()}


register(ADVGPKind())
