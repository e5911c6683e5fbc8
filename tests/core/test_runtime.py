"""The one runtime object every estimator's fit takes (issue 57, item 4): its own checks, and how a fit's
keywords and a runtime combine — either, never both; a field the family's fit has no use for refused."""

import pytest

from daskgp import FitRuntime
from daskgp.core.runtime import fit_runtime


def test_a_fit_gets_its_keywords_or_its_runtime():
    def cb(event):
        return None

    rt = fit_runtime(None, "Est", client="tcp://h:8786", callback=cb, checkpoint="ck", resume=True,
                     keep_checkpoint=False)
    assert rt == FitRuntime(client="tcp://h:8786", callback=cb, checkpoint="ck", resume=True)
    given = FitRuntime(client="tcp://h:8786", checkpoint="ck")
    assert fit_runtime(given, "Est", client=None, callback=None, checkpoint=None, resume=False) is given


@pytest.mark.parametrize("runtime, keywords, match", [
    (FitRuntime(client="c"), {"client": "d"}, r"Est\.fit: give client in the runtime or as keywords"),
    (FitRuntime(), {"client": None, "resume": False, "checkpoint": "ck"}, "give checkpoint in the runtime"),
    (FitRuntime(time_budget=3.0), {"client": None}, r"Est\.fit takes no time_budget \(its runtime: client\)"),
    (FitRuntime(checkpoint="ck", keep_checkpoint=True), {"client": None},
     "takes no checkpoint, keep_checkpoint"),
])
def test_a_runtime_with_keywords_or_fields_the_fit_does_not_take_is_refused(runtime, keywords, match):
    with pytest.raises(ValueError, match=match):
        fit_runtime(runtime, "Est", **keywords)


@pytest.mark.parametrize("kw, error, match", [
    ({"resume": True}, ValueError, "resume=True needs the checkpoint"),
    ({"resume": 1, "checkpoint": "ck"}, TypeError, "True or False"),
    ({"callback": 3}, TypeError, "callback must be callable"),
    ({"time_budget": 0}, ValueError, "positive number of seconds"),
    ({"time_budget": True}, ValueError, "positive number of seconds"),
])
def test_a_runtime_checks_its_fields(kw, error, match):
    with pytest.raises(error, match=match):
        FitRuntime(**kw)
    with pytest.raises(TypeError, match="runtime must be a daskgp.FitRuntime"):
        fit_runtime({"client": None}, "Est", client=None)
