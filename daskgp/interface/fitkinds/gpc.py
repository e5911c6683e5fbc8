"""Sparse GP classification's fit on the page (:class:`daskgp.gpc.fit.GPCCheckpoint`): EP's evidence
approximation and the training error under q per iteration, the held-out error rate and log loss the command
line logs, and a reliability diagram (the log's latest bins, or a finished fit's from its test
predictions)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .base import FitKind, register


class GPCKind(FitKind):
    name = "gpc"
    checkpoint = "daskgp.gpc.fit:GPCCheckpoint"
    what = "evidence approximation (nats)"
    heldout = ("test_error", "test_nll", "error rate", "NLL (nats)")
    method_label = "Classifier update"
    default_method = "sep"

    def methods(self):
        from ...gpc.methods import GPC_METHODS

        return GPC_METHODS

    def trace(self, state):
        ev = np.asarray(state["evidence"], float)
        return pd.DataFrame({"step": np.arange(1, len(ev) + 1), "objective": ev,
                             "train_error": np.asarray(state["train_error"], float)})

    def results(self, ds, out):
        out.trace = pd.DataFrame({"step": np.arange(1, ds.sizes.get("iteration", 0) + 1),
                                  "objective": ds["evidence"].values.astype(float),
                                  "train_error": ds["train_error"].values.astype(float)})
        if "test_proba" in ds and "test_label" in ds:
            from ..cli.gpc import calibration_bins

            # the class whose probability test_proba is, as str(classes_[1]) like the stored labels
            positive = ds["test_label"].values.astype(str) == str(ds.attrs["positive_class"])
            out.calibration = calibration_bins(ds["test_proba"].values, positive)

    def extra_figures(self):
        from bokeh.models import ColumnDataSource
        from bokeh.plotting import figure

        from ..figures import xy_figure

        f, err = xy_figure("training error under q", "step")
        cal = ColumnDataSource({"p": [], "freq": [], "n": []})
        c = figure(height=300, width=320, title="calibration (held-out, latest)",
                   x_axis_label="predicted probability", y_axis_label="observed frequency",
                   x_range=(0, 1), y_range=(0, 1))
        c.line([0, 1], [0, 1], line_dash="dashed", color="gray")
        c.line("p", "freq", source=cal)
        c.scatter("p", "freq", source=cal, size=6)
        return {"train_error": f, "calibration": c, "_sources": {"train_error": err, "calibration": cal}}

    def update_extra(self, sources, trace, latent=None, staleness=None):
        sources["train_error"].data = {"x": list(map(float, trace["step"])),
                                       "y": list(map(float, trace["train_error"]))}

    def update_calibration(self, sources, heldout, calibration=None):
        if calibration is None and "calibration" in heldout and len(heldout):
            calibration = heldout["calibration"].iloc[-1]
        if calibration is not None:
            bins = np.asarray(calibration, float).reshape(-1, 3)
            sources["calibration"].data = {"p": bins[:, 0].tolist(), "freq": bins[:, 1].tolist(),
                                           "n": bins[:, 2].tolist()}


register(GPCKind())
