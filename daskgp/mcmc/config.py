"""The configuration of a run of GP hyperparameter chains (Filippone & Engler 2015, section 4: SGLD with
ULISSE gradients; adaptive MH on the exact posterior as the reference), the fingerprint that ties a run to
its data, and the memory check of the exact-posterior method. Stored with every run, so ``resume`` rebuilds
the same chains (``fingerprint``, re-exported from :mod:`daskgp.core.fingerprint`, ties it to its data).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, make_dataclass, replace
from typing import NamedTuple

import numpy as np

from ..compute.precision import rows_dtype_for
from ..compute.solvers import ROULETTES
from ..core.fingerprint import fingerprint
from ..core.validation import check_positive
from ..exact.marginal import SOLVERS
from ..model.kernels import KERNELS
from .samplers import AUTO, Sampler, default_method, find_sampler, get_sampler
from .samplers.settings import as_options, checked_settings, legacy_options, setting_names
from .samplers.sghmc import LARGE_N, SGHMC_PRECOND_RANK, SGHMC_PRECOND_RANK_LARGE, SGHMC_PROBES
from .sizing import MAX_CHAINS, check_method_fits, check_run_size

__all__ = ["SamplerConfig", "ModelSpec", "SamplerSpec", "SolverSpec", "RunSpec", "Specs", "fingerprint",
           "check_method_fits", "check_run_size", "MAX_CHAINS", "WARMUPS", "EXACT_WARMUP_MAX_N",
           # the SGHMC sampler's settings, defined in daskgp.mcmc.samplers.sghmc
           "SGHMC_PROBES", "SGHMC_PRECOND_RANK", "LARGE_N", "SGHMC_PRECOND_RANK_LARGE"]


# K⁻¹y's CG tolerance where it is solved apart ('cg', 'cg-ulisse'): its quadratic form's bias at 1e-4 was at
# most 0.9 % of the gradient's 32-probe noise sd on house_8L's 8,192 and 22,784 rows (at 1e-3 up to 7 %),
# and it saves 19 of 65 one-column iterations cold on 22,784 rows
MEAN_TOL = 1e-4

# iterations per block (a task per chain, a commit of all chains) where neither the configuration nor, for a
# run to a target ESS, its sampler (:meth:`daskgp.mcmc.samplers.Sampler.block_for_target`) sets one
DEFAULT_BLOCK = 100


@dataclass
class SamplerConfig:
    """Everything that defines a run (stored with it, so ``resume`` rebuilds the same chains).

    Model: ``kernel`` ('rbf' | 'matern32' | 'matern52'), ``ard``; Gamma(``prior_shape``, ``prior_rate``)
    priors on every natural-scale parameter. Run: ``method`` (a registered sampler, or 'auto', the default:
    the one the data's size calls for by the samplers' measured crossovers — today HMC up to 1,400 rows, SGHMC
    beyond — resolved by :meth:`for_rows` when a run starts and stored resolved), ``n_chains``, ``n_iter``
    iterations per chain, ``checkpoint_every`` iterations per block (the unit of commits and of a target's
    stopping checks; None: :data:`DEFAULT_BLOCK`, or the sampler's for a target run), ``seed``,
    ``subset_size`` rows for the subset MAP/Laplace. Warmup: 'map' (default) takes the chains to the full-data
    posterior before they start — by the exact Cholesky MAP and Hessian up to :data:`EXACT_WARMUP_MAX_N` rows
    (and always for MH), beyond it, for the gradient samplers, by stochastic gradient ascent from the subset
    MAP (at most ``warmup_iter`` gradients) and the Laplace covariance there from ``laplace_probes`` common
    probes (:mod:`daskgp.exact.mode`; with 8 the sds of repeated estimates on concrete ranged over 0.89–1.51
    of the exact ones, with 128 over 0.92–1.05), which 'ascent' asks for whatever the size — and starts them
    overdispersed around that mode, at ``overdispersion`` times its Laplace sd; 'subset' is the paper's
    start, from the subset MAP with the subset Laplace covariance scaled by subset/n.
    ``options``: the method's own settings, plain data checked by its sampler's settings dataclass and
    stored complete (:attr:`settings` gives them as that dataclass): SGLD's step sizes ``step_start`` →
    ``step_end`` over ``step_iter`` iterations with exponent ``step_gamma``, frozen when the ratio over a
    ``batch`` of gradients is below ``freeze_threshold`` (:class:`daskgp.mcmc.samplers.sgld.SGLDSettings`);
    SGHMC's ``friction``, step cap ``h_max``, ``noise_budget`` and adaptation ``batch``
    (:class:`daskgp.mcmc.samplers.sghmc.SGHMCSettings`). The gradient: ``n_probes`` Hutchinson probes
    redrawn every ``redraw_every`` iterations (SGHMC: every iteration; its preconditioner then kept for
    ``redraw_every``); ``solver`` 'ulisse' | 'cg' | 'cg-ulisse' (K⁻¹y by CG, the probes by ULISSE) with
    ``es_tol``, ``tol``, ``mean_tol`` (K⁻¹y's own tolerance under 'cg' and 'cg-ulisse', None: ``tol``; see
    :func:`daskgp.exact.marginal.log_marginal_gradient`), ``beta`` and ULISSE's ``roulette`` ('increment',
    'residual', 'exponential': see :func:`daskgp.compute.solvers.ulisse`); ``precond`` None | 'pivchol' of
    rank ``precond_rank``; the kernel rows the operator caches are kept in ``cache_dtype`` ('auto', the
    default: float32 unless the noise variance is so small against the kernel's that float32 rounding would
    stall CG, decided by :meth:`for_start` and stored resolved, see :mod:`daskgp.compute.precision`);
    ``device`` where each chain's operator computes on its worker: 'cpu' (numpy), 'gpu' (cupy: an error on a
    worker without one) or 'auto'; the chains' states, draws and checkpoints are numpy whatever the device;
    a chain whose ``|φ|`` exceeds ``max_abs_phi`` stops (divergence).
    Adaptation: the first ``n_adapt`` iterations (default a fifth of the run) are the run's warmup: their
    draws are stored apart (ArviZ's warmup groups) and every summary leaves them out; SGLD's step schedule
    does not depend on it.
    Length: ``n_iter`` iterations per chain (default 2,000); with ``target_ess`` the run instead stops at the
    first block where every parameter's bulk and tail ESS (post-warmup, all chains) reach ``target_ess`` and
    every R-hat is below ``target_rhat``, and ``n_iter`` is only its cap (default 50,000). A run's tuning
    length does not depend on its cap there: SGHMC adapts over 4 batches, MH over 1,000 iterations and the
    SGLD step schedule spans ``step_iter`` = 2,000 iterations (with a fixed length: ``n_iter``/5 and
    ``n_iter``). ``adapt_from_noise`` (resolved True for such a run whose ``n_adapt`` is left unset, if its
    sampler supports it: SGHMC): after a stochastic warmup that converged to a positive definite Laplace
    covariance, the adaptation is shortened to what the gradient noise the warmup measured at the mode
    needs (:meth:`daskgp.mcmc.samplers.SGHMCSampler.adaptation_from_noise`), and the run stores the
    ``n_adapt`` it used. ``probes_from_noise`` (resolved True when ``n_probes`` is left unset): after such a
    warmup the chains use the fewest probes whose noise leaves the step where it is, stored as ``n_probes``.
    Layout: ``workers_per_chain`` workers compute each chain's kernel products (None: ⌊workers / chains⌋ from
    16,384 rows, else 1; see :mod:`daskgp.mcmc.layout`); the draws do not depend on it.
    Defaults left as None are resolved when the configuration is made and stored resolved (``n_probes``: the
    sampler's, 32 for SGHMC, 4 — the paper's N_r — otherwise); ``solver`` and ``precond_rank`` None are
    resolved for the data's size by :meth:`solver_for` and :meth:`precond_rank_for`.
    """

    method: str = AUTO
    n_chains: int = 4
    n_iter: int | None = None
    kernel: str = "rbf"
    ard: bool = False
    prior_shape: float = 2.0
    prior_rate: float = 1.0
    seed: int = 0
    checkpoint_every: int | None = None
    subset_size: int = 500
    options: dict | None = None
    n_probes: int | None = None
    redraw_every: int = 20
    solver: str | None = None
    es_tol: float = 1e-2
    tol: float = 1e-6
    mean_tol: float | None = MEAN_TOL
    beta: float = 1.0
    roulette: str = "increment"
    precond: str | None = "pivchol"
    precond_rank: int | None = None
    cache_dtype: str = "auto"
    device: str = "cpu"
    max_abs_phi: float = 30.0
    warmup: str = "map"
    warmup_iter: int = 400
    laplace_probes: int = 128
    overdispersion: float = 1.5
    n_adapt: int | None = None
    adapt_from_noise: bool | None = None
    probes_from_noise: bool | None = None
    target_ess: int | None = None
    target_rhat: float = 1.01
    workers_per_chain: int | None = None

    def __post_init__(self):
        target = self.target_ess is not None
        if self.n_iter is None:
            self.n_iter = 50_000 if target else 2000
        self.options = dict(self.options or {})
        sampler = find_sampler(self.method)  # None for an unknown name: validate() says so
        if sampler is None:
            return
        # the method's own settings, every one present (defaults filled in): what the run stores; a
        # malformed one is left for validate() to name
        try:
            self.options = as_options(checked_settings(sampler.settings, self.options, sampler.name))
        except (TypeError, ValueError):
            pass
        if self.checkpoint_every is None:
            self.checkpoint_every = (sampler.block_for_target(self) if target else None) or DEFAULT_BLOCK
        if self.probes_from_noise is None:  # before n_probes is resolved: was it left to the sampler?
            self.probes_from_noise = self.n_probes is None
        if self.n_probes is None:
            self.n_probes = sampler.default_probes
        sampler.resolve(self)
        if self.adapt_from_noise is None:  # before n_adapt is resolved: was it left to the sampler?
            self.adapt_from_noise = bool(target and self.n_adapt is None and sampler.adapts_from_noise)
        if target and self.n_adapt is None:
            adapt = sampler.adaptation_for_target(self)
            if adapt is not None:  # a small cap adapts less
                self.n_adapt = min(adapt, self.n_iter // 5)

    def for_rows(self, n: int) -> SamplerConfig:
        """This configuration for data of n rows: with ``method='auto'`` the sampler its size calls for
        (:func:`daskgp.mcmc.samplers.default_method`, from the samplers' measured crossovers; today HMC up to
        1,400 rows, SGHMC beyond) with that sampler's defaults resolved; any other method unchanged. What a
        run stores."""
        if self.method != AUTO:
            return self
        # the stochastic ascent as the warmup asks for a sampler that runs on the same gradients
        method = default_method(n, gradient=self.warmup == "ascent")
        foreign = sorted(set(self.options) - setting_names(method))
        if foreign:
            raise ValueError(f"the data's size ({n} rows) calls for {method}, which has no setting "
                             f"{foreign}: name the method those settings belong to")
        return replace(self, method=method).validate()

    def for_start(self, n: int, phi, cov) -> tuple[SamplerConfig, float | None]:
        """This configuration with ``cache_dtype`` 'auto' resolved for n rows from the run's start φ (p,)
        (log parameters: the kernel's variance first, the noise variance last) and its covariance cov
        (p, p): float32 where ε₃₂·n·s/σ² (:func:`daskgp.compute.precision.rows_dtype_for`) stays within its
        bound at 3 sd above the start's log s/σ² (the chains may go there), float64 otherwise. Returns
        (config, that bound), the bound None when the dtype was given. A sampler on the exact Cholesky
        posterior (MH, HMC) caches no rows: 'auto' becomes float32 there, with no bound."""
        if self.cache_dtype != "auto":
            return self, None
        if not self.sampler.uses_gradient:
            return replace(self, cache_dtype="float32"), None
        phi, cov = np.asarray(phi, dtype=float), np.asarray(cov, dtype=float)
        a = np.zeros(phi.size)
        a[0], a[-1] = 1.0, -1.0  # log s − log σ²
        upper = float(a @ phi + 3.0 * np.sqrt(max(float(a @ cov @ a), 0.0)))
        dtype, bound = rows_dtype_for(n, upper, 0.0)
        return replace(self, cache_dtype=dtype), bound

    def validate(self) -> SamplerConfig:
        # 'auto': the sampler is chosen by the data's size, and for_rows validates the result with its checks
        auto = self.method == AUTO
        sampler = None if auto else get_sampler(self.method)  # ValueError naming the registered samplers
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {self.kernel!r}")
        for name in ("n_chains", "n_iter", "checkpoint_every", "subset_size", "n_probes",
                     "redraw_every", "warmup_iter", "laplace_probes"):
            v = getattr(self, name)
            if v is None and auto and name in ("n_probes", "checkpoint_every"):  # the sampler's, by for_rows
                continue
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.mean_tol is not None:
            check_positive("mean_tol", self.mean_tol)
        for name in ("prior_shape", "prior_rate", "es_tol", "tol", "beta", "max_abs_phi", "overdispersion"):
            check_positive(name, getattr(self, name))
        if not isinstance(self.options, dict):
            raise ValueError(f"options must be a dict of the method's settings, got {self.options!r}")
        if sampler is not None:
            checked_settings(sampler.settings, self.options, sampler.name)  # ValueError naming the setting
        elif self.options:  # 'auto': each must be some sampler's (for_rows checks the chosen one's)
            unknown = sorted(set(self.options) - setting_names())
            if unknown:
                raise ValueError(f"no sampler has the setting(s) {unknown}")
        if self.roulette not in ROULETTES:
            raise ValueError(f"roulette must be one of {ROULETTES}, got {self.roulette!r}")
        if self.solver is not None and self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS} or None (by size), got {self.solver!r}")
        if self.warmup not in WARMUPS:
            raise ValueError(f"warmup must be one of {WARMUPS}, got {self.warmup!r}")
        if self.warmup == "ascent" and sampler is not None and not sampler.uses_gradient:
            raise ValueError(f"warmup 'ascent' climbs by stochastic gradients, which {self.method} does not "
                             "use: 'map' (the exact MAP) or 'subset'")
        if self.cache_dtype not in CACHE_DTYPES:
            raise ValueError(f"cache_dtype must be one of {CACHE_DTYPES}, got {self.cache_dtype!r}")
        if self.device not in ("auto", "cpu", "gpu"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', got {self.device!r}")
        if self.precond not in (None, "pivchol"):
            raise ValueError(f"precond must be None or 'pivchol', got {self.precond!r}")
        for name in ("target_ess", "precond_rank", "workers_per_chain"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if self.target_ess is not None and self.n_chains < 2:
            raise ValueError("a target ESS needs at least 2 chains: it also requires R-hat < target_rhat, "
                             "and R-hat compares chains")
        if not 1 < self.target_rhat < 2:
            raise ValueError(f"target_rhat must be in (1, 2), got {self.target_rhat!r}")
        for name in ("adapt_from_noise", "probes_from_noise"):
            v = getattr(self, name)
            if not (isinstance(v, (bool, np.bool_)) or auto and v is None):
                raise ValueError(f"{name} must be True or False, got {v!r}")
        if self.n_adapt is not None and not 0 <= self.n_adapt < self.n_iter:
            raise ValueError(f"n_adapt must be in [0, n_iter), got {self.n_adapt}")
        if sampler is not None:
            sampler.validate(self)
        return self

    @property
    def settings(self):
        """The method's own settings (its sampler's ``settings`` dataclass, frozen) from ``options``; None
        for a sampler without any."""
        return checked_settings(self.sampler.settings, self.options, self.method)

    @property
    def sampler(self) -> Sampler:
        """The registered :class:`daskgp.mcmc.samplers.Sampler` of ``method``."""
        if self.method == AUTO:
            raise ValueError("method 'auto' is chosen by the data's size: use cfg.for_rows(n) first")
        return get_sampler(self.method)

    def solver_for(self, n: int) -> str:
        """The gradient's solver for n rows: ``solver`` when set; else the sampler's (CG for SGHMC beyond
        LARGE_N rows, see there; ULISSE otherwise)."""
        return self.sampler.solver_for(self, n)

    def warmup_route(self, n: int) -> str:
        """How the warmup of a run on n rows finds its centre and mass matrix: 'subset' (the subset MAP and
        Laplace covariance, no warmup), 'exact' (the Cholesky MAP and exact Laplace covariance of all n rows:
        MH always, a gradient sampler up to EXACT_WARMUP_MAX_N rows) or 'ascent' (the stochastic ascent and
        curvature estimates: a gradient sampler beyond EXACT_WARMUP_MAX_N rows, or asked for by name)."""
        if self.warmup == "subset":
            return "subset"
        if self.sampler.uses_gradient and (self.warmup == "ascent" or n > EXACT_WARMUP_MAX_N):
            return "ascent"
        return "exact"

    def precond_rank_for(self, n: int) -> int:
        """The preconditioner's rank for n rows: ``precond_rank`` when set; else for SGHMC 300 up to LARGE_N
        rows and 2,000 beyond (see SGHMC_PRECOND_RANK), and 100 — the paper's — for SGLD (the pivoted
        Cholesky caps it at n/2)."""
        return self.sampler.precond_rank_for(self, n)

    def block_ends(self, done: int = 0) -> list[int]:
        """Where the run's blocks of draws end: every ``checkpoint_every`` iterations, restarting at the
        warmup's end (``adapt``), so that no block holds both warmup and kept draws. ``done``: the draws a
        run already has — when they end off this grid (a run of a length that is not a multiple of the
        blocks, since extended), its short last block is a block like any other and the grid restarts there.
        """
        B, N, W = self.checkpoint_every, self.n_iter, min(self.adapt, self.n_iter)
        ends = list(range(B, W, B)) + ([W] if W > 0 else [])
        ends += list(range(W + B, N, B)) + [N] if N > W else []
        if done <= 0 or done in ends or done > N:
            return ends
        after = list(range(done + B, N, B)) + ([N] if N > done else [])
        return [e for e in ends if e < done] + [done] + after

    @property
    def adapt(self) -> int:
        return self.n_iter // 5 if self.n_adapt is None else self.n_adapt

    @classmethod
    def from_dict(cls, d: dict) -> SamplerConfig:
        """A validated configuration from its fields; a key that is not one (a misspelt option) raises
        ValueError naming the closest field, instead of being dropped."""
        import difflib

        known = [f.name for f in fields(cls)]
        d = legacy_options(d, reserved=set(known))
        for k in d:
            if k not in known:
                close = difflib.get_close_matches(str(k), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"unknown sampler option {k!r}{hint}")
        return cls(**d).validate()

    @classmethod
    def from_specs(cls, model: ModelSpec | None = None, sampler: SamplerSpec | None = None,
                   solver: SolverSpec | None = None, run: RunSpec | None = None) -> SamplerConfig:
        """A validated configuration from its four typed parts (each defaulted when not given)."""
        parts = {}
        for name, kind, part in zip(Specs._fields, SPEC_TYPES, (model, sampler, solver, run), strict=True):
            if part is not None and not isinstance(part, kind):
                raise TypeError(f"{name} must be a {kind.__name__}, got {type(part).__name__}")
            parts.update(asdict(part if part is not None else kind()))
        return cls(**parts).validate()

    def specs(self) -> Specs:
        """The configuration as its four typed parts (:class:`Specs`), defaults resolved. A run's stored
        configuration (format 3, flat) reads into them by ``SamplerConfig.from_dict(d).specs()``."""
        d = asdict(self)
        return Specs(*(kind(**{f.name: d[f.name] for f in fields(kind)}) for kind in SPEC_TYPES))


# The typed parts of a configuration: which fields of SamplerConfig each holds. The parts are made from
# SamplerConfig's own fields (types and defaults), so they cannot drift from it; every field is in exactly
# one part (tests/mcmc/test_config.py checks it).
_PARTS = {
    "ModelSpec": ("the GP model: ``kernel``, ``ard``, the Gamma(``prior_shape``, ``prior_rate``) priors",
                  ("kernel", "ard", "prior_shape", "prior_rate")),
    "SamplerSpec": ("the sampler and its start: ``method`` (a registered sampler) and its own settings "
                    "(``options``: SGLD's step schedule and freezing, SGHMC's friction, step cap and noise "
                    "budget), the adaptation length, the divergence bound, the warmup ('map', 'ascent' or "
                    "'subset') and its settings",
                    ("method", "options", "n_adapt", "adapt_from_noise", "max_abs_phi",
                     "warmup", "warmup_iter", "laplace_probes", "overdispersion", "subset_size")),
    "SolverSpec": ("the stochastic gradient: probes and how often they and the preconditioner are redrawn, "
                   "whether the warmup's noise may cut the probes, the solver ('ulisse' / 'cg' / "
                   "'cg-ulisse' / None by size) and its tolerances and roulette, the "
                   "preconditioner and its rank, the cached kernel rows' dtype, the device",
                   ("solver", "n_probes", "probes_from_noise", "redraw_every", "es_tol", "tol", "mean_tol",
                    "beta",
                    "roulette", "precond", "precond_rank", "cache_dtype", "device")),
    "RunSpec": ("the run: chains, iterations per chain, seed, iterations per committed block, the "
                "target ESS / R-hat that stop it early, and the workers per chain",
                ("n_chains", "n_iter", "seed", "checkpoint_every", "target_ess", "target_rhat",
                 "workers_per_chain")),
}


def _part(name: str, doc: str, names: tuple) -> type:
    own = {f.name: f for f in fields(SamplerConfig)}
    cls = make_dataclass(name, [(k, own[k].type, field(default=own[k].default)) for k in names],
                         frozen=True, kw_only=True, module=__name__)
    cls.__doc__ = (f"{doc[0].upper()}{doc[1:]} (fields and defaults as in :class:`SamplerConfig`; None: "
                   "resolved by the sampler when the configuration is made). Frozen.")
    return cls


ModelSpec = _part("ModelSpec", *_PARTS["ModelSpec"])
SamplerSpec = _part("SamplerSpec", *_PARTS["SamplerSpec"])
SolverSpec = _part("SolverSpec", *_PARTS["SolverSpec"])
RunSpec = _part("RunSpec", *_PARTS["RunSpec"])
SPEC_TYPES = (ModelSpec, SamplerSpec, SolverSpec, RunSpec)


class Specs(NamedTuple):
    """A configuration in its four typed parts (:meth:`SamplerConfig.specs`)."""

    model: ModelSpec
    sampler: SamplerSpec
    solver: SolverSpec
    run: RunSpec


WARMUPS = ("map", "ascent", "subset")
# the cached kernel rows' dtype: 'auto' is resolved when a run starts (SamplerConfig.for_start)
CACHE_DTYPES = ("auto", "float32", "float64")
# Up to this many rows the 'map' warmup of a gradient sampler is the exact MAP and Laplace covariance
# (L-BFGS on the Cholesky log posterior, tens of evaluations at O(n³) each) rather than the stochastic
# ascent and curvature estimates: 2.3–4.2× faster at 1,030 and 2,000 rows, and exact (the ascent once
# stopped 9 sd short on 2,000 rows; benchmarks/warmup_exact.py). Beyond it the ascent, whose gradients
# cost O(n²) each, becomes the cheaper way.
EXACT_WARMUP_MAX_N = 2000

