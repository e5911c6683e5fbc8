"""Likelihood objects (issue 57, item 1): :class:`Gaussian` — y = f + ε, ε ~ N(0, σ²_n), the regression
families' (SGPR, ADVGP, the exact GP, the GPLVM) — and the probit of GP classification (Rasmussen &
Williams 2006, section 3.6; Hernández-Lobato et al. 2015/2016 for the FITC-probit model of :mod:`daskgp.gpc`).

    p(y | f) = Φ(y f / √v),   y ∈ {−1, +1},

with v ≥ 1: a standard normal label noise ε (y = sign(f + ε), v = 1) plus, under FITC, the conditional
variance d_i of f_i given the inducing values (v = 1 + d_i). Expectation propagation needs the tilted
distribution Φ(y h / √v) N(h | μ, σ²): its normaliser Z = Φ(z), z = y μ / √(v + σ²), and its mean and variance
(R&W eq. 3.58):

    E[h] = μ + y σ² ρ / √(v + σ²),   Var[h] = σ² − σ⁴ ρ (z + ρ) / (v + σ²),   ρ = N(z) / Φ(z).

Everything is elementwise over arrays of points; log Φ and ρ are computed through ``scipy.special.log_ndtr``,
so a point far on the wrong side (z ≪ 0) gives finite moments instead of 0/0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr

__all__ = ["Gaussian", "Probit", "Tilted"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


@dataclass(frozen=True)
class Gaussian:
    """p(y | f) = N(y | f, σ²_n): ``noise_variance`` σ²_n > 0, in y units squared (what a fitted regressor's
    ``likelihood_`` holds, in its data's units)."""

    noise_variance: float

    def __post_init__(self):
        v = float(self.noise_variance)
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"noise_variance must be finite and > 0, got {self.noise_variance!r}")
        object.__setattr__(self, "noise_variance", v)

    def predict(self, mean, var):
        """(mean, variance) of y from those of f (arrays, y units): the noise variance added."""
        return mean, var + self.noise_variance

    def log_predictive_density(self, y, mean, var) -> np.ndarray:
        """log ∫ N(y | f, σ²_n) N(f | mean, var) df per point (nats)."""
        total = var + self.noise_variance
        return -0.5 * np.log(2 * np.pi * total) - 0.5 * (y - mean) ** 2 / total

    def variational_expectation(self, y, mean, var) -> np.ndarray:
        """E_{N(f | mean, var)} log N(y | f, σ²_n) per point (nats): the data term of a variational bound."""
        s2 = self.noise_variance
        return -0.5 * np.log(2 * np.pi * s2) - 0.5 * ((y - mean) ** 2 + var) / s2


@dataclass
class Tilted:
    """The tilted distribution's summaries per point: log Z, mean, variance, z, ρ = N(z)/Φ(z) and
    s = √(v + σ²)."""

    log_z: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    z: np.ndarray
    ratio: np.ndarray
    scale: np.ndarray


class Probit:
    """The probit likelihood Φ(y f / √v) for labels y ∈ {−1, +1}."""

    @staticmethod
    def check_labels(y) -> np.ndarray:
        """y as float ±1, or a ValueError naming what is wrong."""
        y = np.asarray(y, dtype=float)
        if not np.all((y == 1.0) | (y == -1.0)):
            raise ValueError("probit labels must be -1 or +1")
        return y

    @staticmethod
    def log_ratio(z) -> tuple[np.ndarray, np.ndarray]:
        """(log Φ(z), ρ = N(z)/Φ(z)), stable for z ≪ 0 (where ρ ≈ −z)."""
        log_phi = log_ndtr(z)
        return log_phi, np.exp(-0.5 * z * z - _LOG_SQRT_2PI - log_phi)

    @classmethod
    def tilted(cls, y, mu, var, v=1.0) -> Tilted:
        """Moments of Φ(y h / √v) N(h | μ, σ²) per point: y, μ, σ² (> 0), v (≥ 1) broadcast together."""
        s = np.sqrt(v + var)
        z = y * mu / s
        log_z, rho = cls.log_ratio(z)
        mean = mu + y * var * rho / s
        # σ̂² = σ² (1 − σ² ρ (z + ρ) / s²); ρ(z + ρ) ∈ (0, 1) for the probit, so σ̂² ∈ (0, σ²)
        new_var = var - var * var * rho * (z + rho) / (s * s)
        return Tilted(log_z, mean, np.maximum(new_var, 1e-300), z, rho, s)

    @classmethod
    def predict_proba(cls, mu, var, v=1.0) -> np.ndarray:
        """p(y = +1) = ∫ Φ(f / √v) N(f | μ, σ²) df = Φ(μ / √(v + σ²))."""
        return np.exp(log_ndtr(mu / np.sqrt(v + var)))
