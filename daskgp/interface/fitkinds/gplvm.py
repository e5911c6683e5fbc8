"""The Bayesian GPLVM's fit on the page (:class:`daskgp.sparse.gplvm_checkpoint.GPLVMCheckpoint`): the bound
after every global iteration and local step, committed once a round, and the latent means — the embedding,
drawn in its first two dimensions. It has no command line and no held-out log."""

from __future__ import annotations

import numpy as np

from .base import FitKind, bound_trace, register


class GPLVMKind(FitKind):
    name = "gplvm"
    checkpoint = "daskgp.sparse.gplvm:GPLVMCheckpoint"
    what = "bound (nats)"
    unit = "rounds"  # a GPLVM commits once a round
    trace_note = "{n} points of the bound (global iterations and local steps)"

    def trace(self, state):
        return bound_trace(state)

    def latent(self, path, max_points: int = 5000):
        """The latent means μ (k, q) committed in the checkpoint at ``path``, at most ``max_points`` rows
        spread evenly over the n."""
        store = self.store(path)
        _, state = store.read_state(None)

        def spread(n):
            return np.unique(np.linspace(0, n - 1, min(n, max_points)).astype(int)) if n else []

        if "mu" in state:  # a checkpoint of daskgp <= 0.3: μ in the commit
            mu = np.asarray(state["mu"], float)
            return mu[spread(len(mu))]
        n, q2 = (int(k) for k in state["latent"]["shape"])  # [μ | S] in the array file: read those rows only
        rows = list(store.read_array(state["latent"], [(int(i), int(i) + 1) for i in spread(n)]))
        return np.concatenate(rows)[:, :q2 // 2] if rows else np.zeros((0, q2 // 2))

    def extra_figures(self):
        from bokeh.models import ColumnDataSource
        from bokeh.plotting import figure

        src = ColumnDataSource({"x": [], "y": []})
        f = figure(height=320, width=420, title="latent means (first two dimensions)", x_axis_label="x₁",
                   y_axis_label="x₂")
        f.scatter("x", "y", source=src, size=3, alpha=0.5)
        return {"latent": f, "_sources": {"latent": src}}

    def update_extra(self, sources, trace, latent=None, staleness=None):
        if latent is not None and latent.shape[1] >= 2:
            sources["latent"].data = {"x": latent[:, 0].tolist(), "y": latent[:, 1].tolist()}


register(GPLVMKind())
