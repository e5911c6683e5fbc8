"""A classifier fit's checkpoint (:class:`GPCCheckpoint`): the state of :func:`daskgp.gpc.fit.run_ep` after
its last finished iteration, committed as plain data (:mod:`daskgp.runs.fits`).
"""

from __future__ import annotations

import numpy as np

from ..core.optim import Adam
from ..runs.commit import CHECKPOINT, RunDamaged
from ..runs.fits import FitStore
from .ep import Factor, GPCParams
from .state import EPState, IterationRecord

__all__ = ["GPCCheckpoint", "place_sites"]


class GPCCheckpoint(FitStore):
    """A classifier fit's whole state after its last finished iteration, in a fit checkpoint folder
    (:class:`daskgp.runs.fits.FitStore`: one JSON commit of plain data with a digest, the previous commit,
    the writer's lock): the hyperparameters, the factor, Adam's moments and step count, the records, the
    best iterate so far and — for EP — every point's site, gathered from the workers in chunk order; with a
    key naming the data and settings. The minibatches are seeded by (seed, iteration, chunk), so a fit
    resumed from it continues exactly as the uninterrupted one. Committed after every iteration: an
    interruption, SIGKILL included, loses at most the iteration in progress."""

    kind = "daskgp.gpc-checkpoint"
    what = "classifier"
    legacy_suffix = ".npz"  # daskgp <= 0.3 wrote OUT.checkpoint.npz

    def write(self, state: EPState, key: str, client=None) -> None:
        rec = state.records
        best_it, bp, bf = state.best or (0, state.params, state.factor)  # 0: none judged yet
        # the parameters in natural units, as the fit holds them: exp(log x) may differ from x in the last bit
        arrays = dict(Z=state.params.Z, variance=float(state.params.variance),
                      lengthscales=state.params.lengthscales, T=state.factor.T, c=state.factor.c,
                      adam_m=state.adam.m, adam_v=state.adam.v, adam_t=int(state.adam.t),
                      evidence=np.array([r.evidence for r in rec], float),
                      train_error=np.array([r.train_error for r in rec], float),
                      grad_norm=np.array([r.grad_norm for r in rec], float),
                      site_passes=np.array([r.site_passes for r in rec], int),
                      site_change=np.array([r.site_change for r in rec], float),
                      rows=np.array([r.rows for r in rec], int), best_iteration=int(best_it),
                      best_Z=bp.Z, best_variance=float(bp.variance), best_lengthscales=bp.lengthscales,
                      best_T=bf.T, best_c=bf.c)
        if state.sites is not None:
            arrays["sites"] = np.concatenate(client.gather(state.sites))
        self.commit(key, len(rec), arrays)

    def read(self, key: str, m: int, d: int, lr: float,
             kernel: str = "rbf") -> tuple[EPState, np.ndarray | None]:
        """(the state, EP's sites (n, 2) or None) committed for ``key`` with m inducing points in d
        dimensions. Raises FileNotFoundError without a checkpoint, ValueError (one line naming the file)
        when it is damaged or belongs to other data or settings."""
        _, a = self.read_state(key)
        size = m * d + d + 1
        try:
            vectors = {k: np.asarray(a[k], float) for k in ("adam_m", "adam_v")}
            if any(v.shape != (size,) for v in vectors.values()) or any(
                    np.shape(a[f"{p}Z"]) != (m, d) or np.shape(a[f"{p}lengthscales"]) != (d,)
                    or np.shape(a[f"{p}variance"]) != () for p in ("", "best_")):
                raise ValueError("parameters of the wrong size")
            params = [GPCParams(np.asarray(a[f"{p}Z"], float), float(a[f"{p}variance"]),
                                np.asarray(a[f"{p}lengthscales"], float), kernel) for p in ("", "best_")]
            vectors.update(params=params[0].to_vector(), best_params=params[1].to_vector())
            T, c, bT, bc = (np.asarray(a[k], float) for k in ("T", "c", "best_T", "best_c"))
            if T.shape != (m, m) or bT.shape != (m, m) or c.shape != (m,) or bc.shape != (m,):
                raise ValueError("a factor of the wrong shape")
            k = len(a["evidence"])  # checkpoints before the site-pass records (0.4.x) hold none
            passes = a["site_passes"] if "site_passes" in a else np.zeros(k, int)
            change = a["site_change"] if "site_change" in a else np.full(k, np.nan)
            rows = a["rows"] if "rows" in a else np.zeros(k, int)  # (older checkpoints: not recorded)
            recs = [IterationRecord(i + 1, float(e), float(t), float(g), int(p), float(ch), int(r))
                    for i, (e, t, g, p, ch, r) in enumerate(zip(a["evidence"], a["train_error"],
                                                                a["grad_norm"], passes, change, rows,
                                                                strict=True))]
            best_it = int(a["best_iteration"])
            if not recs or not 0 <= best_it <= len(recs) or not all(np.all(np.isfinite(v)) for v in
                                                                   (*vectors.values(), T, c, bT, bc)):
                raise ValueError("records or values out of range")
            sites = np.asarray(a["sites"], float) if "sites" in a else None
            adam = Adam(size, lr, m=vectors["adam_m"], v=vectors["adam_v"], t=int(a["adam_t"]))
        except (KeyError, TypeError, ValueError) as e:
            raise RunDamaged(f"{self.path}/{CHECKPOINT} holds {e}: start afresh without resuming") from None
        state = EPState(params[0], Factor(T, c), adam, records=recs,
                        best=(best_it, params[1], Factor(bT, bc)) if best_it else None)
        return state, sites


def place_sites(client, chunks, sites, n: int) -> list:
    """EP's stored sites (n, 2), in chunk order, as futures beside their chunks (one per chunk)."""
    if sites is None or sites.shape != (n, 2):
        raise ValueError("the checkpoint holds no EP sites for these rows: start afresh without resuming")
    bounds = np.cumsum([0, *chunks.sizes])
    futs = [client.scatter(sites[a:b], workers=list(client.who_has(f)[f.key]) or None, hash=False)
            for f, a, b in zip(chunks.futures, bounds[:-1], bounds[1:], strict=True)]
    return futs
