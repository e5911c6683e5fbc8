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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.random import rademacher
from .marginal import log_marginal_gradient
from .posterior import GPPosterior

__all__ = ["ModeResult", "stochastic_map", "laplace_covariance"]


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
    leaves |φ| ≤ ``max_abs_phi``. ``callback(k)``: called after gradient k (0-based), for progress."""
    phi = np.array(phi0, dtype=float)
    L = np.linalg.cholesky(np.asarray(M0, dtype=float))
    gws, phis, lams = [], [], []
    settled_at, noise_eig, converged, gnorm = None, 0.0, False, np.inf
    se = np.full(len(phi), np.nan)
    for k in range(max_iter):
        g, info = post.stochastic_grad(phi, k)
        if callback is not None:
            callback(k)
        gw = L.T @ g  # whitened: M₀ĝ = L gw
        gws.append(gw)
        V = info.get("noise_cov")
        if V is not None:
            lams.append(float(np.linalg.eigvalsh(L.T @ V @ L).max()))
        lam = float(np.mean(lams[-window:])) if lams else 0.0
        noise_eig = max(noise_eig, lam)
        eta = min(step, jitter / np.sqrt(lam)) if lam > 0 else step
        if settled_at is None and (k + 1) % window == 0:
            W = np.array(gws[-window:])
            if np.all(np.abs(W.mean(axis=0)) <= 2 * W.std(axis=0, ddof=1) / np.sqrt(window)):
                settled_at = k + 1  # the signal is lost in the noise: shrink the steps and average from here
        j = 0 if settled_at is None else k + 1 - settled_at
        phi = phi + eta / (1.0 + j / window) * (L @ gw)
        if not np.all(np.isfinite(phi)) or np.abs(phi).max() > max_abs_phi:
            raise FloatingPointError(f"the stochastic ascent left |φ| <= {max_abs_phi} at iteration {k}")
        phis.append(phi.copy())
        if settled_at is not None and j >= window:
            W = np.array(gws[settled_at:])
            mean, se = W.mean(axis=0), W.std(axis=0, ddof=1) / np.sqrt(len(W))
            gnorm = float(np.linalg.norm(mean))
            if gnorm < tol and se.max() < tol / 2:
                converged = True
                break
    tail = np.array(phis[settled_at:] if settled_at is not None and settled_at < len(phis) else phis[-1:])
    return ModeResult(tail.mean(axis=0), len(phis), converged, gnorm, noise_eig, np.array(phis), se)


def laplace_covariance(post: GPPosterior, phi, *, n_probes: int = 8, h: float = 1e-3, tol: float = 1e-7,
                       rng=None, callback=None) -> np.ndarray:
    """(−∇²log p(φ | y))⁻¹ (p, p) at φ: central differences (step ``h`` in log-parameters) of the gradient
    with ``n_probes`` common probes and CG to relative residual ``tol``, warm-started from the solve at φ.
    Raises numpy.linalg.LinAlgError when the estimate is not positive definite. ``callback(k)``: called
    after each of its 2p + 1 gradients, for progress."""
    op, prior = post.op, post.prior
    phi = np.asarray(phi, dtype=float)
    p = phi.size
    probes = rademacher(op.n, n_probes, np.random.default_rng(rng))
    kw = {k: v for k, v in post.grad_kwargs.items() if k in ("precond", "precond_rank")}

    done = [0]

    def grad(at, x0):
        est = log_marginal_gradient(op.with_log_params(at), post.y, probes=probes, x0=x0, solver="cg",
                                    tol=tol, **kw)
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
    H = 0.5 * (H + H.T)
    w = np.linalg.eigvalsh(H)
    if w.min() <= 0:
        raise np.linalg.LinAlgError(f"the curvature at φ is not negative definite (eigenvalues {w})")
    return np.linalg.inv(H)
