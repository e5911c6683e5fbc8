"""One registry for every family's methods (issue 57, item 2): name → method instance, per family.

Each family makes one :class:`Registry` (the samplers' ``'mcmc'``, the classifier's ``'gpc'``, …) with the
:class:`daskgp.inference.method.Method` subclass its methods must be and the entry-point group through which
a method in another package is found without an import (loaded on the first lookup of a name not yet known,
in any process: a worker process included). :func:`families` and :func:`registry` list and look up every
family's registry that has been imported, so a menu or a ``--help`` of all methods needs no family's name.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

from .method import Method

__all__ = ["Registry", "registry", "families"]

_FAMILIES: dict[str, Registry] = {}
_FAMILIES_LOCK = threading.Lock()


class Registry:
    """The methods of one family. ``base``: the class every method must be an instance of; ``group``: the
    entry-point group (None: none); ``what``: the family's word for a method, for messages ('sampler',
    'classifier update'); ``check``: more rules a method must keep (raises ValueError), run on register."""

    def __init__(self, family: str, base: type[Method], group: str | None, what: str,
                 check: Callable[[Method], None] | None = None):
        if not issubclass(base, Method):
            raise TypeError(f"a registry's base must subclass daskgp.inference.Method, got {base!r}")
        self.family, self.base, self.group, self.what, self._check = family, base, group, what, check
        self._methods: dict[str, Method] = {}
        self._lock = threading.RLock()
        self.entry_points_loaded = group is None
        with _FAMILIES_LOCK:
            if family in _FAMILIES:
                raise ValueError(f"a registry for the family {family!r} already exists")
            _FAMILIES[family] = self

    def register(self, method: Method, *, replace: bool = False) -> Method:
        """Make ``method`` (an instance of ``base``) available under its ``name``; a name already taken by
        another method raises ValueError unless ``replace``. Returns the method."""
        if not isinstance(method, self.base):
            raise TypeError(f"a {self.what} must be an instance of a {self.base.__module__}."
                            f"{self.base.__qualname__} subclass, got {type(method).__name__}")
        name = method.name
        if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
            raise ValueError(f"a {self.what}'s name must be a lower-case identifier, got {name!r}")
        if self._check is not None:
            self._check(method)
        with self._lock:
            if name in self._methods and not replace and self._methods[name] is not method:
                raise ValueError(f"a {self.what} named {name!r} is already registered "
                                 f"({self._methods[name]!r})")
            self._methods[name] = method
        return method

    def unregister(self, name: str) -> None:
        """Forget the method ``name`` (a no-op where there is none)."""
        with self._lock:
            self._methods.pop(name, None)

    def load_entry_points(self) -> None:
        """Register the methods the installed packages declare in ``group`` (once per process). A broken
        one is one RuntimeWarning naming it: it must not take the built-in methods down with it."""
        with self._lock:
            if self.entry_points_loaded:
                return
            self.entry_points_loaded = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.group):
            if ep.name in self._methods:
                continue
            try:
                cls = ep.load()
                method = cls() if isinstance(cls, type) else cls
                if getattr(method, "name", None) != ep.name:
                    raise ValueError(f"it names a {self.what} called {getattr(method, 'name', None)!r}")
                self.register(method)
            except Exception as e:  # noqa: BLE001 — any failure of foreign code: one warning naming it
                warnings.warn(f"daskgp: the {self.what} entry point {ep.name!r} ({ep.value}) was not "
                              f"registered: {type(e).__name__}: {e}", RuntimeWarning, stacklevel=3)

    def find(self, name) -> Method | None:
        """The method registered as ``name`` (entry points included), or None."""
        if not isinstance(name, str):
            return None
        if name not in self._methods:
            self.load_entry_points()
        with self._lock:
            return self._methods.get(name)

    def get(self, name) -> Method:
        """The method registered as ``name``; ValueError listing the registered ones otherwise."""
        method = self.find(name)
        if method is None:
            raise ValueError(f"method must be one of {self.names()}, got {name!r}")
        return method

    def names(self) -> tuple[str, ...]:
        """The registered methods' names, in registration order (the built-ins first)."""
        self.load_entry_points()
        with self._lock:
            return tuple(self._methods)

    def methods(self) -> tuple[Method, ...]:
        self.load_entry_points()
        with self._lock:
            return tuple(self._methods.values())

    def __repr__(self) -> str:
        return f"<Registry {self.family!r}: {', '.join(self._methods)}>"


def registry(family: str) -> Registry:
    """The registry of ``family`` (its package imported); ValueError naming the known families."""
    with _FAMILIES_LOCK:
        reg = _FAMILIES.get(family)
    if reg is None:
        raise ValueError(f"no method registry for {family!r}; the families: {families()}")
    return reg


def families() -> tuple[str, ...]:
    """The families whose registries exist in this process, in the order they were made."""
    with _FAMILIES_LOCK:
        return tuple(_FAMILIES)
