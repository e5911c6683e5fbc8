"""What the sparse families share once their row statistics are summed (Gal, van der Wilk & Rasmussen 2014):
the global step — L-BFGS-B over (Z, σ², l, β) with every bound evaluation a map-reduce over the row chunks
(section 4.1 of the paper) — the optimal q(u) and its predictive (Titsias 2009, eq. 6), and the checkpoint of
a fit in progress.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial

import numpy as np
import scipy.linalg
import scipy.optimize

from ..compute.rows import aligned
from ..core.optim import lbfgsb
from ..inducing.features import GlobalParams, kmm, kmn, vector_bounds
from ..inducing.stats import SuffStats
from ..runs.commit import CHECKPOINT, RunDamaged
from ..runs.fits import FitStore
from .chunks import ChunkedRows, LocalRows

__all__ = ["INITS", "Evaluations", "FitCheckpoint", "ReplayDiverged", "Resumed", "SparsePosterior",
           "fit_global", "subset_start"]

# where SGPR starts: 'kmeans' (the default: Z at k-means centres of a sample, σ² = 1, lengthscales √q, the
# noise at noise_init, standardised units) or 'subset' (that start moved to the optimum of the sample's own
# collapsed bound first) — the names ADVGP's ``init`` uses for the same two starts
INITS = ("kmeans", "subset")


@dataclass
class SparsePosterior:
    """The optimal q(u) of the collapsed bound, in the standardised units it was fitted in: predictive
    mean k*ᵀ a with a = β P⁻¹ C (m, p), variance σ² − k*ᵀ (K_mm⁻¹ − P⁻¹) k* (+ 1/β for y)."""

    theta: GlobalParams
    a: np.ndarray
    Q: np.ndarray

    @classmethod
    def from_stats(cls, theta: GlobalParams, stats: SuffStats) -> SparsePosterior:
        _, Kmm = kmm(theta)
        Lk = np.linalg.cholesky(Kmm)
        Lp = np.linalg.cholesky(Kmm + theta.beta * stats.D)
        eye = np.eye(theta.m)
        a = theta.beta * scipy.linalg.cho_solve((Lp, True), stats.C)
        Q = scipy.linalg.cho_solve((Lk, True), eye) - scipy.linalg.cho_solve((Lp, True), eye)
        return cls(theta, a, 0.5 * (Q + Q.T))

    def predict_block(self, X, noise: bool = True):
        """(mean (b, p), var (b,)) at inputs X (b, q) in X's array namespace (numpy, cupy)."""
        from array_api_compat import array_namespace

        xp = array_namespace(X)
        Kxm = kmn(self.theta, X).T
        mean = Kxm @ xp.asarray(self.a)
        var = self.theta.variance - xp.sum((Kxm @ xp.asarray(self.Q)) * Kxm, axis=1)
        var = xp.clip(var, 1e-12 * self.theta.variance, None)
        return mean, (var + self.theta.noise if noise else var)


@dataclass
class Evaluations:
    """Every objective evaluation of an L-BFGS-B run, in order: a digest of the point, the value and the
    gradient it returned. L-BFGS-B is deterministic given its start and these numbers, so feeding them back
    (:func:`fit_global`'s ``replay``) rebuilds its iterates and curvature memory bit for bit without
    evaluating anything: the optimiser's whole state, as data."""

    x: list
    f: list
    g: list

    @classmethod
    def empty(cls) -> Evaluations:
        return cls([], [], [])


class ReplayDiverged(RuntimeError):
    """A replayed L-BFGS-B asked for a point the log does not hold (another scipy, another start)."""


def _digest(x: np.ndarray) -> str:
    from ..core.files import array_digest

    return array_digest(np.asarray(x, np.float64))


def fit_global(chunks: ChunkedRows, theta0: GlobalParams, max_iter: int, tol: float = 1e-9,
               callback=None, fixed_inducing: bool = False, on_params=None,
               replay: tuple[Evaluations, int] | None = None) -> tuple[GlobalParams, list, dict]:
    """Maximise the bound over the global parameters with L-BFGS-B (unconstrained: Z, log σ², log l,
    log σ²_n); ``callback(iteration, F)`` and ``on_params(θ, trace, evaluations, posterior)`` after every
    iteration, ``posterior()`` building the :class:`SparsePosterior` at θ from the statistics of the
    evaluation there (L-BFGS-B's accepted point is its last evaluation, so this costs no pass over the rows,
    only two m × m Cholesky factors when called), or None when θ's statistics are not at hand (a replayed
    evaluation, or a line search that ended elsewhere).

    ``replay``: (the :class:`Evaluations` of an interrupted run of this fit from the same ``theta0``, the
    iterations it finished): its evaluations are fed back instead of computed, so the fit continues exactly
    as the uninterrupted one would; the callbacks fire only for the iterations after those. Raises
    :class:`ReplayDiverged` when the log does not match. Returns (θ, bound trace of every iteration, info
    with ``evaluations``)."""
    m, q = theta0.Z.shape
    n = chunks.n
    v0 = theta0.to_vector()
    free = np.ones(v0.size, bool)
    if fixed_inducing:
        free[:m * q] = False
    info = {"n_evaluations": 0, "seconds_evaluating": 0.0}
    log = Evaluations.empty()
    old, quiet = (replay if replay is not None else (Evaluations.empty(), 0))
    last = {}  # the latest computed evaluation: its point's digest, θ and summed statistics

    def fun(x):
        k = len(log.f)
        log.x.append(_digest(x))
        if k < len(old.f):  # replaying: the number the interrupted run got here
            if old.x[k] != log.x[k]:
                raise ReplayDiverged(f"evaluation {k + 1} of the replayed L-BFGS-B is at another point")
            log.f.append(old.f[k])
            log.g.append(old.g[k])
            return old.f[k], np.array(old.g[k])
        v = v0.copy()
        v[free] = x
        t0 = time.perf_counter()
        try:
            theta = theta0.with_vector(v)
            F, g, stats = chunks.bound_and_grad(theta)
            f, gf = -F / n, -g[free] / n
            last.update(x=log.x[-1], theta=theta, stats=stats)
        except np.linalg.LinAlgError:
            f, gf = math.inf, np.zeros_like(x)  # L-BFGS-B backtracks from a non-PD step
        else:
            info["n_evaluations"] += 1
            info["seconds_evaluating"] += time.perf_counter() - t0
        log.f.append(float(f))
        log.g.append(np.asarray(gf, np.float64))
        return f, gf

    trace = []

    def cb(intermediate_result):
        F = -float(intermediate_result.fun) * n
        trace.append(F)
        if len(trace) <= quiet:  # reported before the interruption
            return
        if on_params is not None:
            v = v0.copy()
            v[free] = intermediate_result.x
            at = theta0.with_vector(v)
            post = (partial(SparsePosterior.from_stats, last["theta"], last["stats"])
                    if last.get("x") == _digest(intermediate_result.x) else None)
            on_params(at, trace, log, post)
        if callback is not None:
            callback(len(trace), F)

    res = lbfgsb(fun, v0[free], bounds=vector_bounds(m, q)[free], max_iter=max_iter, callback=cb, ftol=tol,
                 gtol=1e-7)
    v = v0.copy()
    v[free] = res.x
    info.update(message=str(res.message), n_iterations=int(res.nit), converged=bool(res.success),
                evaluations=log, replayed_evaluations=min(len(old.f), len(log.f)))
    return theta0.with_vector(v), trace, info


@dataclass
class Resumed:
    """What a checkpoint gives a resumed fit: the parameters after the last finished iteration, the bound
    trace (nats), and — for an exact continuation — the fit's start and its :class:`Evaluations` (None in a
    checkpoint of daskgp <= 0.5, which is resumed from ``theta`` with a fresh curvature memory)."""

    theta: GlobalParams
    trace: list
    theta0: GlobalParams | None = None
    evaluations: Evaluations | None = None
    seconds: list | None = None  # the fit's wall seconds at each iteration (None before daskgp 0.6)


class FitCheckpoint(FitStore):
    """The state of an SGPR fit after its last finished L-BFGS-B iteration, in a fit checkpoint folder
    (:class:`daskgp.runs.fits.FitStore`: one JSON commit of plain data with a digest, the previous commit,
    the writer's lock): the unconstrained parameter vector (:meth:`GlobalParams.to_vector`), the bound trace
    so far (nats), and the optimiser's whole state — the start and every evaluation (:class:`Evaluations`),
    so that a resumed fit replays them and continues bit for bit as the uninterrupted one. Committed after
    every iteration: an interruption loses at most one."""

    kind = "daskgp.sgpr-checkpoint"
    what = "SGPR"
    legacy_suffix = ".npz"  # daskgp <= 0.3 wrote OUT.checkpoint.npz

    def write(self, theta: GlobalParams, trace, key: str, theta0: GlobalParams | None = None,
              evaluations: Evaluations | None = None, seconds=None) -> None:
        state = {"theta": theta.to_vector(), "trace": np.asarray(trace, float)}
        if seconds is not None:  # wall seconds of the fit at each iteration: for a reader, not the fit
            state["seconds"] = np.asarray(seconds, float)
        if theta0 is not None and evaluations is not None:
            state.update(theta0=theta0.to_vector(), eval_x=[str(x) for x in evaluations.x],
                         eval_f=np.asarray(evaluations.f, float),
                         eval_g=np.asarray(evaluations.g, float).reshape(len(evaluations.g), -1))
        self.commit(key, len(trace), state)

    def read(self, key: str, m: int, q: int, kernel: str = "rbf") -> Resumed:
        """What was committed for ``key`` with m inducing points in q dimensions (the kernel's name is part
        of ``key``; ``kernel`` builds the parameters). Raises FileNotFoundError without a checkpoint,
        ValueError (one line naming the file) when it is damaged or belongs to other data or settings."""
        _, st = self.read_state(key)
        size = m * q + q + 2
        try:
            v, trace = np.asarray(st["theta"], float), np.asarray(st["trace"], float)
            if v.shape != (size,) or not np.all(np.isfinite(v)) or trace.ndim != 1:
                raise ValueError("parameters of the wrong shape or non-finite values")
            out = Resumed(GlobalParams.from_vector(v, m, q, kernel), [float(t) for t in trace])
            if "seconds" in st and np.shape(st["seconds"]) == trace.shape:
                out.seconds = [float(t) for t in np.asarray(st["seconds"], float)]
            if "eval_f" in st:
                v0, g = np.asarray(st["theta0"], float), np.asarray(st["eval_g"], float)
                log = Evaluations([str(x) for x in st["eval_x"]], [float(x) for x in st["eval_f"]], list(g))
                if v0.shape != v.shape or not np.all(np.isfinite(v0)) or not (len(log.x) == len(log.f)
                                                                               == len(log.g)):
                    raise ValueError("an optimiser state of the wrong shape")
                out.theta0, out.evaluations = GlobalParams.from_vector(v0, m, q, kernel), log
        except (KeyError, TypeError, ValueError) as e:
            raise RunDamaged(f"{self.path}/{CHECKPOINT} holds {e}: start afresh without resuming") from None
        return out


def subset_start(X, y, theta0: GlobalParams, chunk_rows: int, max_iter: int = 200,
                 fixed_inducing: bool = False) -> tuple[GlobalParams, dict]:
    """(θ, info): ``theta0`` moved to a maximum of the collapsed bound of the rows X (b, q), y (b,)
    (standardised units, a sample of the training rows held in this process) by the fit's own L-BFGS-B,
    at most ``max_iter`` iterations; ``info``: the bound per row (nats) at the start and the end,
    iterations, evaluations, the sample's rows.

    Why: at 10⁸ rows one evaluation of the bound is a pass over every row (minutes on a few cores), and
    from the k-means start L-BFGS-B spends tens of them on what a 2·10⁴-row sample already settles — the
    scale of the lengthscales, σ² and the noise. The full fit then continues from here and is free to
    move; the result is the optimum L-BFGS-B reaches from this start, which need not be the one it reaches
    from the k-means start (the bound is not concave). A sample can switch off an input whose effect is
    weak (lengthscale at its upper bound) that all rows would keep; the full fit must then bring it back."""
    X, y = aligned(np.asarray(X, dtype=np.float64)), aligned(np.asarray(y, dtype=np.float64))
    rows = LocalRows.from_arrays(y, chunk_rows, X=X)
    f0 = -rows.bound_and_grad(theta0)[0] / rows.n
    theta, _, info = fit_global(rows, theta0, max_iter, fixed_inducing=fixed_inducing)
    try:  # at the returned point, not the last callback's value: an abnormal line search can end elsewhere
        f = -rows.bound_and_grad(theta)[0] / rows.n
    except np.linalg.LinAlgError:
        f = np.inf
    if not np.isfinite(f) or f > f0:  # nothing better than the start: keep it
        theta, f = theta0, f0
    return theta, {"bound_per_row_start": -float(f0), "bound_per_row": -float(f),
                   "iterations": int(info["n_iterations"]), "evaluations": int(info["n_evaluations"]) + 2,
                   "message": info["message"], "rows": int(rows.n)}
