"""The classifier's updates, one module each behind one protocol (:mod:`.base`): EP (:mod:`.ep`), SEP
(:mod:`.sep`, the default) and ADF (:mod:`.adf`) of Hernández-Lobato et al. (2015). Adding one: a module
with its :class:`GPCMethod` subclass and one :func:`register` line below.
"""

from .adf import ADF
from .base import GPCMethod, get_method, method_names, register, unregister
from .ep import EP
from .sep import SEP, SEP_MEMORY_ROWS, minibatch_damping, sep_cavity

__all__ = ["GPCMethod", "register", "unregister", "get_method", "method_names", "EP", "SEP", "ADF",
           "SEP_MEMORY_ROWS", "minibatch_damping", "sep_cavity"]

# the built-in methods, one line each (the order of menus and --help)
register(EP())
register(SEP())
register(ADF())
