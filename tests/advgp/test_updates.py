"""ADVGP's server updates as registered methods (issue 57, item 2): Adam with natural steps on q(w) and the
paper's ADADELTA with the proximal step, each one module with its own settings; the server asks the update,
never its name, and moves θ bit for bit as 0.4's branches did; a toy update registered from this module is
offered by ``daskgp advgp --help``, fitted by the estimator with its own setting, and its setting's flag is
refused for another update."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from daskgp.advgp.estimator import ADVGPRegressor
from daskgp.advgp.model import ADVGPParams, appended_statistics, natural_step, partition_objective, prox_h
from daskgp.advgp.server import ParameterServer
from daskgp.advgp.updates import (
    ADVGP_UPDATES,
    AdamUpdate,
    get_update,
    register,
    unregister,
    update_names,
)
from daskgp.core.optim import Adadelta, Adam
from daskgp.inducing.placement import kmeans_inducing
from daskgp.inference import Method, registry
from daskgp.inference.settings import setting


class _NoChunks:
    futures = [None] * 4  # the server's bookkeeping needs the partition count only
    n = 400


@pytest.fixture
def problem(concrete):
    X, y = concrete.X_std[:400], concrete.y_std[:400]
    p = ADVGPParams(kmeans_inducing(X, 12, 0), 1.0, np.full(8, 2.0), 0.5, np.zeros(12), np.eye(12))
    return X, y, p


def test_the_built_in_updates_are_the_advgp_familys_registry():
    assert update_names()[:2] == ("adam", "adadelta")
    assert registry("advgp") is ADVGP_UPDATES
    for name in ("adam", "adadelta"):
        u = get_update(name)
        assert isinstance(u, Method) and u.family == "advgp" and u.label and u.settings is not None
    assert get_update("adam").natural_tasks and get_update("adam").halves_on_plateau
    assert not get_update("adadelta").natural_tasks and not get_update("adadelta").halves_on_plateau
    with pytest.raises(ValueError, match=r"method must be one of \('adam', 'adadelta'"):
        get_update("sgd")


def _adam_04(theta, p, ada, grad, shrink, q_step=0.5, step_scale=1.0):
    """0.4's ``ParameterServer._apply`` for optimizer='adam', verbatim in its algebra."""
    o, k = p.n_kernel, p.k
    C, D = appended_statistics(grad, p)
    theta = theta.copy()
    mu, U = natural_step(p.with_vector(theta), C, D, q_step * step_scale * shrink)
    theta[o:o + k], theta[o + k:] = mu, U[np.triu_indices(k)]
    theta[:o] -= ada.step(grad[:o]) * shrink
    return theta


def _adadelta_04(theta, p, ada, grad):
    o, k = p.n_kernel, p.k
    delta, rate = ada.step(grad)
    theta = theta + delta
    stepped = p.with_vector(theta)
    iu = np.triu_indices(k)
    rate_U = np.ones((k, k))
    rate_U[iu] = rate[o + k:]
    mu, U = prox_h(stepped.mu, stepped.U, (rate[o:o + k], rate_U))
    theta[o:o + k], theta[o + k:] = mu, U[iu]
    return theta


def test_the_server_moves_theta_bit_for_bit_as_0_4_did(problem):
    X, y, p = problem
    for name in ("adam", "adadelta"):
        server = ParameterServer(_NoChunks(), p, optimizer=name, learning_rate=0.03, inducing_rate=0.01,
                                 q_step=0.4, eps=1e-5)
        theta = p.to_vector()
        if name == "adam":
            lr = np.full(p.n_kernel, 0.03)
            lr[:p.Z.size] = 0.01
            ada = Adam(p.n_kernel, lr)
        else:
            ada = Adadelta(theta.size, 0.95, 1e-5)
        for t, delay in enumerate((0.0, 2.0, 0.5)):
            cur = p.with_vector(server.theta)
            grad = partition_objective(X[100 * t:100 * t + 100], y[100 * t:100 * t + 100], cur,
                                       natural=name == "adam")[1]
            server._apply(grad, delay)
            theta = (_adam_04(theta, p, ada, grad, 1 / (1 + delay), q_step=0.4) if name == "adam"
                     else _adadelta_04(theta, p, ada, grad))
            assert np.array_equal(server.theta, theta), (name, t)
        assert server.version == 3


def test_an_update_checks_its_own_settings_and_keeps_0_4s_keywords(problem):
    _, _, p = problem
    s = ParameterServer(_NoChunks(), p, optimizer="adam", learning_rate=0.05, eps=0.1).settings
    assert (s.learning_rate, s.inducing_rate, s.q_step) == (0.05, 0.02, 0.5)  # eps is not Adam's: inert
    s = ParameterServer(_NoChunks(), p, optimizer="adam", learning_rate=0.05,
                        options={"learning_rate": 0.07}).settings
    assert s.learning_rate == 0.07  # options win over the 0.4 keywords
    with pytest.raises(ValueError, match=r"the 'adam' update setting q_step must be in \(0, 1\]"):
        ParameterServer(_NoChunks(), p, optimizer="adam", options={"q_step": 2.0})
    with pytest.raises(ValueError, match="has no setting 'rh' \\(did you mean 'rho'\\?\\)"):
        ParameterServer(_NoChunks(), p, optimizer="adadelta", options={"rh": 0.9})
    with pytest.raises(ValueError, match=r"optimizer must be one of \('adam', 'adadelta'"):
        ParameterServer(_NoChunks(), p, optimizer="sgd")
    # the estimator refuses them before any data or cluster
    with pytest.raises(ValueError, match="update setting q_step"):
        ADVGPRegressor(n_inducing=5, update_options={"q_step": 0.0})._check_params(100)


@dataclass(frozen=True)
class DampedSettings:
    damping: float = setting(0.5, "the share of Adam's step the toy takes", low=0.0, high=1.0,
                             high_open=False)


class DampedAdam(AdamUpdate):
    """A toy update: Adam's, every step damped by its own setting."""

    name = "dampedadam"
    label = "Toy: Adam's update, damped"
    settings = DampedSettings

    def new_state(self, server, s):
        return Adam(server.params.n_kernel, np.full(server.params.n_kernel, 0.02 * s.damping))

    def state_from_dict(self, d, server, s):
        return Adam.from_dict(d, np.full(server.params.n_kernel, 0.02 * s.damping))

    def apply(self, server, s, grad, shrink):
        o, k = server.params.n_kernel, server.params.k
        C, D = appended_statistics(grad, server.params)
        theta = server.theta.copy()
        mu, U = natural_step(server.params.with_vector(theta), C, D, 0.5 * s.damping * shrink)
        theta[o:o + k], theta[o + k:] = mu, U[np.triu_indices(k)]
        theta[:o] -= server.ada.step(grad[:o]) * shrink
        return theta

    def rescale(self, server, s):
        server.ada.lr = np.full(server.params.n_kernel, 0.02 * s.damping * server.step_scale)


@pytest.fixture
def toy_update():
    register(DampedAdam())
    yield
    unregister("dampedadam")


def test_a_registered_update_is_offered_by_the_cli(toy_update):
    from daskgp.interface.cli import build_parser

    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices["advgp"]
    text = " ".join(sub.format_help().split())  # argparse wraps the help
    assert "dampedadam" in text and "Toy: Adam's update, damped" in text
    assert "--damping" in text and "the share of Adam's step the toy takes" in text
    args = parser.parse_args(["advgp", "--optimizer", "dampedadam", "--damping", "0.25"])
    from daskgp.interface.cli.args import method_options

    assert method_options(args, ADVGP_UPDATES, "dampedadam", "--optimizer") == {"damping": 0.25}
    with pytest.raises(ValueError, match=r"--damping \(dampedadam's\) cannot apply to --optimizer adam"):
        method_options(parser.parse_args(["advgp", "--damping", "0.25"]), ADVGP_UPDATES, "adam",
                       "--optimizer")


def test_a_registered_update_is_on_the_dashboards_fit_menu_and_its_job(toy_update, tmp_path):
    import panel as pn

    from daskgp.interface.fitjob import FitJobSettings
    from daskgp.interface.page import RunPage

    page = RunPage(pn, lambda: None, 2, 1.0, runs=(str(tmp_path),))
    page.fit.family.value = "advgp"
    assert page.fit.method.visible and page.fit.method.name == "Server update"
    assert page.fit.method.options == ["adam", "adadelta", "dampedadam"] and page.fit.method.value == "adam"
    # its own setting: an input shown only while it is the chosen update, passed as the command's flag
    damping = page.fit.setting_inputs["advgp"]["dampedadam"]["damping"]
    assert not damping.visible and damping.value == 0.5
    assert page.fit.setting_inputs["advgp"]["adam"]["q_step"].visible  # the default's own, shown
    page.fit.method.value = "dampedadam"
    assert damping.visible and not page.fit.setting_inputs["advgp"]["adam"]["q_step"].visible
    damping.value = 0.25
    job = page.fit.settings(0, None, ())
    assert job.method == "dampedadam" and job.options == (("damping", 0.25),)
    argv = job.argv("o.nc")
    assert argv[argv.index("--optimizer") + 1] == "dampedadam" and "--method" not in argv
    assert argv[argv.index("--damping") + 1] == "0.25"
    page.fit.family.value = "sgpr"
    assert not damping.visible and page.fit.settings(0, None, ()).options == ()
    with pytest.raises(ValueError, match=r"the 'dampedadam' server update setting damping must be in"):
        FitJobSettings(family="advgp", dataset="concrete", method="dampedadam",
                       options=(("damping", 2.0),)).validate()
    with pytest.raises(ValueError, match="need the method they belong to"):
        FitJobSettings(family="advgp", dataset="concrete", options=(("damping", 0.5),)).validate()
    with pytest.raises(ValueError, match="'nope' is not a registered server update"):
        FitJobSettings(family="advgp", dataset="concrete", method="nope").validate()


@pytest.mark.cluster
def test_a_registered_update_is_fitted_by_the_estimator_with_its_setting(toy_update, concrete, client):
    X, y = concrete.X[:300], concrete.y[:300]
    kw = dict(n_inducing=10, max_iter=30, tol=None, init="kmeans", random_state=0)
    fits = {d: ADVGPRegressor(optimizer="dampedadam", update_options={"damping": d}, **kw).fit(
        X, y, client=client) for d in (0.25, 1.0)}
    for est in fits.values():
        assert np.isfinite(est.objective_) and est.n_iter_ == 30
    # the setting reached the update: different steps, different fits; damping 1 is Adam's own update
    assert fits[0.25].objective_ != fits[1.0].objective_
    adam = ADVGPRegressor(optimizer="adam", **kw).fit(X, y, client=client)
    np.testing.assert_allclose(fits[1.0].objective_, adam.objective_, rtol=1e-10)
