"""The full-data posterior mode and the Laplace covariance there, from the same unbiased stochastic gradients
the samplers use (Filippone & Engler 2015, eq. 5): a warmup that brings the chains into the full-data
posterior's bulk instead of starting them at the MAP of a small subset.

* :func:`stochastic_map` — preconditioned stochastic gradient ascent on log p(φ | y) in the metric of a
  starting preconditioner M₀ (the subset Laplace covariance scaled to n), each step φ ← φ + η M₀ ĝ (a Newton
  step for a Gaussian posterior of covariance M₀, damped by η), with the step decreasing once the gradient
  is indistinguishable from its noise, and Polyak averaging of the final iterates. It stops when, over a
  window of iterations, the mean whitened gradient is within two standard errors of zero in every
  coordinate and its norm is below ``tol`` (a Newton step of less than ``tol`` posterior sd).
* :func:`laplace_covariance` — −∇²log p(φ | y) at φ by central differences of the stochastic gradient with
  *common* probes and tightly converged, warm-started CG solves (the probe noise then cancels in the
  differences up to the curvature of the trace term), inverted: the preconditioner and the chains' spread.
  Where that curvature is not negative definite the ascent stopped on a plateau or saddle, not at a mode:
  :func:`saddle_free_covariance` (|H|⁻¹, Dauphin et al. 2014) is then the metric of the next ascent, wide
  along the flat direction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.plaindata import expect_array, expect_int, expect_keys, expect_number
from ..core.random import rademacher
from .marginal import log_marginal_gradient
from .posterior import GPPosterior

__all__ = ["ModeResult", "StochasticAscent", "stochastic_map", "laplace_precision", "laplace_covariance",
           "saddle_free_covariance", "SADDLE_FREE_MAX_SD", "TRUST_START", "TRUST_MIN", "TRUST_MAX",
           "MAX_RETREATS"]

# The ascent's trust region, in whitened units of its metric M₀ (≈ posterior sd): it starts at TRUST_START,
# doubles after a capped step that the next gradient agrees with, halves when one points back, and stays in
# [TRUST_MIN, TRUST_MAX]; MAX_RETREATS failed gradients in a row end the ascent.
TRUST_START, TRUST_MIN, TRUST_MAX, MAX_RETREATS = 2.0, 0.05, 16.0, 4

# The widest sd the saddle-free metric gives a direction of zero or positive curvature, in log-parameter
# units: one e-fold, so a flat direction is crossed in steps of about half an e-fold, not thrown out of range
SADDLE_FREE_MAX_SD = 1.0


@dataclass
class ModeResult:
    """phi (p,) the mode estimate; iterations used; converged (the stopping test held); grad_norm the final
    window's mean whitened gradient norm (≈ distance to the mode in posterior sd); grad_se (p,) the standard
    errors of that mean's coordinates (NaN before the averaging window fills); trace (k, p) the iterates;
    noise_eig the largest eigenvalue of the whitened gradient-noise covariance (M₀^½ V M₀^½) seen."""

    phi: np.ndarray
    iterations: int
    converged: bool
    grad_norm: float
    noise_eig: float
    trace: np.ndarray = field(repr=False)
    grad_se: np.ndarray | None = None


class StochasticAscent:
    """:func:`stochastic_map` one gradient at a time, its state plain data between gradients
    (:meth:`to_dict` / :meth:`from_dict`): an ascent rebuilt from its state takes the same steps, bit for
    bit, as one that never stopped (given the same gradients: the posterior's :class:`ProbeState` travels
    beside it). Arguments as for :func:`stochastic_map`; ``k`` the gradients taken, ``done`` when it stopped.
    """

    def __init__(self, phi0, M0, *, max_iter: int = 400, window: int = 10, tol: float = 0.5,
                 step: float = 0.5, jitter: float = 0.3, max_abs_phi: float = 30.0,
                 trust: float | None = TRUST_START):
        self.settings = dict(max_iter=int(max_iter), window=int(window), tol=float(tol), step=float(step),
                             jitter=float(jitter), max_abs_phi=float(max_abs_phi),
                             trust=None if trust is None else float(trust))
        self.phi = np.array(phi0, dtype=float)
        self.phi0 = self.phi.copy()
        self.good = self.phi.copy()  # the last φ whose gradient succeeded (where a retreat goes back to)
        self.radius = self.settings["trust"]  # the trust region's radius now, whitened units (None: none)
        self._capped = False  # the last step was cut to the radius
        self.retreats: list[str] = []  # why the ascent stepped back, one line per retreat
        self.failures = 0  # consecutive failed gradients
        self.M0 = np.array(M0, dtype=float)
        self.L = np.linalg.cholesky(self.M0)
        self.gws: list[np.ndarray] = []
        self.phis: list[np.ndarray] = []
        self.lams: list[float] = []
        # the gradient-noise covariance V (p, p) at each iterate, NaN where a gradient failed or reported
        # none: averaged near the mode and whitened by the chains' metric, the noise the chains will see
        self.noise_covs: list[np.ndarray] = []
        self.settled_at: int | None = None
        self.noise_eig, self.converged, self.gnorm = 0.0, False, np.inf
        self.se = np.full(len(self.phi), np.nan)

    @property
    def k(self) -> int:
        return len(self.phis)

    @property
    def done(self) -> bool:
        return self.converged or self.k >= self.settings["max_iter"]

    def step(self, post) -> None:
        """Take gradient k (the posterior's ``stochastic_grad(φ, k)``) and its step. With a trust region, a
        gradient that fails (a solve over its budget, a covariance not positive definite in floating point)
        sends the ascent back to the last point whose gradient succeeded with the radius quartered — the
        step that led there was too long — and that counts as the gradient; :data:`MAX_RETREATS` failures in
        a row raise FloatingPointError with the reasons."""
        o, k = self.settings, self.k
        window, L = o["window"], self.L
        try:
            g, info = post.stochastic_grad(self.phi, k)
        except (FloatingPointError, np.linalg.LinAlgError) as e:
            if self.radius is None:
                raise
            self.failures += 1
            back = self.good
            self.retreats.append(f"gradient {k} failed at φ={np.round(self.phi, 4).tolist()} ({e}); back to "
                                 f"φ={np.round(back, 4).tolist()} with the trust radius "
                                 f"{self.radius:g} → {max(self.radius / 4, TRUST_MIN):g}")
            if self.failures >= MAX_RETREATS:
                raise FloatingPointError(f"the stochastic ascent failed {self.failures} gradients in a row, "
                                         f"the last at iteration {k}: {e}") from e
            self.radius = max(self.radius / 4, TRUST_MIN)
            self.phi = np.array(back, dtype=float)
            self.gws.append(np.zeros(len(self.phi)))  # no information: a zero whitened gradient
            self.noise_covs.append(np.full((len(self.phi),) * 2, np.nan))
            self.phis.append(self.phi.copy())
            return
        self.failures = 0
        self.good = self.phi.copy()
        gw = L.T @ g  # whitened: M₀ĝ = L gw
        self.gws.append(gw)
        V = info.get("noise_cov")
        if V is not None:
            self.lams.append(float(np.linalg.eigvalsh(L.T @ V @ L).max()))
        self.noise_covs.append(np.full((len(gw),) * 2, np.nan) if V is None else np.array(V, dtype=float))
        lam = float(np.mean(self.lams[-window:])) if self.lams else 0.0
        self.noise_eig = max(self.noise_eig, lam)
        eta = min(o["step"], o["jitter"] / np.sqrt(lam)) if lam > 0 else o["step"]
        if self.settled_at is None and (k + 1) % window == 0:
            W = np.array(self.gws[-window:])
            if np.all(np.abs(W.mean(axis=0)) <= 2 * W.std(axis=0, ddof=1) / np.sqrt(window)):
                self.settled_at = k + 1  # the signal is lost in the noise: shrink the steps, average
        j = 0 if self.settled_at is None else k + 1 - self.settled_at
        u = eta / (1.0 + j / window) * gw  # the step in whitened units (posterior sd, if M₀ is right)
        if self.radius is not None:
            # a trust region: far from the mode a noisy or steep gradient would otherwise throw φ many sd
            # (the held-out 8,192-row run left |φ| ≤ 30 at its 5th gradient). The radius doubles after a
            # capped step the next gradient agrees with and halves when it points back.
            prev = self.gws[-2] if len(self.gws) >= 2 else None
            if prev is not None and self._capped:
                agree = float(prev @ gw) > 0
                self.radius = min(self.radius * 2, TRUST_MAX) if agree else max(self.radius / 2, TRUST_MIN)
            size = float(np.linalg.norm(u))
            self._capped = size > self.radius
            if self._capped:
                u *= self.radius / size
        phi = self.phi + L @ u
        if not np.all(np.isfinite(phi)) or np.abs(phi).max() > o["max_abs_phi"]:
            raise FloatingPointError(f"the stochastic ascent left |φ| <= {o['max_abs_phi']} at iteration {k}")
        self.phi = phi
        self.phis.append(phi.copy())
        if self.settled_at is not None and j >= window:
            W = np.array(self.gws[self.settled_at:])
            mean, self.se = W.mean(axis=0), W.std(axis=0, ddof=1) / np.sqrt(len(W))
            self.gnorm = float(np.linalg.norm(mean))
            self.converged = bool(self.gnorm < o["tol"] and self.se.max() < o["tol"] / 2)

    def result(self) -> ModeResult:
        at = self.settled_at
        tail = np.array(self.phis[at:] if at is not None and at < len(self.phis) else self.phis[-1:])
        return ModeResult(tail.mean(axis=0), self.k, self.converged, self.gnorm, self.noise_eig,
                          np.array(self.phis), self.se)

    def noise_cov(self) -> np.ndarray | None:
        """The mean gradient-noise covariance (p, p) in φ's coordinates over the iterates from where the
        steps began to shrink (near the mode; the last ``window`` iterates if they never did), None where no
        gradient there reported one. A mean over tens of probe draws: whitened by any metric afterwards, far
        steadier than one draw's largest eigenvalue (the ``lams``), and unbiased for V near the mode."""
        at = self.settled_at if self.settled_at is not None else max(self.k - self.settings["window"], 0)
        V = np.array(self.noise_covs[at:]).reshape(-1, len(self.phi), len(self.phi))
        V = V[np.all(np.isfinite(V), axis=(1, 2))]
        return V.mean(axis=0) if len(V) else None

    def to_dict(self) -> dict:
        p = len(self.phi)
        return {"settings": dict(self.settings), "phi": self.phi.copy(), "M0": self.M0.copy(),
                "gws": np.array(self.gws).reshape(-1, p), "phis": np.array(self.phis).reshape(-1, p),
                "lams": np.array(self.lams, dtype=float), "settled_at": self.settled_at,
                "noise_covs": np.array(self.noise_covs, dtype=float).reshape(-1, p, p),
                "noise_eig": self.noise_eig, "converged": self.converged, "gnorm": self.gnorm,
                "se": self.se.copy(), "phi0": self.phi0.copy(), "good": self.good.copy(),
                "radius": self.radius, "capped": self._capped, "failures": self.failures,
                "retreats": list(self.retreats)}

    @classmethod
    def from_dict(cls, d: dict, p: int) -> StochasticAscent:
        """The ascent ``to_dict`` wrote, for p parameters; ValueError naming the first malformed field."""
        base = ("settings", "phi", "M0", "gws", "phis", "lams", "settled_at", "noise_eig", "converged",
                "gnorm", "se")
        trusted = ("phi0", "good", "radius", "capped", "failures", "retreats")
        old = isinstance(d, dict) and "radius" not in d  # written before the trust region
        covs = ("noise_covs",) if isinstance(d, dict) and "noise_covs" in d else ()  # kept since 2026-11-30
        expect_keys(d, (base if old else base + trusted) + covs, "ascent state")
        s = d["settings"]
        names = {"max_iter", "window", "tol", "step", "jitter", "max_abs_phi"}
        if not isinstance(s, dict) or set(s) != (names if old else names | {"trust"}):
            raise ValueError("the ascent state's settings are malformed")
        s = {**s, "trust": None} if old else s
        a = cls(expect_array(d["phi"], (p,), "phi"), expect_array(d["M0"], (p, p), "M0"), **s)
        if not old:
            a.phi0 = expect_array(d["phi0"], (p,), "phi0")
            a.good = expect_array(d["good"], (p,), "good")
            a.radius = None if d["radius"] is None else float(expect_number(d["radius"], "radius",
                                                                             positive=True))
            if not isinstance(d["capped"], bool) or not isinstance(d["retreats"], list):
                raise ValueError("the ascent state's capped / retreats are malformed")
            a._capped, a.retreats = d["capped"], [str(r) for r in d["retreats"]]
            a.failures = expect_int(d["failures"], "failures", 0, MAX_RETREATS)
        def rows(v, ndim):  # an array's length, to check its shape with (-1: not an array of that rank)
            return v.shape[0] if isinstance(v, np.ndarray) and v.ndim == ndim else -1

        k = rows(d["phis"], 2)
        a.phis = list(expect_array(d["phis"], (k, p), "phis"))
        a.gws = list(expect_array(d["gws"], (k, p), "gws"))
        a.lams = [float(v) for v in expect_array(d["lams"], (rows(d["lams"], 1),), "lams")]
        # a state written before the noise covariances were kept: none known (the warmup then whitens the
        # lams' median, as it did)
        covs = d.get("noise_covs", np.full((k, p, p), np.nan))
        a.noise_covs = list(expect_array(covs, (k, p, p), "noise_covs", finite=False))
        at = d["settled_at"]
        a.settled_at = None if at is None else expect_int(at, "settled_at", 0, k)
        a.noise_eig = float(expect_number(d["noise_eig"], "noise_eig"))
        if not isinstance(d["converged"], bool) or not isinstance(d["gnorm"], float):
            raise ValueError("the ascent state's converged / gnorm are malformed")
        a.converged, a.gnorm = d["converged"], d["gnorm"]
        a.se = expect_array(d["se"], (p,), "se", finite=False)
        return a


def stochastic_map(post: GPPosterior, phi0, M0, *, max_iter: int = 400, window: int = 10, tol: float = 0.5,
                   step: float = 0.5, jitter: float = 0.3, max_abs_phi: float = 30.0,
                   callback=None) -> ModeResult:
    """The mode of log p(φ | y) from φ₀ (p,) by preconditioned stochastic gradient ascent (see the module).

    post: the posterior (its probes are redrawn as it is configured; ``redraw_every=1`` gives independent
    gradients); M0 (p, p) SPD preconditioner, ideally ≈ the posterior covariance. The step is
    η = min(``step``, ``jitter``/√λ) with λ the largest eigenvalue of the whitened gradient-noise covariance
    (the gradients' own within-iteration estimate, averaged), so that the noise moves φ by at most about
    ``jitter`` posterior sd per step. Two phases: steps of η until a ``window`` of whitened gradients
    averages within two standard errors of zero, then steps decreasing as η/(1 + j/window) with the iterates
    averaged (Polyak–Ruppert); it stops once the mean whitened gradient since then is below ``tol`` with
    every standard error below tol/2, or after ``max_iter`` gradients. Raises FloatingPointError when φ
    leaves |φ| ≤ ``max_abs_phi``. ``callback(k)``: called after gradient k (0-based), for progress.
    :class:`StochasticAscent` is the same ascent, resumable."""
    ascent = StochasticAscent(phi0, M0, max_iter=max_iter, window=window, tol=tol, step=step, jitter=jitter,
                              max_abs_phi=max_abs_phi)
    while not ascent.done:
        ascent.step(post)
        if callback is not None:
            callback(ascent.k - 1)
    return ascent.result()


def laplace_precision(post: GPPosterior, phi, *, n_probes: int = 8, h: float = 1e-3, tol: float = 1e-7,
                      rng=None, callback=None) -> np.ndarray:
    """−∇²log p(φ | y) (p, p) at φ, symmetrised: central differences (step ``h`` in log-parameters) of the
    gradient with ``n_probes`` common probes and CG to relative residual ``tol``, warm-started from the solve
    at φ. Not necessarily positive definite (away from a mode, or from noise). ``callback(k)``: called after
    each of its 2p + 1 gradients, for progress. Each solve may take twice the posterior's solve budget
    (:meth:`GPPosterior.solve_budget`); one that does not converge within it raises SolveBudgetExceeded."""
    op, prior = post.op, post.prior
    phi = np.asarray(phi, dtype=float)
    p = phi.size
    probes = rademacher(op.n, n_probes, np.random.default_rng(rng))
    kw = {k: v for k, v in post.grad_kwargs.items() if k in ("precond", "precond_rank")}
    if kw.get("precond") == "pivchol" and hasattr(post, "preconditioner_at"):
        # one preconditioner, built at φ, for all 2p + 1 solves (each within h of φ): building it afresh for
        # each cost 7 rank-2,000 builds on house_8L (3.3 s each on 8,192 rows), more than the solves; any
        # SPD preconditioner leaves CG's answer to the tolerance unchanged
        kw = {"precond": post.preconditioner_at(phi)}

    done = [0]

    # every solve has a budget: twice the posterior's (its chains' solves are to 1e-6, these to 1e-7 from
    # a warm start); beyond it the curvature is refused, naming φ, as a chain's gradient would be
    budget = 2 * post.solve_budget() if hasattr(post, "solve_budget") else None

    def grad(at, x0):
        est = log_marginal_gradient(op.with_log_params(at), post.y, probes=probes, x0=x0, solver="cg",
                                    tol=tol, callback=getattr(post, "on_solve", None), max_iter=budget, **kw)
        if not est.converged:
            from .posterior import SolveBudgetExceeded

            raise SolveBudgetExceeded(at, int(est.cg_iterations.max()), budget, False)
        if callback is not None:
            callback(done[0])
        done[0] += 1
        return est.grad + prior.grad(at), est.warm_start

    _, x0 = grad(phi, None)
    H = np.empty((p, p))
    for j in range(p):
        e = np.zeros(p)
        e[j] = h
        H[:, j] = -(grad(phi + e, x0)[0] - grad(phi - e, x0)[0]) / (2 * h)
    return 0.5 * (H + H.T)


def laplace_covariance(post: GPPosterior, phi, **kwargs) -> np.ndarray:
    """(−∇²log p(φ | y))⁻¹ (p, p) at φ from :func:`laplace_precision` (same arguments). Raises
    numpy.linalg.LinAlgError when the estimate is not positive definite."""
    H = laplace_precision(post, phi, **kwargs)
    w = np.linalg.eigvalsh(H)
    if w.min() <= 0:
        raise np.linalg.LinAlgError(f"the curvature at φ is not negative definite (eigenvalues {w})")
    return np.linalg.inv(H)


def saddle_free_covariance(H: np.ndarray, max_sd: float = SADDLE_FREE_MAX_SD) -> np.ndarray:
    """A metric (p, p) from a precision H (p, p) that need not be positive definite: |H|⁻¹ with every
    eigenvalue's magnitude floored at 1/max_sd² (the saddle-free Newton metric of Dauphin et al. 2014). Where
    the log posterior curves up or is flat — a plateau or a saddle, not a mode — the metric is wide, so an
    ascent in it takes long steps there instead of reading the small gradient as the mode's."""
    w, Q = np.linalg.eigh(0.5 * (H + H.T))
    w = np.maximum(np.abs(w), 1.0 / max_sd**2)
    return (Q / w) @ Q.T
