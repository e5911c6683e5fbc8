"""One registry for every family's methods (issue 57, item 2): the rules a registry keeps (names, types, its
family's own checks, entry points of other packages, a broken one warned about), and the two families built
on it — the samplers and the classifier updates — listed together without naming either."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import ClassVar

import pytest

from daskgp.inference import Method, Registry, checked_settings, families, registry, setting


class ToyMethod(Method):
    family: ClassVar[str] = "toy"
    name: ClassVar[str] = "toy"
    label: ClassVar[str] = "a toy method"


@pytest.fixture
def toys():
    module = importlib.import_module("daskgp.inference.registry")

    reg = Registry("toys_under_test", ToyMethod, "daskgp.tests_toy", "toy method")
    yield reg
    module._FAMILIES.pop("toys_under_test", None)


def test_a_registry_keeps_its_methods_in_order_and_refuses_what_breaks_its_rules(toys):
    first = toys.register(ToyMethod())
    second = toys.register(type("Second", (ToyMethod,), {"name": "second"})())
    assert toys.names() == ("toy", "second") and toys.get("second") is second and toys.find("nope") is None
    assert toys.register(first) is first  # the same method again is no change
    with pytest.raises(ValueError, match="a toy method named 'toy' is already registered"):
        toys.register(ToyMethod())
    toys.register(ToyMethod(), replace=True)
    with pytest.raises(TypeError, match=r"instance of a .*ToyMethod subclass, got object"):
        toys.register(object())
    with pytest.raises(ValueError, match="lower-case identifier, got 'Bad name'"):
        toys.register(type("Bad", (ToyMethod,), {"name": "Bad name"})())
    with pytest.raises(ValueError, match=r"method must be one of \('toy', 'second'\), got 'third'"):
        toys.get("third")
    toys.unregister("second")
    toys.unregister("never")  # a no-op
    assert toys.names() == ("toy",)


def test_a_familys_own_rule_runs_on_register():
    module = importlib.import_module("daskgp.inference.registry")

    def needs_label(m):
        if not m.label:
            raise ValueError(f"{m.name} has no label")

    reg = Registry("labelled_under_test", ToyMethod, None, "toy method", check=needs_label)
    try:
        with pytest.raises(ValueError, match="nolabel has no label"):
            reg.register(type("NoLabel", (ToyMethod,), {"name": "nolabel", "label": ""})())
        assert reg.names() == ()
        with pytest.raises(ValueError, match="'labelled_under_test' already exists"):
            Registry("labelled_under_test", ToyMethod, None, "toy method")
        with pytest.raises(TypeError, match="subclass daskgp.inference.Method"):
            Registry("not_methods_under_test", object, None, "thing")
    finally:
        module._FAMILIES.pop("labelled_under_test", None)


def test_entry_points_are_found_on_first_lookup_and_a_broken_one_is_one_warning(toys, monkeypatch):
    good = importlib.metadata.EntryPoint("other", f"{__name__}:OtherToy", toys.group)
    bad = importlib.metadata.EntryPoint("broken", "no_such_module_anywhere:T", toys.group)
    liar = importlib.metadata.EntryPoint("liar", f"{__name__}:OtherToy", toys.group)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [good, bad, liar] if group == toys.group else [])
    toys.register(ToyMethod())
    with pytest.warns(RuntimeWarning) as caught:
        assert isinstance(toys.get("other"), OtherToy)
    messages = [str(w.message) for w in caught]
    assert any("'broken'" in m and "ModuleNotFoundError" in m for m in messages)
    assert any("'liar'" in m and "names a toy method called 'other'" in m for m in messages)
    assert toys.names() == ("toy", "other")  # loaded once: no second round of warnings


class OtherToy(ToyMethod):
    name: ClassVar[str] = "other"


def test_every_familys_registry_is_listed_without_naming_it():
    import daskgp.gpc.methods  # noqa: F401 — each family's package makes its registry
    import daskgp.mcmc.samplers  # noqa: F401

    assert {"mcmc", "gpc"} <= set(families())
    assert registry("mcmc").names()[:4] == ("sghmc", "sgld", "mh", "hmc")
    assert registry("gpc").names()[:3] == ("ep", "sep", "adf")
    for family in ("mcmc", "gpc"):
        for m in registry(family).methods():
            assert isinstance(m, Method) and m.family == family and m.label
    with pytest.raises(ValueError, match="no method registry for 'nope'; the families: "):
        registry("nope")


def test_a_classifier_update_of_another_package_is_found_by_its_entry_point(monkeypatch):
    """What samplers had (an entry point in 'daskgp.samplers'), the classifier's updates now have too."""
    from daskgp.gpc.methods import GPC_METHODS, get_method, method_names

    ep = importlib.metadata.EntryPoint("halfsep", f"{__name__}:HalfSEP", GPC_METHODS.group)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == GPC_METHODS.group else [])
    monkeypatch.setattr(GPC_METHODS, "entry_points_loaded", False)
    try:
        assert get_method("halfsep").default_damping == 0.5
        assert "halfsep" in method_names()
    finally:
        GPC_METHODS.unregister("halfsep")


def _half_sep():
    from daskgp.gpc.methods import SEP

    class HalfSEP(SEP):
        name = "halfsep"
        label = "SEP damped by half"
        default_damping = 0.5

    return HalfSEP


def __getattr__(name):  # the entry point's target, built on first use (the GPC package imports lazily)
    if name == "HalfSEP":
        return _half_sep()
    raise AttributeError(name)


@dataclass(frozen=True)
class ToySettings:
    jump: float = setting(1.0, "how far", low=0.0)
    steps: int = setting(3, "how many", low=0, low_open=False)


def test_settings_are_checked_against_their_declarations():
    s = checked_settings(ToySettings, {"jump": 2}, "toy")
    assert s == ToySettings(2.0, 3) and isinstance(s.jump, float)
    with pytest.raises(ValueError, match=r"toy setting jump must be in \(0, inf\), got 0"):
        checked_settings(ToySettings, {"jump": 0}, "toy")
    with pytest.raises(ValueError, match="toy setting steps must be an integer"):
        checked_settings(ToySettings, {"steps": 1.5}, "toy")
    with pytest.raises(ValueError, match="toy has no setting 'jmp' \\(did you mean 'jump'\\?\\)"):
        checked_settings(ToySettings, {"jmp": 1}, "toy")
    with pytest.raises(ValueError, match="toy has no settings of its own"):
        checked_settings(None, {"jump": 1}, "toy")
