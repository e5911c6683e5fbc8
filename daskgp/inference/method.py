"""What every family's method has in common (issue 57, item 2): a name (what an estimator's ``method=``, a
command's ``--method`` and the dashboard's menu take), one line for people, and its own settings — a frozen
dataclass whose fields are declared with :func:`daskgp.inference.settings.setting` (default, help, bounds),
from which the command line's flags, the dashboard's inputs and the checked plain data a run stores are
generated. Each family's protocol (:class:`daskgp.mcmc.samplers.Sampler`,
:class:`daskgp.gpc.methods.GPCMethod`, …) subclasses :class:`Method` with what its driver asks of a method.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["Method"]


class Method:
    """A registered method. Class attributes: ``family`` (the registry it belongs to: 'mcmc', 'gpc', …),
    ``name`` (a lower-case identifier), ``label`` (one line for ``--help`` and menus), ``settings`` (the
    frozen dataclass of its own tunables, or None)."""

    family: ClassVar[str] = ""
    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    settings: ClassVar[type | None] = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
