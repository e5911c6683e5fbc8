"""The sampler protocol: what the run driver, the run store, the CLI and the dashboard need of a sampling
method, and the checks every sampler's state and transition share.

A sampler here is the pair of an algorithm on an unconstrained parameter vector φ (p,) (a small object with
an explicit state: ``init`` → state, ``run(state, n)`` → records and the next state; the state's ``to_dict``
is plain data, its ``from_dict`` checks every field) and a :class:`Sampler` that tells the driver how to
configure, start, advance and record it. The driver never asks a sampler's name: a new sampler is one module
with its :class:`Sampler` subclass and one :func:`daskgp.mcmc.samplers.register` line (or an entry point in
the ``daskgp.samplers`` group, for a sampler that lives in another package).

The sampler reads its target through a :class:`Target`: the exact log density (a dense Cholesky: MH) or the
stochastic gradient ĝ(φ, t) of Filippone & Engler (2015, section 3.2) through the matrix-free kernel operator
(SGLD, SGHMC).
"""

from __future__ import annotations

from typing import ClassVar, Protocol

import numpy as np

from ...inference.method import Method

__all__ = ["Sampler", "Target", "ChainStateLike", "expect_stopped", "check_spd", "checked_gradient",
           "check_start", "solver_records"]


class Target(Protocol):
    """What a sampler samples (built per segment by :mod:`daskgp.mcmc.segments`)."""

    def log_density(self, phi: np.ndarray) -> float:
        """log p(φ | y) up to a constant, exact (a dense Cholesky), −inf where it cannot be evaluated."""

    def force(self, phi: np.ndarray) -> np.ndarray:
        """∇ log p(φ | y) (p,) by a dense Cholesky, in single precision where its error is small — a
        deterministic function of φ, what HMC's trajectories integrate between their ends; NaN where it
        cannot be evaluated."""

    def log_density_and_grad(self, phi: np.ndarray) -> tuple[float, np.ndarray]:
        """(log p(φ | y), ∇ log p (p,)) exact (a dense Cholesky); (−inf, zeros) where it cannot be
        evaluated."""

    def grad(self, phi: np.ndarray, t: int):
        """An unbiased estimate ĝ (p,) of ∇ log p(φ | y) at iteration t, or (ĝ, info dict of the solver's
        counts); raises ValueError / FloatingPointError / LinAlgError where it fails."""


class ChainStateLike(Protocol):
    """What the driver reads of any sampler's state: the next iteration ``t``, ``stopped`` (None, or the
    message of a chain that stopped), and ``to_dict`` (plain data: what a checkpoint commits)."""

    t: int
    stopped: str | None

    def to_dict(self) -> dict: ...


class Sampler(Method):
    """A sampling method the run driver can use: the 'mcmc' family's :class:`daskgp.inference.Method`.

    Class attributes: ``name`` (the registry name: ``SamplerConfig.method``, ``daskgp sample --method``);
    ``label`` (one line for menus and ``--help``); ``settings`` (a frozen dataclass of the method's own
    tunables, each declared by :func:`daskgp.inference.settings.setting`: the run's configuration holds
    them as ``options`` and hands them over as ``cfg.settings``, and ``daskgp sample``'s flags and the
    dashboard's inputs are generated from it; None: none); ``uses_gradient`` — True: it reads the stochastic
    gradient through the kernel operator (matrix-free, any n; its chain state carries the gradient's probes
    and warm starts, and the 'map' warmup is the stochastic one), False: the exact log density by a dense
    Cholesky (n limited by memory, :meth:`check_size`; the 'map' warmup is the exact MAP);
    ``default_probes`` (Hutchinson probes per gradient when the configuration leaves ``n_probes`` unset);
    ``records`` (the per-iteration sample stats :meth:`run` returns and their dtypes: every block stores the
    same arrays; 'seconds' and 'warmup' are required); ``gradient_records`` (its records also hold ĝ at
    each draw, 'grads' (k, p): the fidelity checks of :mod:`daskgp.mcmc.fidelity` read them); ``monitor``
    ({record: (title, log axis)}: the records the dashboard plots per chain for this sampler's health);
    ``default_max_n`` (the most rows for which ``method='auto'`` picks this sampler, from its measured
    crossover with the others: :func:`daskgp.mcmc.samplers.default_method`; None: never picked by size);
    ``adapts_from_noise`` (:meth:`adaptation_from_noise` can shorten a target run's adaptation, and
    :meth:`probes_from_noise` any run's probes, from the gradient noise its warmup measured).

    The methods take the run's :class:`daskgp.mcmc.config.SamplerConfig` ``cfg``; the defaults are those of
    a gradient sampler with the paper's solver settings (ULISSE, rank-100 preconditioner).
    """

    family: ClassVar[str] = "mcmc"
    uses_gradient: ClassVar[bool] = True
    default_probes: ClassVar[int] = 4
    records: ClassVar[dict[str, type]] = {}
    gradient_records: ClassVar[bool] = False
    monitor: ClassVar[dict[str, tuple[str, bool]]] = {}
    adapts_from_noise: ClassVar[bool] = False
    default_max_n: ClassVar[float | None] = None

    # configuration
    def resolve(self, cfg) -> None:
        """Fill in, in place, the configuration's defaults that depend on this sampler (called when a
        configuration is made; ``n_probes`` is already resolved from :attr:`default_probes`)."""

    def adaptation_for_target(self, cfg) -> int | None:
        """The adaptation iterations of a run sampled to a target ESS (whose ``n_iter`` is only a cap);
        None: a fifth of the cap, as a fixed-length run."""
        return None

    def block_for_target(self, cfg) -> int | None:
        """Iterations per block of a run sampled to a target ESS whose configuration leaves
        ``checkpoint_every`` unset: the target is checked at every committed block, so a sampler whose
        iterations are cheap and whose draws are nearly independent stops closer to it with shorter ones;
        None: :data:`daskgp.mcmc.config.DEFAULT_BLOCK`."""
        return None

    def adaptation_from_noise(self, cfg, noise: float) -> int | None:
        """The adaptation iterations of a target run (``cfg.adapt_from_noise``) once its warmup has measured
        ``noise``, the largest eigenvalue of the gradient-noise covariance per gradient in the units of the
        chains' metric, at the mode; None: keep ``cfg.n_adapt``."""
        return None

    def probes_from_noise(self, cfg, noise: float) -> int | None:
        """The probes per gradient of a run whose ``n_probes`` was left unset (``cfg.probes_from_noise``),
        once its warmup has measured ``noise`` with ``cfg.n_probes`` probes (as for
        :meth:`adaptation_from_noise`); None: keep ``cfg.n_probes``."""
        return None

    def validate(self, cfg) -> None:
        """Raise ValueError for a configuration this sampler cannot run (beyond the generic checks)."""

    def check_size(self, cfg, n: int, memory_bytes: float | None) -> None:
        """Raise MemoryError, before any work, where n rows cannot be sampled on this machine."""

    def solver_for(self, cfg, n: int) -> str:
        """The gradient's linear solver for n rows: ``cfg.solver`` when set, else ULISSE (the paper's)."""
        return cfg.solver or "ulisse"

    def precond_rank_for(self, cfg, n: int) -> int:
        """The preconditioner's rank for n rows: ``cfg.precond_rank`` when set, else 100 (the paper's)."""
        return int(cfg.precond_rank) if cfg.precond_rank is not None else 100

    def redraw_every(self, cfg) -> int:
        """Iterations between redraws of the gradient's probes."""
        return cfg.redraw_every

    # the chain
    def initial(self, phi0: np.ndarray, cfg, M: np.ndarray, rng: np.random.Generator,
                target: Target) -> ChainStateLike:
        """A chain's state before iteration 0, at φ₀ (p,) with preconditioner / first proposal shape M
        (p, p) and its own generator."""
        raise NotImplementedError

    def state_from_dict(self, d: dict, cfg, p: int) -> ChainStateLike:
        """The state ``to_dict`` wrote, every field checked; ValueError naming the first malformed one."""
        raise NotImplementedError

    def run(self, target: Target, cfg, M: np.ndarray, state: ChainStateLike,
            n: int) -> dict:
        """Advance ``state`` in place by up to n iterations; returns the records: 'phi' (k, p) the draws and
        every entry of :attr:`records` (k,), k ≤ n (shorter only when the chain stopped: ``state.stopped``
        says why, the draws so far kept)."""
        raise NotImplementedError


def solver_records(info: dict, k: int) -> dict:
    """The gradient's per-iteration solver counts from a gradient sampler's ``info``: 'cg_iterations' and
    'n_products' (k,) float (zeros where the gradient reported none)."""
    return {key: np.asarray(info.get(key, np.zeros(k))).astype(float)[:k]
            for key in ("cg_iterations", "n_products")}


def expect_stopped(v) -> str | None:
    if not (v is None or isinstance(v, str)):
        raise ValueError(f"stopped must be None or a message, got {type(v).__name__}")
    return v


def check_spd(M, p: int) -> np.ndarray:
    M = np.eye(p) if M is None else np.asarray(M, dtype=float)
    if M.shape != (p, p) or not np.all(np.isfinite(M)) or not np.allclose(M, M.T) \
            or np.linalg.eigvalsh(M).min() <= 0:
        raise ValueError(f"M must be a symmetric positive definite ({p}, {p}) matrix")
    return M


def checked_gradient(grad_fn, phi, t: int, p: int, state):
    """(ĝ (p,), info) = grad_fn(φ, t), or None after setting ``state.stopped`` to a divergence message: the
    gradient failed (φ beyond the model's range) or is not a finite (p,) vector."""
    try:
        out = grad_fn(phi, t)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError) as e:
        state.stopped = f"divergence at iteration {t}: the gradient failed at φ={phi.tolist()}: {e}"
        return None
    g, extra = out if isinstance(out, tuple) else (out, {})
    g = np.asarray(g, dtype=float)
    if g.shape != (p,) or not np.all(np.isfinite(g)):
        state.stopped = f"divergence at iteration {t}: non-finite gradient {g.tolist()} at φ={phi.tolist()}"
        return None
    return g, extra


def check_start(phi0) -> np.ndarray:
    phi = np.array(phi0, dtype=float)
    if phi.ndim != 1 or not np.all(np.isfinite(phi)):
        raise ValueError(f"phi0 must be a finite 1-D vector, got {phi0!r}")
    return phi
