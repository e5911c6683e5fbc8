"""The classifier's updates, one module each behind one protocol (:mod:`.base`): EP (:mod:`.ep`), SEP
(:mod:`.sep`, the default) and ADF (:mod:`.adf`) of Hernández-Lobato et al. (2015). Adding one: a module
with its :class:`GPCMethod` subclass and one :func:`register` line below, or, from another package, an
entry point in the ``daskgp.gpc_methods`` group naming the subclass (the family's registry is
:data:`GPC_METHODS`, one of :func:`daskgp.inference.registry`'s).
"""

from .adf import ADF
from .base import ENTRY_POINT_GROUP, GPC_METHODS, GPCMethod, get_method, method_names, register, unregister
from .ep import EP
from .sep import AUTO_BATCH_ROWS, SEP, SEP_MEMORY_ROWS, minibatch_damping, sep_cavity

__all__ = ["GPCMethod", "GPC_METHODS", "ENTRY_POINT_GROUP", "register", "unregister", "get_method",
           "method_names", "EP", "SEP", "ADF", "SEP_MEMORY_ROWS", "AUTO_BATCH_ROWS", "minibatch_damping",
           "sep_cavity"]

# the built-in methods, one line each (the order of menus and --help)
register(EP())
register(SEP())
register(ADF())
