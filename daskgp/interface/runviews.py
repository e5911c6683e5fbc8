"""What the dashboard shows of a chains run, live or stored: :class:`RunViews`, the views both
:class:`daskgp.interface.dashboard.LiveRun` (a run this page drives) and
:class:`daskgp.interface.stored.StoredRun` (a run on disk, read-only) give from a snapshot of their draws —
the diagnostics (ArviZ R-hat, ESS, PSRF evolution), the MAP plug-in, the mixture predictive on the held-out
rows and along one input dimension, and the exports (netCDF, summary CSV)."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["RunViews"]


class RunViews:
    """What the page reads from a run, given its draws as an ArviZ DataTree (:meth:`as_run`), its
    training data (``X_train``, ``y_train`` standardised, ``x_scaler``, ``y_scaler``, ``X_test``/``y_test``
    or None), its settings (``settings.kernel``, ``settings.ard``), the sampler that ran it (``method``, a
    registry name: the page's figures follow its records), its store ``out`` and a ``workdir`` for
    downloads: shared by a run the page started (:class:`LiveRun`) and one it opened from disk
    (:class:`daskgp.interface.stored.StoredRun`)."""

    X_test = None
    y_test = None

    def as_run(self):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def sampling_start(self) -> int | None:
        """First draw of the sampling phase (the warmup's length); None while the kept draws have not begun
        or some chain is still warming up among them (SGLD's step size not yet frozen)."""
        from ..mcmc.diagnostics import running_diagnostics

        dt = self.as_run()
        live = running_diagnostics(dt, ess=False) if dt is not None else {"phase": "none"}
        return live["start"] if live["phase"] == "sampling" else None

    def diagnostics(self) -> dict:
        """R-hat (rank), bulk ESS per parameter and the PSRF evolution on the kept draws so far (the
        warmup's left out, as in the run summaries: :func:`daskgp.mcmc.diagnostics.running_diagnostics`)."""
        from ..mcmc.diagnostics import psrf_evolution, running_diagnostics

        dt = self.as_run()
        live = running_diagnostics(dt) if dt is not None else {"phase": "none", "rhat": {}, "ess": {}}
        out = {"rhat": live["rhat"], "ess": live["ess"], "phase": live["phase"], "evolution": None}
        if live["rhat"]:
            ev = psrf_evolution(live["sampled"], n_points=15)
            out["evolution"] = (ev["n_draws"].values, ev["median"].values, ev["q975"].values)
        return out

    def _log_draws(self, n_draws: int) -> np.ndarray | None:
        from ..mcmc.estimator import thinned_log_draws

        dt = self.as_run()
        try:
            return None if dt is None else thinned_log_draws(dt, n_draws)
        except ValueError:
            return None

    def _kernel(self):
        from ..model.kernels import make_kernel

        return make_kernel(self.settings.kernel, ard=self.settings.ard, n_dims=self.X_train.shape[1])

    def map_log_params(self) -> np.ndarray | None:
        """φ_MAP of the subset posterior stored with the run (the MAP plug-in baseline)."""
        import json

        import zarr

        try:
            return np.array(json.loads(zarr.open_group(self.out, mode="r").attrs["phi_map"]))
        except (FileNotFoundError, KeyError, ValueError, OSError):
            return None

    def heldout_predictive(self, n_draws: int = 20, max_train: int = 5000):
        """Mixture predictive at the held-out inputs: Dataset (mean, lower, upper in y units), or None (also
        for a run without held-out rows)."""
        from ..exact.predict import predictive

        draws = self._log_draws(n_draws)
        if draws is None or self.X_test is None or len(self.y_train) > max_train:
            return None
        pred = predictive(self.X_train, self.y_train, self._kernel(), draws, self.X_test,
                          y_scaler=self.y_scaler, exact=True)
        return pred.assign(observed=("point", self.y_test))

    def slice_predictive(self, dim: int, n_points: int = 60, n_draws: int = 20, max_train: int = 5000):
        """Along input ``dim`` (the others at their training median): the mixture predictive over draws and
        the MAP plug-in predictive. Returns (x in original units, mixture Dataset, MAP Dataset) or None."""
        from ..exact.predict import predictive

        draws, phi_map = self._log_draws(n_draws), self.map_log_params()
        if draws is None or phi_map is None or len(self.y_train) > max_train:
            return None
        lo, hi = np.percentile(self.X_train[:, dim], [1, 99])
        grid = np.tile(np.median(self.X_train, axis=0), (n_points, 1))
        grid[:, dim] = np.linspace(lo, hi, n_points)
        kw = dict(y_scaler=self.y_scaler, exact=True)
        mix = predictive(self.X_train, self.y_train, self._kernel(), draws, grid, **kw)
        plug = predictive(self.X_train, self.y_train, self._kernel(), phi_map[None, :], grid, **kw)
        x = self.x_scaler.inverse_transform(grid)[:, dim]
        return x, mix, plug

    def export_netcdf(self) -> str:
        """The posterior (and sample_stats) committed so far, as a netCDF file; returns its path."""
        from ..mcmc.diagnostics import open_run, save_netcdf

        path = os.path.join(self.workdir, "posterior.nc")
        save_netcdf(open_run(self.out), path, overwrite=True)  # the last download's file, in our folder
        return path

    def export_summary_csv(self) -> str:
        from ..mcmc.diagnostics import open_run, run_summary

        path = os.path.join(self.workdir, "summary.csv")
        table, _ = run_summary(open_run(self.out))
        table.to_csv(path)
        return path
