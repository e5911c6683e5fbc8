"""Stochastic expectation propagation (Hernández-Lobato et al. 2015, section 2; Li, Hernández-Lobato &
Turner 2015): one global factor t̃_g tied over the n points, the cavity q\\1 = q / t̃_g^{1/n}; on minibatches
the paper's stochastic update, with the factor's memory capped at :data:`SEP_MEMORY_ROWS` rows.
"""

from __future__ import annotations

from ..ep import Posterior
from .base import GPCMethod

__all__ = ["SEP", "SEP_MEMORY_ROWS", "AUTO_BATCH_ROWS", "minibatch_damping", "sep_cavity"]

# SEP on minibatches: the paper's step |B|/n gives the global factor a memory of a whole epoch, n/|B|
# minibatches, while Adam moves the hyperparameters at every one, so most of the factor was made at older
# hyperparameters and the evidence gradient drifts as EP's stale sites do (flights, arrival delay > 15 min,
# 246,468 rows, |B| = 2,000, δ = 0.008: test NLL 0.49 at 10 s, 0.52 at 120 s). A step of |B|/R, a memory of
# R rows, keeps it current (δ = 0.1 held 0.455–0.47 over 120 s) but, constant, its noise made the fit spike
# later (0.47 → 0.82 at 210 s). Letting δ alone decay as (1 + t)^-κ drifted again once δ fell below about
# 0.05 (κ = 0.5: 0.47 → 0.55; κ = 0.7: → 0.60): the factor lagged Adam's constant steps. So both decay
# together (:func:`daskgp.gpc.fit.minibatch_decay`): δ_t and Adam's step are divided by √(1 + t/E), E = n/|B|
# minibatches (one epoch), which keeps the factor's lag behind the hyperparameters, ∝ step/δ, constant while
# the noise of both shrinks (Robbins–Monro). Measured on the same rows: 0.468 / 0.459 / 0.454 / 0.451 at
# 20 / 60 / 120 / 220 s, no spike. Averaging the iterates was worse (0.50: an average of factors made at
# different Z is not the factor of the averaged Z).
SEP_MEMORY_ROWS = 20_000

# batch_size='auto' (issue 58, item 5): every row while the factor's memory covers the data (n ≤
# SEP_MEMORY_ROWS: the batch fit, whose evidence is exact, so its collapse rule applies, and whose pass over
# 20,000 rows at m = 100 takes well under a second); beyond, minibatches of AUTO_BATCH_ROWS. A batch fit
# does not scale: each iteration is two passes over every row, and on many rows its steps, made from the
# whole data's gradient at Adam's constant rate, overshoot (flights, arrival delay > 15 min, 246,468 rows,
# m = 100: the evidence collapsed and recovered repeatedly over 300 s, the test NLL up to 7.7 mid-fit, the
# best iterate 0.467), where 2,000-row minibatches with the decaying steps held 0.46-0.47 from the first
# minute (benchmarks/results/ngd_peers.json, 3 seeds).
AUTO_BATCH_ROWS = 2_000


def minibatch_damping(batch_size: int, n: int) -> float:
    """SEP's first step of the global factor on minibatches of ``batch_size`` of ``n`` rows: |B| / min(n, R),
    the factor's memory R = :data:`SEP_MEMORY_ROWS` rows (the paper's |B|/n when n ≤ R), at most 1; later
    steps decay by :func:`daskgp.gpc.fit.minibatch_decay`."""
    return min(1.0, batch_size / min(n, SEP_MEMORY_ROWS))


def sep_cavity(global_factor, n: int):
    """SEP's cavity factor q\\1 = q / t̃_g^{1/n}: (1 − 1/n)(T_g, c_g)."""
    return global_factor.scaled(1.0 - 1.0 / n)


class SEP(GPCMethod):
    name = "sep"
    label = "SEP: one global factor tied over the points (memory O(m²)); minibatches"
    # its factor is a sum made at earlier hyperparameters: damped, it lags behind Adam's steps and its
    # gradient drifts (2,000 hourly weather rows, rain / none, m = 100: at δ = 0.5 the evidence fell from
    # −187 nats at iteration 50 to −207 at 250 and the test NLL rose 0.084 → 0.089; undamped it climbed to
    # −177). Undamped with one site pass per step it climbs smoothly (2,000 house_8L rows, price in the top
    # quarter: −598 nats at iteration 25, −545 at 250, above EP's −560)
    default_damping = 1.0
    decays_on_minibatches = True

    def auto_batch(self, n: int) -> int | None:
        return None if n <= SEP_MEMORY_ROWS else AUTO_BATCH_ROWS

    def damping(self, batch_size: int | None, n: int) -> float:
        if batch_size is not None and batch_size < n:
            return minibatch_damping(batch_size, n)
        return self.default_damping

    def source(self, q, n: int):
        return Posterior(q.params, sep_cavity(q.factor, n))

    def evidence(self, q, source, total, n: int) -> float:
        """log Z(T_g) + Σ log Z_i − n (log Z(T_g) − log Z((1 − 1/n)T_g))."""
        return q.log_norm() + total.log_z - n * (q.log_norm() - source.log_norm())
