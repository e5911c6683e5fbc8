"""A sparse fit in progress, as the dashboard shows it (issue 35, item 3, first part): the trace that each
family's checkpoint folder holds after every finished step, read-only through the family's own
:class:`daskgp.runs.fits.FitStore` (checked against its digest, never locked, never resumed).

What each checkpoint holds, and so what is drawn against the fit's steps:

* SGPR (``daskgp sgpr``, :class:`daskgp.sparse.fit.FitCheckpoint`): the collapsed bound after every L-BFGS-B
  iteration (nats, standardised y) and the fit's wall seconds at each;
* ADVGP (:class:`daskgp.advgp.server.ServerCheckpoint`): every server update's objective estimate (−ELBO,
  nats), its wall seconds, the staleness of every partition's contribution, and the partition whose gradient
  triggered it — hence the objective against time, the staleness histogram and the updates per partition;
* GPC (:class:`daskgp.gpc.fit.GPCCheckpoint`): EP's evidence approximation and the training error per
  iteration;
* the Bayesian GPLVM (:class:`daskgp.sparse.gplvm.GPLVMCheckpoint`): the bound after every round, and the
  latent means — the embedding, drawn in its first two dimensions.

Held-out measurements come from the command line, which holds the test rows: ``daskgp advgp`` and ``daskgp
gpc`` append theirs (test RMSE; test error and a reliability diagram's bins) beside the checkpoint every 10
steps (:meth:`daskgp.runs.fits.FitStore.log_heldout`), when the test rows are in memory (not for a table read
on the workers, whose test metrics are reduced there once, at the end). Not yet: a held-out metric for SGPR
(each would cost a pass over the rows), times for the GPLVM, and a finished fit (its checkpoint is removed;
its results file holds the trace).
"""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
import pandas as pd

from ..runs.catalog import commit_stamp, describe

__all__ = ["FIT_KINDS", "StoredFit", "fit_heldout", "fit_latent", "fit_trace"]

# the catalogue's kind → (the family's checkpoint class, what its objective is)
FIT_KINDS = {"sgpr": ("daskgp.sparse.fit:FitCheckpoint", "collapsed bound (nats)"),
             "advgp": ("daskgp.advgp.server:ServerCheckpoint", "−ELBO estimate (nats)"),
             "gpc": ("daskgp.gpc.fit:GPCCheckpoint", "evidence approximation (nats)"),
             "gplvm": ("daskgp.sparse.gplvm:GPLVMCheckpoint", "bound (nats)")}


def _store(kind: str, path: str):
    import importlib

    module, cls = FIT_KINDS[kind][0].split(":")
    return getattr(importlib.import_module(module), cls)(path)


def fit_trace(path: str, kind: str) -> pd.DataFrame:
    """The trace committed in the fit checkpoint at ``path`` of family ``kind`` (a key of
    :data:`FIT_KINDS`): one row per finished step, columns ``step`` and ``objective`` and, where the family
    records them, ``seconds``, ``staleness_max``, ``staleness`` (list), ``partition`` (ADVGP),
    ``train_error`` (GPC). Raises ValueError (one line) for a damaged checkpoint or another kind."""
    if kind not in FIT_KINDS:
        raise ValueError(f"no trace view for a {kind!r} checkpoint (known: {', '.join(FIT_KINDS)})")
    _, state = _store(kind, path).read_state(None)
    if kind in ("sgpr", "gplvm"):
        trace = np.asarray(state["trace"], float)
        out = pd.DataFrame({"step": np.arange(1, len(trace) + 1), "objective": trace})
        secs = np.asarray(state.get("seconds", []), float)
        if secs.shape == trace.shape and np.isfinite(secs).all():  # SGPR records them since daskgp 0.6
            out["seconds"] = secs
        return out
    if kind == "advgp":
        recs = state["records"]
        return pd.DataFrame({"step": [int(r["version"]) for r in recs],
                             "objective": [float(r["objective"]) for r in recs],
                             "seconds": [float(r["seconds"]) for r in recs],
                             "staleness": [list(map(int, r["staleness"])) for r in recs],
                             "staleness_max": [max(map(int, r["staleness"])) for r in recs],
                             "partition": [int(r.get("partition", -1)) for r in recs]})
    ev = np.asarray(state["evidence"], float)
    return pd.DataFrame({"step": np.arange(1, len(ev) + 1), "objective": ev,
                         "train_error": np.asarray(state["train_error"], float)})


def fit_latent(path: str, max_points: int = 5000) -> np.ndarray:
    """The Bayesian GPLVM's latent means μ (k, q) committed in its checkpoint at ``path``, at most
    ``max_points`` rows spread evenly over the n (the embedding the page draws)."""
    _, state = _store("gplvm", path).read_state(None)
    mu = np.asarray(state["mu"], float)
    idx = np.unique(np.linspace(0, len(mu) - 1, min(len(mu), max_points)).astype(int)) if len(mu) else []
    return mu[idx]


def fit_heldout(path: str) -> pd.DataFrame:
    """The held-out measurements ``daskgp advgp`` / ``daskgp gpc`` logged beside the checkpoint at ``path``
    (:meth:`daskgp.runs.fits.FitStore.log_heldout`): one row each, with ``step``, ``seconds`` and
    ``test_rmse`` (ADVGP) or ``test_error`` and ``calibration`` (GPC); empty without a log."""
    from ..runs.fits import FitStore

    return pd.DataFrame(FitStore(path).read_heldout())


class StoredFit:
    """A fit checkpoint the page opened: ``refresh()`` rereads its trace when its commit changed; ``status``
    says who writes it; ``message`` holds the one line of a damaged checkpoint."""

    def __init__(self, path: str, root: str, kind: str):
        self.out, self.root, self.kind = path, root, kind
        self.what = FIT_KINDS[kind][1]
        self.stage, self.dask_link, self.progress, self.message = "", None, None, ""
        self.status, self.trace, self.entry, self._seen = "opening", None, None, None
        self.latent, self.heldout = None, pd.DataFrame()
        self.feature_names: list[str] = []
        self._tmp = tempfile.mkdtemp(prefix="daskgp-dashboard-fit-")
        self.refresh()

    def refresh(self) -> bool:
        """Reread the trace when the checkpoint changed since the last read; True when it did."""
        self.entry = describe(self.out, self.root)
        if self.entry is None:
            self.status, self.message = "failed", f"{self.out} is no longer a fit checkpoint"
            return False
        stamp = commit_stamp(self.out)
        who = f"being written by {self.entry.who}" if self.entry.state == "writing" else "stopped"
        self.status = f"{self.kind} fit, {who} — {self.entry.steps} steps committed"
        if stamp == self._seen and self.trace is not None:
            return False
        try:
            self.trace = fit_trace(self.out, self.kind)
            self.latent = fit_latent(self.out) if self.kind == "gplvm" else None
            self.heldout = fit_heldout(self.out)
        except (OSError, ValueError) as e:
            self.status, self.message = "failed", str(e).splitlines()[0]
            return False
        self._seen, self.message = stamp, ""
        return True

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)
