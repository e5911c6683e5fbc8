"""The one progress event (issue 57, item 4): a callback of one argument gets a FitEvent; daskgp 0.4's
two-argument callbacks still get their pair, with a FutureWarning; a callback that cannot be inspected (a
builtin) is taken as a one-argument callback."""

from __future__ import annotations

import functools

import pytest

from daskgp.core.events import FitEvent, event_callback

EVENT = FitEvent("advgp", 3, 1.5, "-ELBO", 0.2, total=10, values={"staleness": 1}, record="rec",
                 model="params")


def legacy(e):
    return e.record, e.model


def test_a_one_argument_callback_gets_the_event_unchanged():
    seen = []
    cb = event_callback(seen.append, legacy, "ADVGPRegressor")
    cb(EVENT)
    assert seen == [EVENT]
    assert event_callback(None, legacy, "X") is None


def test_optional_arguments_do_not_count():
    seen = []

    def cb(event, sink=seen, scale=2):
        sink.append(event.step * scale)

    event_callback(cb, legacy, "X")(EVENT)
    assert seen == [6]


@pytest.mark.parametrize("make", [
    lambda seen: (lambda rec, params: seen.append((rec, params))),
    lambda seen: functools.partial(lambda tag, rec, params: seen.append((rec, params)), "tag"),
], ids=["lambda", "partial"])
def test_a_two_argument_callback_is_called_the_04_way_with_a_warning(make):
    seen = []
    with pytest.warns(FutureWarning, match="ADVGPRegressor.fit: a callback of two arguments is daskgp 0.4's"):
        cb = event_callback(make(seen), legacy, "ADVGPRegressor")
    cb(EVENT)
    assert seen == [("rec", "params")]


def test_the_event_is_immutable():
    with pytest.raises(AttributeError):
        EVENT.step = 4
