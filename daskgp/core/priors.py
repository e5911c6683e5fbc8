"""Priors on positive hyperparameters, expressed on the log scale the samplers move in.

For θ = exp(φ) with θ ~ Gamma(shape a, rate b), the density of φ includes the Jacobian |dθ/dφ| = θ:
    log p(φ) = a·φ − b·exp(φ) − log Γ(a) + a·log b.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

__all__ = ["GammaPrior"]


@dataclass(frozen=True)
class GammaPrior:
    """Independent Gamma(shape, rate) priors on every natural-scale parameter (default: shape 2, rate 1,
    the paper's choice), evaluated on log-parameters φ (p,) with the Jacobian included."""

    shape: float | np.ndarray = 2.0
    rate: float | np.ndarray = 1.0

    def __post_init__(self):
        for name in ("shape", "rate"):
            v = np.asarray(getattr(self, name), dtype=float)
            if not np.all(np.isfinite(v)) or np.any(v <= 0):
                raise ValueError(f"Gamma prior {name} must be finite and > 0, got {v.tolist()}")

    def logpdf(self, phi) -> float:
        """log p(φ), summed over parameters."""
        phi = np.asarray(phi, dtype=float)
        a, b = np.broadcast_arrays(np.asarray(self.shape, float), np.asarray(self.rate, float), phi)[:2]
        return float(np.sum(a * phi - b * np.exp(phi) - gammaln(a) + a * np.log(b)))

    def grad(self, phi) -> np.ndarray:
        """(p,) ∂ log p(φ) / ∂φ = a − b·exp(φ)."""
        phi = np.asarray(phi, dtype=float)
        return self.shape - self.rate * np.exp(phi)

    def hessian_diag(self, phi) -> np.ndarray:
        """(p,) diagonal of the Hessian (the prior factorises): −b·exp(φ)."""
        return -self.rate * np.exp(np.asarray(phi, dtype=float)) * np.ones_like(np.asarray(phi, float))
