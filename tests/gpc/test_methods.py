"""The classifier's updates are a registry (issue 57): an update defined and registered here — one class
and one register line — is fitted by the estimator, offered by ``daskgp gpc``, and refused by name when
unknown; no other file asks a method's name."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

import daskgp as dg
from daskgp.gpc.methods import SEP, get_method, method_names, register, unregister


class HalfSEP(SEP):
    """SEP with its global factor damped by half: a method of its own, registered from this file."""

    name = "halfsep"
    label = "SEP damped by half (a test's)"
    default_damping = 0.5


@pytest.fixture
def halfsep():
    method = register(HalfSEP())
    yield method
    unregister(method.name)


def test_a_registered_update_is_fitted_offered_and_its_name_checked(halfsep, client):
    """Fitted through the registry, the toy is SEP at δ = 0.5 to the last bit (its only difference); the
    CLI's --method offers it; an unknown name is scikit-learn's one-line parameter error naming the
    registered ones, the toy among them."""
    from daskgp.interface.cli import build_parser

    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[:200], y[:200]
    kw = dict(n_inducing=10, max_iter=25, chunk_rows=100, random_state=0)
    toy = dg.SparseGPClassifier(method="halfsep", **kw).fit(X, y, client=client)
    sep = dg.SparseGPClassifier(method="sep", damping=0.5, **kw).fit(X, y, client=client)
    assert toy.evidence_ == sep.evidence_
    np.testing.assert_array_equal(toy.predict_proba(X), sep.predict_proba(X))
    undamped = dg.SparseGPClassifier(method="sep", **kw).fit(X, y, client=client)
    assert undamped.evidence_ != toy.evidence_  # the damping is the toy's own, not SEP's default
    assert "halfsep" in method_names() and get_method("halfsep") is halfsep
    gpc = build_parser()._subparsers._group_actions[0].choices["gpc"]
    assert "halfsep" in gpc.format_help() and gpc.parse_args(["--method", "halfsep"]).method == "halfsep"
    with pytest.raises(ValueError, match=r"'method' parameter of SparseGPClassifier must be a str among \{.*"
                                         r"'halfsep'.*\}. Got 'nope'"):
        dg.SparseGPClassifier(method="nope", **kw).fit(X, y, client=client)


def test_a_registered_update_is_on_the_dashboards_menu_and_its_fit_job(halfsep, tmp_path):
    """The page's sparse-fit form offers every registered update for GPC (the toy included, SEP chosen as
    the command's default), ADVGP's server updates for ADVGP and no menu for SGPR; the job it starts passes
    the chosen one to ``daskgp gpc --method``; a method for a family without any, or an unknown one, is
    refused in one line before any job starts."""
    import panel as pn

    from daskgp.interface.fitjob import FitJobSettings
    from daskgp.interface.page import RunPage

    page = RunPage(pn, lambda: None, 2, 1.0, runs=(str(tmp_path),))
    assert not page.fit.method.visible  # SGPR first: one way to fit
    page.fit.family.value = "gpc"
    assert page.fit.method.visible and "halfsep" in page.fit.method.options
    assert page.fit.method.value == "sep" and page.fit.method.name == "Classifier update"
    page.fit.family.value = "advgp"
    assert page.fit.method.visible and page.fit.method.options[:2] == ["adam", "adadelta"]
    page.fit.family.value = "sgpr"
    assert not page.fit.method.visible
    job = FitJobSettings(family="gpc", dataset="breast_cancer", method="halfsep").validate()
    argv = job.argv("out.nc")
    assert argv[argv.index("--method") + 1] == "halfsep"
    assert "--method" not in FitJobSettings(family="gpc", dataset="breast_cancer").validate().argv("o.nc")
    with pytest.raises(ValueError, match="a sgpr fit takes no method \\(only advgp and gpc do\\)"):
        FitJobSettings(family="sgpr", method="sep").validate()
    with pytest.raises(ValueError, match="'nope' is not a registered classifier update"):
        FitJobSettings(family="gpc", dataset="breast_cancer", method="nope").validate()


def test_the_builtin_updates_declare_what_the_loop_used_to_ask_their_names():
    ep, sep, adf = (get_method(nm) for nm in ("ep", "sep", "adf"))
    assert (ep.keeps_sites, sep.keeps_sites, adf.keeps_sites) == (True, False, False)
    assert (ep.default_damping, sep.default_damping, adf.default_damping) == (0.5, 1.0, 0.5)
    assert (ep.learns_on_minibatches, sep.learns_on_minibatches, adf.learns_on_minibatches) == \
        (False, True, False)
    assert sep.damping(100, 1000) == 0.1 and sep.damping(None, 1000) == 1.0 and ep.damping(100, 1000) == 0.5
    assert ep.pass_damping(0.3) == 0.3 and sep.pass_damping(0.3) == adf.pass_damping(0.3) == 1.0
