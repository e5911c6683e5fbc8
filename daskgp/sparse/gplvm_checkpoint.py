"""A Bayesian GPLVM fit's checkpoint (:class:`GPLVMCheckpoint`): the state after its last finished round, in a
fit checkpoint folder (:class:`daskgp.runs.fits.FitStore`), which ``BayesianGPLVM.fit(checkpoint=...,
resume=True)`` continues from."""

from __future__ import annotations

import numpy as np

from ..runs.commit import CHECKPOINT, RunDamaged
from ..runs.fitarrays import ARRAY_KEY
from ..runs.fits import FitStore
from .bound import GlobalParams

__all__ = ["GPLVMCheckpoint", "INFO_KEYS", "LatentRows"]

INFO_KEYS = ("n_evaluations", "seconds_evaluating", "local_steps_undone", "seconds_local")


class LatentRows:
    """Every row's q(x_i) as a checkpoint holds it: :meth:`blocks` gives (μ, S) of row blocks in order, one
    block in memory at a time — from the checkpoint's array file (read as it is asked for, its digest
    checked first) or from arrays a checkpoint of daskgp <= 0.3 held in its JSON state."""

    def __init__(self, n: int, q: int, read=None, mu=None, S=None):
        self.n, self.q, self._read, self._mu, self._S = n, q, read, mu, S

    def blocks(self, edges):
        """An iterator of (μ (b, q), S (b, q)) for the row blocks ``edges`` [(start, stop), …]."""
        if self._read is None:
            return ((self._mu[a:b], self._S[a:b]) for a, b in edges)
        return ((v[:, :self.q], v[:, self.q:]) for v in self._read(edges))


class GPLVMCheckpoint(FitStore):
    """A GPLVM fit after its last finished round (global step + local step), in a fit checkpoint folder
    (:class:`daskgp.runs.fits.FitStore`: one JSON commit of plain data with a digest, the previous commit,
    the writer's lock): the global parameters' vector, the bound trace, the fit's wall seconds at each of its
    points (for readers such as the dashboard; not read back by a resume's fit except to continue the clock)
    and its counters in the commit; every point's q(x_i) as one array file beside it (n × 2q: μ then S),
    streamed from the workers chunk by chunk in chunk order (:meth:`FitStore.write_array`): the fit never
    holds it whole."""

    kind = "daskgp.gplvm-checkpoint"
    what = "GPLVM"

    def write(self, key: str, rounds: int, theta: GlobalParams, latent_blocks, n: int, q: int, trace,
              info: dict, seconds=None) -> None:
        """Commit round ``rounds``: ``latent_blocks`` yields [μ | S] (b, 2q) of consecutive row blocks, n
        rows in all."""
        ref = self.write_array("latent", rounds, latent_blocks, (n, 2 * q))
        state = {"theta": theta.to_vector(), "latent": ref, "trace": np.asarray(trace, float),
                 "info": {k: info[k] for k in INFO_KEYS}}
        if seconds is not None and len(seconds) == len(trace):
            state["seconds"] = np.asarray(seconds, float)
        self.commit(key, rounds, state)

    def seconds(self) -> list[float]:
        """The wall seconds the committed trace recorded (none from a checkpoint of daskgp <= 0.5)."""
        _, st = self.read_state(None)
        secs = np.asarray(st.get("seconds", []), float)
        return [float(t) for t in secs] if secs.shape == np.shape(st.get("trace")) else []

    def read(self, key: str, n: int, q: int, m: int):
        """(rounds done, θ, :class:`LatentRows`, trace, info) committed for ``key``; the q(x_i) array's
        digest is checked here, its finiteness as its blocks are read. Raises FileNotFoundError without a
        checkpoint, ValueError (one line naming the file) when it is damaged or belongs to other data or
        settings."""
        rounds, st = self.read_state(key)
        try:
            v = np.asarray(st["theta"], float)
            trace = [float(t) for t in np.asarray(st["trace"], float)]
            if v.shape != (m * q + q + 2,):
                raise ValueError("parameters of the wrong shape")
            if not np.all(np.isfinite(v)):
                raise ValueError("non-finite parameters")
            info = {k: float(st["info"][k]) for k in INFO_KEYS}
            if "latent" in st:
                ref = st["latent"]
                shape = list(ref.get("shape", [])) if isinstance(ref, dict) else None
                if ARRAY_KEY not in ref or shape != [n, 2 * q]:
                    raise ValueError("a q(x_i) array of the wrong shape")
                latent = LatentRows(n, q, read=self._checked_reader(ref))
            else:  # daskgp <= 0.3: μ and S in the JSON state
                mu, S = (np.asarray(st[k], float) for k in ("mu", "S"))
                if mu.shape != (n, q) or S.shape != (n, q):
                    raise ValueError("parameters of the wrong shape")
                if not (np.all(np.isfinite(mu)) and np.all(S > 0)):
                    raise ValueError("non-finite parameters or non-positive variances")
                latent = LatentRows(n, q, mu=mu, S=S)
        except (KeyError, TypeError, ValueError) as e:
            raise RunDamaged(f"{self.path}/{CHECKPOINT} holds {e}: start afresh without resuming") from None
        return rounds, GlobalParams.from_vector(v, m, q), latent, trace, info

    def _checked_reader(self, ref: dict):
        """A reader of the q(x_i) array's row blocks (its digest checked now, by a first pass); every block
        it gives is checked finite with positive variances as it is read."""
        self.read_array(ref, [])  # the digest, over the whole file, before the fit relies on it
        q = int(ref["shape"][1]) // 2

        def read(edges):
            for v in self.read_array(ref, edges, verify=False):
                if not (np.all(np.isfinite(v)) and np.all(v[:, q:] > 0)):
                    raise RunDamaged(f"{self.path} holds non-finite latent means or non-positive variances: "
                                     "start afresh without resuming")
                yield v
        return read
