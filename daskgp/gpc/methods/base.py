"""The protocol of a classifier update (Hernández-Lobato et al. 2015, section 2): what the training loop
(:func:`daskgp.gpc.fit.run_ep`), the estimator (:class:`daskgp.gpc.classifier.SparseGPClassifier`) and the
command line need of EP, SEP, ADF — or a method registered beside them — so that none of them asks a
method's name.

A method turns one map over the row chunks into the next q. Every chunk computes new sites from a cavity
source (:meth:`GPCMethod.source`) and returns their k-space sum (:class:`daskgp.gpc.ep.ChunkResult`); the
method says how the centre folds that sum into its factor (:meth:`GPCMethod.factor_after`), what the
evidence approximation is (:meth:`GPCMethod.evidence`), and whether it keeps a site per point on the workers
(``keeps_sites``: EP) or one tied factor (SEP, ADF).
"""

from __future__ import annotations

from typing import ClassVar

from ...inference.method import Method
from ...inference.registry import Registry

__all__ = ["GPCMethod", "register", "unregister", "get_method", "method_names", "GPC_METHODS",
           "ENTRY_POINT_GROUP"]


class GPCMethod(Method):
    """A classifier update: the 'gpc' family's :class:`daskgp.inference.Method`. Class attributes: ``name``
    (``SparseGPClassifier(method=…)``, ``daskgp gpc --method``), ``label`` (one line for ``--help``),
    ``default_damping`` (δ of a batch fit when the estimator leaves ``damping`` unset), ``site_passes``
    (site-only passes before each gradient pass when learning), ``keeps_sites`` (a site per point, kept
    beside its chunk on the workers, checkpointed, and restarted at zero for a chunk placed again after a
    lost worker), ``learns_on_minibatches`` (False: the estimator refuses to learn hyperparameters on
    minibatches, and says why: ``minibatch_refusal``), ``decays_on_minibatches`` (δ and Adam's step decay
    as 1/√(1 + t/E) on minibatches: :func:`daskgp.gpc.fit.minibatch_decay`), ``passes_to_fixed_point``
    (a batch fit that learns repeats the site-only passes until the factor stops moving:
    :data:`daskgp.gpc.fit.SITE_TOL`) and ``degenerate_hint`` (appended to the message of a fit that became
    numerically degenerate)."""

    family: ClassVar[str] = "gpc"
    default_damping: ClassVar[float] = 1.0
    site_passes: ClassVar[int] = 1
    keeps_sites: ClassVar[bool] = False
    learns_on_minibatches: ClassVar[bool] = True
    minibatch_refusal: ClassVar[str] = ""
    decays_on_minibatches: ClassVar[bool] = False
    passes_to_fixed_point: ClassVar[bool] = True
    degenerate_hint: ClassVar[str] = ""

    def damping(self, batch_size: int | None, n: int) -> float:
        """δ for a fit on minibatches of ``batch_size`` of ``n`` rows (None: batch) when the estimator
        leaves it unset."""
        return self.default_damping

    def auto_batch(self, n: int) -> int | None:
        """Rows per iteration that ``batch_size='auto'`` chooses for ``n`` training rows: None, every row
        (the batch fit; a method that cannot learn on minibatches always gets it)."""
        return None

    def source(self, q, n: int):
        """The distribution the chunks' cavities are taken from, given q (a
        :class:`daskgp.gpc.ep.Posterior`) and n rows: q itself (EP's sites divide their own site out of it;
        ADF's are made from q)."""
        return q

    def pass_damping(self, damping: float) -> float:
        """The damping the chunks apply to their own sites (EP's); a tied factor is damped at the centre."""
        return 1.0

    def factor_after(self, factor, result, damping: float, scale: float, minibatch: bool):
        """The factor after a pass whose summed ``result`` covers 1/``scale`` of the rows (a
        :class:`daskgp.gpc.ep.ChunkResult`): a tied factor moves (1 − δ) of the old plus δ times the new
        sites' sum (a minibatch's scaled by n/|B|, an unbiased estimate of the full sum)."""
        return factor.scaled(1 - damping) + result.factor.scaled(damping * scale)

    def evidence(self, q, source, total, n: int) -> float:
        """The evidence approximation (nats) from the chunks' summed terms ``total``: log Z(q) + Σ log Z_i."""
        return q.log_norm() + total.log_z


ENTRY_POINT_GROUP = "daskgp.gpc_methods"
# the family's registry in the one registry of every family's methods (daskgp.inference.registry)
GPC_METHODS = Registry("gpc", GPCMethod, ENTRY_POINT_GROUP, "classifier update")


def register(method: GPCMethod, *, replace: bool = False) -> GPCMethod:
    """Make ``method`` available under its ``name`` to the estimator, the training loop and ``daskgp gpc``
    (or declare it as an entry point in the ``daskgp.gpc_methods`` group); a name already taken raises
    ValueError unless ``replace``."""
    return GPC_METHODS.register(method, replace=replace)


def unregister(name: str) -> None:
    """Forget the method ``name`` (a no-op where there is none)."""
    GPC_METHODS.unregister(name)


def get_method(name: str) -> GPCMethod:
    """The registered method ``name``; ValueError naming the registered ones otherwise."""
    return GPC_METHODS.get(name)


def method_names() -> tuple[str, ...]:
    """The registered methods' names, in registration order."""
    return GPC_METHODS.names()
