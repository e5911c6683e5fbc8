"""Expectation propagation (Hernández-Lobato et al. 2015, section 2, the parallel EP of its algorithm box):
a site t̃_i per point, kept beside its chunk on the workers; every pass re-sums the (damped) sites into q.
"""

from __future__ import annotations

from .base import GPCMethod

__all__ = ["EP"]


class EP(GPCMethod):
    name = "ep"
    label = "EP: a site per point (memory O(n) on the workers)"
    # parallel updates of every site oscillate when the sites are strong: damped by half; EP re-sums them at
    # the current hyperparameters, so damping costs it nothing in tracking
    default_damping = 0.5
    keeps_sites = True
    learns_on_minibatches = False
    # most of its sites would have been made at older hyperparameters, so its evidence gradient is biased:
    # it drifted to p = 0.5 on 246,468 flights rows within 300 s (test NLL 0.693)
    minibatch_refusal = "the evidence gradient drifts: most sites were made at older hyperparameters"

    def pass_damping(self, damping: float) -> float:
        return damping

    def factor_after(self, factor, result, damping: float, scale: float, minibatch: bool):
        """The re-summed sites, or with a minibatch the old factor plus its sites' change."""
        return factor + result.sites_delta if minibatch else result.factor
