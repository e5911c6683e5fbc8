"""SGPR's fit on the page (``daskgp sgpr``, :class:`daskgp.sparse.fit.FitCheckpoint`): the collapsed bound
after every L-BFGS-B iteration against the fit's wall seconds, and its iterates' held-out RMSE and NLPD."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .base import FitKind, bound_trace, register

REGRESSION_HELDOUT = ("test_rmse", "test_nlpd", "RMSE", "NLPD (nats)")


class SGPRKind(FitKind):
    name = "sgpr"
    checkpoint = "daskgp.sparse.fit:FitCheckpoint"
    what = "collapsed bound (nats)"
    heldout = REGRESSION_HELDOUT

    def trace(self, state):
        return bound_trace(state)

    def results(self, ds, out):
        out.trace = pd.DataFrame({"step": ds["iteration"].values.astype(int),
                                  "objective": ds["bound_trace"].values.astype(float)})
        secs = ds["iteration_seconds"].values if "iteration_seconds" in ds else None
        if secs is not None and np.isfinite(secs).all():
            out.trace["seconds"] = secs.astype(float)


register(SGPRKind())
