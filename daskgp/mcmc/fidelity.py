"""Is the chains' stationary distribution the posterior? Checks that R-hat cannot make.

Chains that share a bias agree with each other, so R-hat and ESS say nothing about it: on 8,192 rows four
SGHMC chains agreed on a noise variance whose sd was 20× the exact one. The checks here use the stochastic
gradients ĝ the chains record at their draws (unbiased: E[ĝ | φ] = ∇log p(φ | y)) and identities that hold
for the posterior and for no other distribution:

* **Stein's identity** (integration by parts; the "configurational temperature" of molecular dynamics):
  for φ ~ p(φ | y), E[(φ − a)ᵢ ∂ᵢ log p(φ | y)] = −1 for every parameter i and any constant a. The ratio
  Tᵢ = −mean((φᵢ − φ̄ᵢ)ĝᵢ) is 1 on the posterior; on a Gaussian sampled with a covariance Σ_q it is
  (H Σ_q)ᵢᵢ, so an sd too wide by a factor r gives Tᵢ ≈ r² (a 15 % error ≈ 0.72 or 1.32).
* **The mean gradient**: E[∇log p] = 0 on the posterior; a chain whose mean is off by δ (in posterior sd)
  has mean whitened gradient ≈ −δ. The offset is reported per parameter as −(Σ̂ ḡ)ᵢ / ŝdᵢ (Σ̂, ŝd: the
  chains' covariance and sds).
* **Kinetic temperature** (SGHMC): the whitened momentum of BAOAB has mean |v|²/p = 1 − h²ω²/4 ≤ 1 in
  equilibrium on a Gaussian of whitened curvature ω²; a chain far above 1 runs hot (an unstable step, or
  gradient noise beyond the correction).
* **Stability** (SGHMC): the step against the largest measured whitened curvature, h·ω_max, must stay below
  BAOAB's limit 2.

Each statistic's Monte Carlo standard error comes from ArviZ (``az.mcse``, autocorrelation included); a
check fails only when its deviation is both material (beyond the tolerance that matters to a user, e.g.
15 % in sd) and significant (more than :data:`Z` standard errors), so that a correct run is not flagged by
chance and a short run is not judged before it can be.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import arviz as az
import numpy as np

__all__ = ["Fidelity", "fidelity", "fidelity_of_run", "fidelity_records", "STEIN_TOL", "OFFSET_TOL",
           "KINETIC_TOL", "Z", "MIN_DRAWS"]

STEIN_TOL = 0.3  # |Tᵢ − 1|: an sd more than ≈ 15 % off (1.15² − 1 = 0.32, 1 − 0.85² = 0.28)
OFFSET_TOL = 0.2  # a mean more than 0.2 posterior sd off
KINETIC_TOL = 0.25  # kinetic temperature above 1.25
Z = 4.0  # standard errors beyond the tolerance's edge before a check fails
MIN_DRAWS = 20  # kept draws per chain before the checks judge anything


@dataclass
class Fidelity:
    """The checks of one set of draws. ``judged``: enough draws to judge (else every check passes
    vacuously and ``trustworthy`` is False); ``reasons``: one line per failed check (empty when all pass);
    per parameter: ``stein`` Tᵢ and ``stein_se``, ``offset`` δᵢ in posterior sd and ``offset_se``;
    ``kinetic`` the mean kinetic temperature and ``kinetic_se``, ``stability`` the largest h·ω_max (None
    where the method does not record them)."""

    judged: bool
    reasons: list[str] = field(default_factory=list)
    stein: dict = field(default_factory=dict)
    stein_se: dict = field(default_factory=dict)
    offset: dict = field(default_factory=dict)
    offset_se: dict = field(default_factory=dict)
    kinetic: float | None = None
    kinetic_se: float | None = None
    stability: float | None = None

    @property
    def trustworthy(self) -> bool:
        return self.judged and not self.reasons

    def verdict(self) -> str:
        """One line for a summary or a dashboard."""
        if not self.judged:
            return f"fidelity not judged yet (fewer than {MIN_DRAWS} kept draws per chain)"
        if self.reasons:
            return "NOT TRUSTWORTHY: " + "; ".join(self.reasons)
        worst = max(self.stein, key=lambda k: abs(self.stein[k] - 1))
        return (f"fidelity checks passed (Stein ratios {_fmt(self.stein)}, worst {worst}; mean offsets "
                f"within {max(abs(v) for v in self.offset.values()):.2f} sd"
                + (f"; kinetic temperature {self.kinetic:.2f}" if self.kinetic is not None else "") + ")")

    def to_dict(self) -> dict:
        return {"judged": self.judged, "trustworthy": self.trustworthy, "reasons": list(self.reasons),
                "stein": self.stein, "stein_se": self.stein_se, "offset": self.offset,
                "offset_se": self.offset_se, "kinetic": self.kinetic, "kinetic_se": self.kinetic_se,
                "stability": self.stability}


def _fmt(d: dict) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in d.items())


def _mcse(x: np.ndarray) -> float:
    """Monte Carlo standard error of the mean of x (chains, draws), autocorrelation included (ArviZ)."""
    se = float(az.mcse(np.asarray(x, dtype=float), method="mean"))
    return se if np.isfinite(se) else float(np.std(x) / np.sqrt(x.size))


def _fails(dev: float, se: float, tol: float) -> bool:
    """Material (|dev| > tol) and significant (beyond the tolerance by more than Z standard errors)."""
    return abs(dev) > tol + Z * se


def fidelity(phi, grads, names, kinetic=None, stability=None) -> Fidelity:
    """The checks of kept draws: phi (chains, draws, p) log-parameters, grads (chains, draws, p) the
    stochastic gradients of log p(φ | y) at them, names (p,) parameter names; kinetic (chains, draws) the
    whitened kinetic temperature and stability (chains, draws) h·ω_max, both optional (SGHMC records them).
    Draws with NaN (a stopped chain) are left out chain by chain."""
    phi, grads = np.asarray(phi, dtype=float), np.asarray(grads, dtype=float)
    ok = np.isfinite(phi).all(axis=(1, 2)) & np.isfinite(grads).all(axis=(1, 2))
    phi, grads = phi[ok], grads[ok]
    if phi.shape[0] == 0 or phi.shape[1] < MIN_DRAWS:
        return Fidelity(judged=False)
    out = Fidelity(judged=True)
    flat = phi.reshape(-1, phi.shape[2])
    centre = flat.mean(axis=0)
    cov = np.atleast_2d(np.cov(flat.T))
    sd = np.sqrt(np.diag(cov))
    shift = -np.einsum("ij,cdj->cdi", cov, grads) / sd  # per draw −(Σ̂ ĝ)ᵢ/ŝdᵢ: its mean is the offset
    for i, nm in enumerate(names):
        prod = -(phi[:, :, i] - centre[i]) * grads[:, :, i]
        out.stein[nm], out.stein_se[nm] = float(prod.mean()), _mcse(prod)
        out.offset[nm], out.offset_se[nm] = float(shift[:, :, i].mean()), _mcse(shift[:, :, i])
        if _fails(out.stein[nm] - 1.0, out.stein_se[nm], STEIN_TOL):
            ratio = np.sqrt(max(out.stein[nm], 0.0))
            out.reasons.append(f"{nm}: Stein ratio {out.stein[nm]:.2f} ± {out.stein_se[nm]:.2f} (1 on the "
                               f"posterior; its sd looks {ratio:.2f}× the posterior's)")
        if _fails(out.offset[nm], out.offset_se[nm], OFFSET_TOL):
            out.reasons.append(f"{nm}: mean gradient says the mean is {out.offset[nm]:+.2f} ± "
                               f"{out.offset_se[nm]:.2f} posterior sd off the posterior's")
    if kinetic is not None:
        kin = np.asarray(kinetic, dtype=float)[ok]
        out.kinetic, out.kinetic_se = float(np.nanmean(kin)), _mcse(kin)
        if out.kinetic - 1.0 > KINETIC_TOL + Z * out.kinetic_se:
            out.reasons.append(f"kinetic temperature {out.kinetic:.2f} ± {out.kinetic_se:.2f} (≤ 1 in "
                               "equilibrium): the chains run hot")
    if stability is not None:
        st = np.asarray(stability, dtype=float)[ok]
        if np.isfinite(st).any():
            out.stability = float(np.nanmax(st))
            if out.stability >= 2.0:
                out.reasons.append(f"step × largest measured curvature h·ω = {out.stability:.2f} ≥ 2: "
                                   "BAOAB is unstable there")
    return out


def fidelity_of_run(posterior, sample_stats, names) -> Fidelity | None:
    """:func:`fidelity` of a run's kept draws: ``posterior`` {name: (chains, draws)} natural-unit draws (an
    xarray Dataset or a dict) and ``sample_stats`` with the records 'grad_<name>' (and, for SGHMC,
    'kinetic', 'stability'); None when the run does not record gradients (MH, SGLD)."""
    keys = [f"grad_{nm}" for nm in names]
    if any(k not in sample_stats for k in keys):
        return None
    phi = np.stack([np.log(np.asarray(posterior[nm], dtype=float)) for nm in names], axis=-1)
    grads = np.stack([np.asarray(sample_stats[k], dtype=float) for k in keys], axis=-1)
    kin = np.asarray(sample_stats["kinetic"]) if "kinetic" in sample_stats else None
    stab = np.asarray(sample_stats["stability"]) if "stability" in sample_stats else None
    return fidelity(phi, grads, names, kin, stab)


def fidelity_records(stats, names) -> list[str]:
    """The sample-stats records the fidelity checks read ('grad_<name>', 'kinetic', 'stability'), those of
    them that ``stats`` (a block's or a run's records, a mapping) holds."""
    return [k for k in [*(f"grad_{nm}" for nm in names), "kinetic", "stability"] if k in stats]
