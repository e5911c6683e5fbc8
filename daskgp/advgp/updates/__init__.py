"""ADVGP's server updates, one module each behind one protocol (:mod:`.base`): Adam with natural steps on
q(w) (:mod:`.adam`, the default) and the paper's ADADELTA with the proximal step (:mod:`.adadelta`). Adding
one: a module with its :class:`ADVGPUpdate` subclass and its settings, and one :func:`register` line below —
or, from another package, an entry point in the ``daskgp.advgp_updates`` group naming the subclass.
"""

from .adadelta import AdadeltaSettings, AdadeltaUpdate
from .adam import AdamSettings, AdamUpdate
from .base import (
    ADVGP_UPDATES,
    ENTRY_POINT_GROUP,
    ADVGPUpdate,
    get_update,
    register,
    unregister,
    update_names,
)

__all__ = ["ADVGPUpdate", "ADVGP_UPDATES", "ENTRY_POINT_GROUP", "register", "unregister", "get_update",
           "update_names", "AdamUpdate", "AdamSettings", "AdadeltaUpdate", "AdadeltaSettings"]

# the built-in updates, one line each (the first is the default and listed first)
register(AdamUpdate())
register(AdadeltaUpdate())
