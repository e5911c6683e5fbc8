"""The GP hyperparameter posterior p(φ | y) ∝ p(y | θ) p(φ) on log-parameters φ = log θ,
θ = [kernel params..., noise]: its stochastic gradient for SGLD (probes redrawn every R iterations, solves
warm-started), its exact value and gradient for small n, and the MAP / Laplace preconditioner on a random
subset (as in the paper).

The gradient's own state — the current probes, the CG warm starts and the generator — is a
:class:`ProbeState`, plain data through ``to_dict`` / ``from_dict``, so an SGLD chain resumed from a
checkpoint draws the same probes and warm-starts from the same iterates as one that never stopped.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import numpy as np
from array_api_compat import device

from ..compute.backend import into, namespace, to_host
from ..compute.operator import KernelOperator
from ..core.optim import lbfgsb
from ..core.plaindata import expect_array, expect_int, expect_keys
from ..core.priors import GammaPrior
from ..core.random import rademacher, rng_from_state
from ..core.validation import check_X, check_y
from ..model.kernels import Kernel
from .marginal import exact_log_marginal, log_marginal_gradient, single_precision_ok, target_like

log = logging.getLogger(__name__)

__all__ = ["GPPosterior", "ProbeState", "SolveBudgetExceeded", "exact_log_posterior", "subset_map",
           "central_hessian", "SOLVE_WINDOW", "BUDGET_FACTOR", "BUDGET_MIN", "FIRST_BUDGET", "STALE_FACTOR",
           "STALE_MARGIN"]


@dataclass
class ProbeState:
    """The stochastic gradient's state between iterations: ``probes`` (n, k) Rademacher vectors in use
    (None before the first draw), ``x0`` (n, k+1) the last solves' iterates for [y, probes] (right after a
    redraw only K⁻¹y's is kept, the new probes' columns zero, where K⁻¹y is solved to the tolerance, else
    nothing; (n, 1) K⁻¹y's alone, as a warmup checkpoints
    it; None before the first solve), the generator ``rng`` that draws probes (and ULISSE's stopping),
    ``precond_at`` (p,) the φ at which the pivoted-Cholesky preconditioner in use was built (None without
    one) and ``solves`` the CG iterations of the last (at most :data:`SOLVE_WINDOW`) gradients, from which
    the next solve's budget is set (:meth:`GPPosterior.solve_budget`; None before the first);
    ``precond_iters`` the CG iterations of the first solve with that preconditioner (None: not measured),
    against which a stale one is recognised (:data:`STALE_FACTOR`)."""

    probes: np.ndarray | None
    x0: np.ndarray | None
    rng: np.random.Generator
    precond_at: np.ndarray | None = None
    solves: np.ndarray | None = None
    precond_iters: int | None = None

    @classmethod
    def initial(cls, rng=None) -> ProbeState:
        return cls(None, None, np.random.default_rng(rng))

    def to_dict(self) -> dict:
        """Plain data: numpy arrays (or None; device arrays are copied to the host) and the bit generator's
        state dict."""
        return {"probes": _host(self.probes), "x0": _host(self.x0), "rng": self.rng.bit_generator.state,
                "precond_at": self.precond_at, "solves": self.solves, "precond_iters": self.precond_iters}

    @classmethod
    def from_dict(cls, d: dict, n: int, n_probes: int, p: int, finite: bool = True) -> ProbeState:
        """The state ``to_dict`` wrote, checked for n rows, ``n_probes`` probes and p parameters (copies its
        arrays); the warm starts may be non-finite only when not ``finite`` (a chain stopped by a failed
        solve keeps them, never to use them again). A state written before ``precond_at`` existed reads as
        None (the preconditioner is then built at the next φ). Raises ValueError naming the first
        malformed field."""
        old = isinstance(d, dict) and "precond_at" not in d
        older_budget = isinstance(d, dict) and "solves" not in d  # written before the solve budget
        unmeasured = isinstance(d, dict) and "precond_iters" not in d  # before the staleness rule
        keys = (("probes", "x0", "rng") + (() if old else ("precond_at",))
                + (() if older_budget else ("solves",)) + (() if unmeasured else ("precond_iters",)))
        expect_keys(d, keys, "probe state")
        first = d.get("precond_iters")
        if first is not None:
            first = expect_int(first, "precond_iters")
        solves = d.get("solves")
        if solves is not None:
            size = solves.shape[0] if isinstance(solves, np.ndarray) and solves.ndim == 1 else -1
            solves = expect_array(solves, (size,), "solves")
            if size > SOLVE_WINDOW or np.any(solves < 0):
                raise ValueError(f"solves must hold at most {SOLVE_WINDOW} iteration counts >= 0")
        x0 = d["x0"]
        cols = 1 if isinstance(x0, np.ndarray) and x0.ndim == 2 and x0.shape[1] == 1 else n_probes + 1
        return cls(expect_array(d["probes"], (n, n_probes), "probes", optional=True),
                   expect_array(x0, (n, cols), "x0", optional=True, finite=finite),
                   rng_from_state(d["rng"]),
                   expect_array(d.get("precond_at"), (p,), "precond_at", optional=True), solves, first)


class GPPosterior:
    """Log posterior of φ = log θ for a zero-mean GP with ``kernel`` + noise on standardised (X, y).

    ``op`` is the kernel operator (each φ asked for is computed with ``op.with_log_params(φ)``, which
    shares its executor and cached rows; ``op`` itself never moves); ``prior`` the Gamma prior in log space.
    ``stochastic_grad(φ, t)`` is the callable SGLD wants: Hutchinson probes are redrawn every
    ``redraw_every`` iterations and kept fixed in between, and the solves are warm-started from the previous
    iteration's CG iterates. With ``precond='pivchol'`` the preconditioner is built when the probes are
    redrawn and kept until the next redraw, or every ``precond_every`` iterations when given (any SPD
    preconditioner leaves the estimates unbiased; rebuilding it every iteration cost four times the solve on
    concrete). Extra keyword arguments go to
    :func:`daskgp.log_marginal_gradient`. ``info`` holds the CG iterations, the operator passes and
    'noise_cov' (p, p), the within-iteration estimate of the gradient's covariance over the probes.
    """

    def __init__(self, op: KernelOperator, y, prior: GammaPrior | None = None, *, n_probes: int = 4,
                 redraw_every: int = 20, rng=None, precond_every: int | None = None, **grad_kwargs):
        self.op, self.y = op, target_like(y, op)  # in the operator's namespace, on its device
        self.prior = prior or GammaPrior()
        self.n_probes, self.redraw_every = n_probes, redraw_every
        self.precond_every = precond_every or redraw_every
        self.grad_kwargs = grad_kwargs
        self.state = ProbeState.initial(rng)
        self._precond = None  # built at state.precond_at; not part of the state: rebuilt from it
        self._reuse_precond = (grad_kwargs.get("precond") == "pivchol"
                               and not grad_kwargs.get("control_variate"))
        self.on_solve = None  # callback(CG iterations so far) during every solve: a heartbeat for long ones

    @property
    def param_names(self) -> list[str]:
        return self.op.param_names

    def stochastic_grad(self, phi, t: int):
        """(ĝ (p,), info) — unbiased ∇_φ log p(φ | y) at φ, SGLD iteration t."""
        phi = np.asarray(phi, dtype=float)
        op = self.op.with_log_params(phi)
        st = self.state
        kwargs = dict(self.grad_kwargs)
        kwargs.pop("max_iter", None)  # the solve budget's (solve_budget)
        redraw = st.probes is None or t % self.redraw_every == 0
        if redraw:
            st.probes = rademacher(self.op.n, self.n_probes, st.rng)
        if redraw or st.x0 is not None and st.x0.shape[1] == 1:  # (n, 1): a warmup's checkpoint, K⁻¹y's
            st.x0 = _mean_start(st.x0, self.n_probes) if self.keeps_mean_start else None
        # probes drawn on the host (or read back from a checkpoint) go to the operator's device once
        st.probes, st.x0 = into(st.probes, self.op.X), into(st.x0, self.op.X)
        # a preconditioner gone stale (the last solve took STALE_FACTOR times the first solve's iterations
        # with it, and STALE_MARGIN more: φ moved far from where it was built, as a warmup's ascent does) is
        # rebuilt here rather than at the next scheduled redraw
        stale = (st.precond_iters is not None and st.solves is not None and st.solves.size > 0
                 and st.solves[-1] > STALE_FACTOR * st.precond_iters + STALE_MARGIN)
        fresh = self._reuse_precond and (st.precond_at is None or t % self.precond_every == 0 or stale)
        if fresh:
            st.precond_at, self._precond = phi.copy(), None
        if self._reuse_precond:
            if self._precond is None or not np.array_equal(self._precond_phi, st.precond_at):
                self._precond = self._build_precond(st.precond_at, phi)
            kwargs["precond"] = self._precond
        budget, retried = self.solve_budget(), 0
        # the generator's state before the solve: a retry redraws ULISSE's roulette from the same point
        rng_state = st.rng.bit_generator.state
        kwargs["callback"] = self.on_solve
        est = log_marginal_gradient(op, self.y, probes=st.probes, x0=st.x0, rng=st.rng, max_iter=budget,
                                    **kwargs)
        if not est.converged:
            # K at φ is worse conditioned than the budget allows: rebuild the preconditioner here (it may
            # have been built far away) and give the solve twice the budget, once; then give up, loudly
            retried = 1
            n_before = est.n_products
            if self._reuse_precond:
                st.precond_at, self._precond = phi.copy(), None
                self._precond = self._build_precond(phi, phi)
                kwargs["precond"] = self._precond
            st.rng.bit_generator.state = rng_state
            # from where the first attempt stopped (its CG iterates), not from scratch
            est = log_marginal_gradient(op, self.y, probes=st.probes, x0=est.warm_start, rng=st.rng,
                                        max_iter=2 * budget, **kwargs)
            est.n_products += n_before
            if not est.converged:
                st.x0 = None
                raise SolveBudgetExceeded(phi, int(est.cg_iterations.max()), 2 * budget, self._reuse_precond)
            how = "with the preconditioner rebuilt there" if self._reuse_precond else "given twice the budget"
            log.warning("daskgp: the solve at φ=%s went over its budget of %d CG iterations; %s, it "
                        "converged in %d", np.round(phi, 4).tolist(), budget, how,
                        int(est.cg_iterations.max()))
        st.x0 = est.warm_start
        its = int(est.cg_iterations.max())
        st.solves = np.append(np.zeros(0) if st.solves is None else st.solves, its)[-SOLVE_WINDOW:]
        # the first solve with a new preconditioner: the measure of its staleness
        if self._reuse_precond and (fresh or retried):
            st.precond_iters = its
        # p numbers to the host: the sampler's step, its state and the checkpoint live there
        cov = est.noise_cov
        return to_host(est.grad) + self.prior.grad(phi), {"cg_iterations": its,
                                                          "n_products": int(est.n_products),
                                                          "solve_retries": retried,
                                                          "noise_cov": None if cov is None else to_host(cov)}

    @property
    def keeps_mean_start(self) -> bool:
        """Whether K⁻¹y's last iterate warm-starts the next gradient after a redraw: only where it is solved
        to the tolerance (CG, or CG for y and ULISSE for the probes). Under ULISSE's roulette the stopped
        iterate is a truncated one, and starting from it raised SGHMC's measured gradient noise on concrete
        from about 1.6 to 3.4 (64 probes)."""
        return self.grad_kwargs.get("solver", "ulisse") in ("cg", "cg-ulisse")

    def solve_budget(self) -> int:
        """The most CG iterations the next gradient's solve may take: :data:`BUDGET_FACTOR` times the most
        of the last :data:`SOLVE_WINDOW` gradients' (at least :data:`BUDGET_MIN`), or :data:`FIRST_BUDGET`
        before any was measured; an explicit ``max_iter`` given to the posterior wins."""
        if self.grad_kwargs.get("max_iter") is not None:
            return int(self.grad_kwargs["max_iter"])
        solves = self.state.solves
        if solves is None or solves.size == 0:
            return FIRST_BUDGET
        return max(BUDGET_MIN, int(BUDGET_FACTOR * solves.max()))

    def preconditioner_at(self, phi):
        """A preconditioner of this posterior's kind built at φ (p,) — its pivoted Cholesky of the chains'
        rank, applied in the cached rows' precision — or None when the posterior uses none. For solves that
        stay near φ (the curvature's central differences): one build serves them all."""
        if self.grad_kwargs.get("precond") != "pivchol":
            return None
        return self._pivoted_cholesky(np.asarray(phi, dtype=float))

    def _build_precond(self, at: np.ndarray, phi: np.ndarray):
        """The chains' kept preconditioner, built at ``at`` (≠ φ: a resumed chain rebuilds it where it was
        built), remembered as built there."""
        pc = self._pivoted_cholesky(at)
        self._precond_phi = at.copy()
        return pc

    def _pivoted_cholesky(self, at: np.ndarray):
        from ..compute.solvers import PivotedCholesky

        # the low-rank apply in the precision of the operator's cached rows: float32 rows make the products
        # a sampler's speed setting, and the preconditioner's apply then costs as much as a product again
        # in float64 (rank 2,000 on 8,192 rows: 0.10 s against 0.04 s a pass)
        apply = "float32" if getattr(self.op, "cache_dtype", None) == np.float32 else "float64"
        return PivotedCholesky(self.op.with_log_params(at), rank=self.grad_kwargs.get("precond_rank", 100),
                               apply_dtype=apply)

    def exact(self, phi, gradient: bool = True):
        """Exact log posterior (and gradient) at φ by Cholesky (numpy, on the host): small n only."""
        return exact_log_posterior(to_host(self.op.X), to_host(self.y), self.op.kernel, self.prior, phi,
                                   gradient)


# The solve budget (GPPosterior.solve_budget): a gradient's solve may take at most BUDGET_FACTOR times the
# most CG iterations of the last SOLVE_WINDOW gradients (at least BUDGET_MIN), and FIRST_BUDGET before any
# was measured. Along a chain the count moves by a few iterations per gradient (house_8L: 65–68 on 22,784
# rows, 20–21 on 8,192, 9 on concrete), so 4x is reached only where K has become far worse conditioned than
# anywhere the chain has been: the run that ran 450+ iterations for five silent minutes had needed ~60.
SOLVE_WINDOW, BUDGET_FACTOR, BUDGET_MIN, FIRST_BUDGET = 20, 4, 100, 1000
# A kept preconditioner is stale when a solve takes more than STALE_FACTOR times the CG iterations of the
# first solve with it, plus STALE_MARGIN: on 8,192 house_8L rows a rank-2,000 preconditioner built at the
# subset MAP (lengthscale e^1.21) took 62–76 iterations halfway to the mode (7 s a gradient) where one built
# there took 3 (0.6 s; building it costs 3.3 s), and over the budget at the mode. A warmup's ascent crosses
# that distance in tens of gradients, a chain's step moves φ by about a posterior sd.
STALE_FACTOR, STALE_MARGIN = 2, 5


class SolveBudgetExceeded(FloatingPointError):
    """A gradient's solve did not reach its tolerance within its budget, even after the preconditioner was
    rebuilt at that φ; ``phi`` (p,) where, ``iterations`` how many, ``budget`` the budget it was given."""

    def __init__(self, phi, iterations: int, budget: int, rebuilt: bool):
        self.phi, self.iterations, self.budget = np.asarray(phi, dtype=float), int(iterations), int(budget)
        how = " (also with the preconditioner rebuilt there)" if rebuilt else ""
        super().__init__(f"the solve at φ={np.round(self.phi, 4).tolist()} did not converge within its "
                         f"budget of {self.budget} CG iterations{how}: K is far worse conditioned there than "
                         "anywhere before")


def _mean_start(x0, n_probes: int):
    """The warm start (n, 1 + n_probes) for fresh probes: K⁻¹y's last iterate (x0's first column; θ moved
    a little since), the probes' columns zero; None without one. In x0's namespace."""
    if x0 is None:
        return None
    xp = namespace(x0)
    zeros = xp.zeros((x0.shape[0], n_probes), dtype=x0.dtype, device=device(x0))
    return xp.concat([x0[:, :1], zeros], axis=1)


def _host(a):
    return None if a is None else to_host(a)




def exact_log_posterior(X, y, kernel: Kernel, prior: GammaPrior, phi, gradient: bool = True,
                        single: bool = False):
    """log p(φ | y) up to a constant (and its gradient (p,)) at φ, by dense Cholesky; ``kernel`` gives the
    family, its parameters are replaced by φ[:-1] and the noise by exp(φ[-1]). ``single``: the gradient in
    single precision where :func:`daskgp.exact.marginal.single_precision_ok` allows it at φ (float64
    otherwise, and where the float32 factorisation fails); the value is then single-precision too."""
    phi = np.asarray(phi, dtype=float)
    k = kernel.with_log_params(phi[:-1])
    noise = float(np.exp(phi[-1]))
    out = None
    if single and gradient and single_precision_ok(X.shape[0], k.variance, noise):
        with contextlib.suppress(np.linalg.LinAlgError):
            out = exact_log_marginal(X, y, k, noise, single=True)
    if out is None:
        out = exact_log_marginal(X, y, k, noise, gradient=gradient)
    if not gradient:
        return out + prior.logpdf(phi)
    return out[0] + prior.logpdf(phi), out[1] + prior.grad(phi)


def central_hessian(neg_log_post, phi, h: float) -> np.ndarray:
    """Hessian (p, p) of −log p at φ (p,) by central differences of its gradient, step ``h`` in each
    log-parameter, symmetrised; ``neg_log_post(φ)`` returns (−log p, −∇log p)."""
    phi = np.asarray(phi, dtype=float)
    p = phi.size
    H = np.empty((p, p))
    for j in range(p):
        e = np.zeros(p)
        e[j] = h
        H[:, j] = (neg_log_post(phi + e)[1] - neg_log_post(phi - e)[1]) / (2 * h)
    return 0.5 * (H + H.T)


def subset_map(X, y, kernel: Kernel, noise: float, *, prior: GammaPrior | None = None, size: int = 800,
               rng=None) -> tuple[np.ndarray, np.ndarray]:
    """MAP of the exact log posterior on a random subset of ``size`` rows (L-BFGS), and the preconditioner
    M = (−∇²log p)⁻¹ there (Hessian by central differences of the exact gradient, symmetrised).
    Returns (φ_MAP (p,), M (p, p)). Raises if the Hessian is not negative definite."""
    X = check_X(X)
    y = check_y(y, X.shape[0])
    prior = prior or GammaPrior()
    rng = np.random.default_rng(rng)
    idx = rng.choice(X.shape[0], size=min(size, X.shape[0]), replace=False)
    Xs, ys = X[idx], y[idx]

    def neg(phi):
        v, g = exact_log_posterior(Xs, ys, kernel, prior, phi)
        return -v, -g

    phi0 = np.concatenate([kernel.log_params, [np.log(noise)]])
    res = lbfgsb(neg, phi0, bounds=[(-12.0, 12.0)] * phi0.size)
    phi = res.x
    H = central_hessian(neg, phi, 1e-4)
    w = np.linalg.eigvalsh(H)
    if w.min() <= 0:
        raise np.linalg.LinAlgError(f"the subset MAP is not a strict maximum (Hessian eigenvalues {w})")
    return phi, np.linalg.inv(H)
