"""A Bayesian GPLVM fit's checkpoint (:class:`GPLVMCheckpoint`): the state after its last finished round, in a
fit checkpoint folder (:class:`daskgp.runs.fits.FitStore`), which ``BayesianGPLVM.fit(checkpoint=...,
resume=True)`` continues from."""

from __future__ import annotations

import numpy as np

from ..runs.commit import CHECKPOINT, RunDamaged
from ..runs.fits import FitStore
from .bound import GlobalParams

__all__ = ["GPLVMCheckpoint", "INFO_KEYS"]

INFO_KEYS = ("n_evaluations", "seconds_evaluating", "local_steps_undone", "seconds_local")


class GPLVMCheckpoint(FitStore):
    """A GPLVM fit after its last finished round (global step + local step), in a fit checkpoint folder
    (:class:`daskgp.runs.fits.FitStore`: one JSON commit of plain data with a digest, the previous commit,
    the writer's lock): the global parameters' vector, every point's q(x_i) (μ, S: n × q each, gathered from
    the workers in chunk order), the bound trace, the fit's wall seconds at each of its points (for readers
    such as the dashboard; not read back by a resume's fit except to continue the clock) and its counters."""

    kind = "daskgp.gplvm-checkpoint"
    what = "GPLVM"

    def write(self, key: str, rounds: int, theta: GlobalParams, mu, S, trace, info: dict,
              seconds=None) -> None:
        state = {"theta": theta.to_vector(), "mu": np.asarray(mu, float), "S": np.asarray(S, float),
                 "trace": np.asarray(trace, float), "info": {k: info[k] for k in INFO_KEYS}}
        if seconds is not None and len(seconds) == len(trace):
            state["seconds"] = np.asarray(seconds, float)
        self.commit(key, rounds, state)

    def seconds(self) -> list[float]:
        """The wall seconds the committed trace recorded (none from a checkpoint of daskgp <= 0.5)."""
        _, st = self.read_state(None)
        secs = np.asarray(st.get("seconds", []), float)
        return [float(t) for t in secs] if secs.shape == np.shape(st.get("trace")) else []

    def read(self, key: str, n: int, q: int, m: int):
        """(rounds done, θ, μ (n, q), S (n, q), trace, info) committed for ``key``. Raises
        FileNotFoundError without a checkpoint, ValueError (one line naming the file) when it is damaged or
        belongs to other data or settings."""
        rounds, st = self.read_state(key)
        try:
            v, mu, S = (np.asarray(st[k], float) for k in ("theta", "mu", "S"))
            trace = [float(t) for t in np.asarray(st["trace"], float)]
            if v.shape != (m * q + q + 2,) or mu.shape != (n, q) or S.shape != (n, q):
                raise ValueError("parameters of the wrong shape")
            if not (np.all(np.isfinite(v)) and np.all(np.isfinite(mu)) and np.all(S > 0)):
                raise ValueError("non-finite parameters or non-positive variances")
            info = {k: float(st["info"][k]) for k in INFO_KEYS}
        except (KeyError, TypeError, ValueError) as e:
            raise RunDamaged(f"{self.path}/{CHECKPOINT} holds {e}: start afresh without resuming") from None
        return rounds, GlobalParams.from_vector(v, m, q), mu, S, trace, info
