"""A sparse fit, in progress or finished, as the dashboard shows it (issue 35, item 3): the trace that each
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
on the workers, whose test metrics are reduced there once, at the end); ``daskgp sgpr`` logs its iterates'
test RMSE and NLPD every 10 iterations from the statistics its last evaluation computed anyway (no extra
pass over the rows: :meth:`daskgp.SparseGPRegressor.fit`'s ``on_posterior``).

A finished fit's checkpoint is removed; its results file (``--out``) keeps the same trace and the held-out
log (``heldout_*`` variables), and :func:`fit_results` reads it, with the final test metric as the held-out
curve's last point, ADVGP's staleness counts, and GPC's reliability bins from the stored test predictions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..runs.catalog import RESULT_KINDS, commit_stamp, describe
from .fitkinds import FIT_KINDS, fit_kind

__all__ = ["FIT_KINDS", "FitResults", "StoredFit", "fit_heldout", "fit_latent", "fit_results", "fit_trace"]

def fit_trace(path: str, kind: str) -> pd.DataFrame:
    """The trace committed in the fit checkpoint at ``path`` of family ``kind`` (a key of
    :data:`FIT_KINDS`): one row per finished step, columns ``step`` and ``objective`` and, where the family
    records them, ``seconds``, ``staleness_max``, ``staleness`` (list), ``partition`` (ADVGP),
    ``train_error`` (GPC). Raises ValueError (one line) for a damaged checkpoint or another kind."""
    view = fit_kind(kind)
    _, state = view.store(path).read_state(None)
    return view.trace(state)


def fit_latent(path: str, max_points: int = 5000) -> np.ndarray:
    """The Bayesian GPLVM's latent means μ (k, q) committed in its checkpoint at ``path``, at most
    ``max_points`` rows spread evenly over the n (the embedding the page draws)."""
    return fit_kind("gplvm").latent(path, max_points)


def fit_heldout(path: str) -> pd.DataFrame:
    """The held-out measurements ``daskgp advgp`` / ``daskgp gpc`` logged beside the checkpoint at ``path``
    (:meth:`daskgp.runs.fits.FitStore.log_heldout`): one row each, with ``step``, ``seconds`` and
    ``test_rmse`` (ADVGP) or ``test_error`` and ``calibration`` (GPC); empty without a log."""
    from ..runs.fits import FitStore

    return pd.DataFrame(FitStore(path).read_heldout())


@dataclass
class FitResults:
    """A finished fit as :func:`fit_results` reads it from its results file: ``kind``, ``trace`` and
    ``heldout`` as :func:`fit_trace` and :func:`fit_heldout` give them, ``staleness`` (ADVGP: (staleness,
    contributions) over all updates) and ``calibration`` (GPC with its test predictions: the reliability
    bins)."""

    kind: str
    trace: pd.DataFrame
    heldout: pd.DataFrame
    staleness: tuple | None = None
    calibration: list | None = None


def fit_results(path: str) -> FitResults:
    """The finished fit in the results file at ``path`` (netCDF: ``daskgp sgpr|advgp|gpc --out`` or a
    model's ``save``). ValueError (one line) for a file daskgp did not write as one of those."""
    import xarray as xr

    from ..core.files import MARK, written_kind

    if written_kind(path) not in RESULT_KINDS:
        raise ValueError(f"{path} is not a daskgp SGPR, ADVGP or GPC results file")
    try:
        with xr.open_dataset(path) as f:
            ds = f.load()
    except Exception as e:  # noqa: BLE001 — a truncated file: the netCDF readers raise many kinds
        raise ValueError(f"{path} is not a readable netCDF file ({type(e).__name__})") from None
    kind = RESULT_KINDS[ds.attrs[MARK]][0]
    out = FitResults(kind, pd.DataFrame(), pd.DataFrame())
    try:
        fit_kind(kind).results(ds, out)
    except KeyError as e:  # a variable, or an attribute such as positive_class
        raise ValueError(f"{path} is an incomplete daskgp results file (no {e})") from None
    out.heldout = _heldout_of(ds, kind, out.trace)
    return out


def _heldout_of(ds, kind: str, trace: pd.DataFrame) -> pd.DataFrame:
    """The results file's held-out log, its final test metrics (the file's attributes) appended at the fit's
    last step."""
    cols = {k.removeprefix("heldout_"): ds[k].values for k in ds.data_vars if k.startswith("heldout_")}
    held = pd.DataFrame(cols)
    metric, other = fit_kind(kind).heldout[:2]  # other: not in a table's or an older file
    final = ds.attrs.get(metric)
    if final is not None and len(trace):
        last = {"step": int(trace["step"].iloc[-1]), metric: float(final)}
        if other in ds.attrs:
            last[other] = float(ds.attrs[other])
        if "seconds" in trace:
            last["seconds"] = float(trace["seconds"].iloc[-1])
        if len(held) == 0 or int(held["step"].iloc[-1]) < last["step"]:
            held = pd.concat([held, pd.DataFrame([last])], ignore_index=True)
    return held


class StoredFit:
    """A fit checkpoint, or a finished fit's results file, the page opened: ``refresh()`` rereads its trace
    when its commit (the file) changed; ``status`` says who writes it; ``message`` holds the one line of a
    damaged checkpoint; ``staleness`` and ``calibration`` are a results file's (:class:`FitResults`)."""

    def __init__(self, path: str, root: str, kind: str):
        self.out, self.root, self.kind = path, root, kind
        self.view = fit_kind(kind)
        self.what = self.view.what
        self.status, self.message, self.trace, self.entry, self._seen = "opening", "", None, None, None
        self.latent, self.heldout = None, pd.DataFrame()
        self.staleness, self.calibration = None, None
        self.finished = os.path.isfile(path)
        self.feature_names: list[str] = []  # a fit has no input slice on the page
        self.refresh()

    def refresh(self) -> bool:
        """Reread the trace when the checkpoint (the results file) changed since the last read; True when it
        did."""
        stamp = self._stamp()
        if self.finished and stamp is not None and stamp == self._seen and self.trace is not None:
            return False  # a results file changes only when rewritten: nothing to look at again till then
        self.entry = describe(self.out, self.root)
        if self.entry is None:
            why = "" if self.finished else " (a finished fit removes its checkpoint: open its results file)"
            self.status = "failed"
            self.message = f"{self.out} is no longer a fit checkpoint or results file{why}"
            return False
        if self.finished:
            self.status = f"{self.kind} fit, finished — {self.entry.steps} steps"
        else:
            who = f"being written by {self.entry.who}" if self.entry.state == "writing" else "stopped"
            self.status = f"{self.kind} fit, {who} — {self.entry.steps} {self.view.unit} committed"
        if stamp == self._seen and self.trace is not None:
            return False
        try:
            if self.finished:
                res = fit_results(self.out)
                self.trace, self.heldout = res.trace, res.heldout
                self.staleness, self.calibration = res.staleness, res.calibration
            else:
                self.trace = fit_trace(self.out, self.kind)
                self.latent = self.view.latent(self.out)
                self.heldout = fit_heldout(self.out)
        except (OSError, ValueError) as e:
            self.status, self.message = "failed", str(e).splitlines()[0]
            return False
        self._seen, self.message = stamp, ""
        return True

    def _stamp(self) -> tuple[int, int] | None:
        """(mtime in ns, size) of the last commit, or of the results file; None when it is gone."""
        if not self.finished:
            return commit_stamp(self.out)
        try:
            st = os.stat(self.out)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def close(self) -> None:
        """Nothing to release: the page reads a fit and writes nothing for it."""
