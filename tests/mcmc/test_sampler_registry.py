"""The sampler registry: a sampler defined and registered here — one class and one register line, no other
file touched — runs through the driver, the run store and resume on a real cluster, and the CLI, the
dashboard's settings and the configuration read its facts from the registry."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pytest

from daskgp.core.plaindata import expect_array, expect_int, expect_keys, expect_number
from daskgp.core.random import rng_from_state
from daskgp.inference.settings import setting
from daskgp.mcmc.config import SamplerConfig, check_method_fits
from daskgp.mcmc.samplers import Sampler, default_method, get_sampler, register, sampler_names, unregister
from daskgp.mcmc.samplers.base import expect_stopped


@dataclass
class _ToyState:
    phi: np.ndarray
    logp: float
    t: int
    rng: np.random.Generator
    stopped: str | None = None

    def to_dict(self) -> dict:
        return {"phi": self.phi, "logp": self.logp, "t": self.t, "rng": self.rng.bit_generator.state,
                "stopped": self.stopped}


@dataclass(frozen=True)
class ToySettings:
    """The toy's one tunable, declared once: the configuration, CLI and dashboard take it from here."""

    jump: float = setting(0.5, "the toy's random-walk step in the metric's units", low=0)


class ToySampler(Sampler):
    """Random-walk Metropolis with a fixed isotropic step (its ``jump`` setting) in the preconditioner's
    metric: no adaptation, so a run's warmup is only the configuration's n_adapt draws."""

    name = "toyrwm"
    label = "Toy random-walk Metropolis (a test's)"
    settings = ToySettings
    uses_gradient = False
    records = {"accepted": bool, "seconds": float, "warmup": bool}
    monitor = {"accepted": ("toy acceptance", False)}

    def initial(self, phi0, cfg, M, rng, target):
        return _ToyState(np.array(phi0, dtype=float), float(target.log_density(phi0)), 0, rng)

    def state_from_dict(self, d, cfg, p):
        expect_keys(d, ("phi", "logp", "t", "rng", "stopped"), "toy state")
        return _ToyState(expect_array(d["phi"], (p,), "phi"), expect_number(d["logp"], "logp"),
                         expect_int(d["t"], "t"), rng_from_state(d["rng"]), expect_stopped(d["stopped"]))

    def run(self, target, cfg, M, state, n):
        L = np.linalg.cholesky(M)
        draws, acc, secs = np.empty((n, len(state.phi))), np.zeros(n, bool), np.zeros(n)
        t0 = state.t
        for i in range(n):
            tic = time.perf_counter()
            prop = state.phi + cfg.settings.jump * L @ state.rng.standard_normal(len(state.phi))
            lp = target.log_density(prop)
            if np.log(state.rng.uniform()) < lp - state.logp:
                state.phi, state.logp, acc[i] = prop, lp, True
            draws[i], secs[i] = state.phi, time.perf_counter() - tic
            state.t += 1
        return {"phi": draws, "accepted": acc, "seconds": secs, "warmup": t0 + np.arange(n) < cfg.adapt}


@pytest.fixture
def toy():
    sampler = register(ToySampler())
    yield sampler
    unregister(sampler.name)


@pytest.fixture(scope="module")
def thread_client():
    """A real two-worker cluster whose workers are threads of this process, so that they see a sampler
    registered here (worker processes would need it importable, or an entry point: see the registry)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


class _Interrupt(Exception):
    pass


@pytest.mark.cluster
def test_a_registered_sampler_runs_through_the_driver_the_store_and_resume(toy, concrete, thread_client,
                                                                            tmp_path):
    """The toy sampler, registered in this file only: a run interrupted after its first block and resumed
    equals an uninterrupted one draw for draw; its records are the run's sample stats; a run reopened from
    disk knows its method."""
    from daskgp.mcmc.chains import resume, sample
    from daskgp.mcmc.diagnostics import open_run
    from daskgp.runs.draws import read_checkpoint

    X, y = concrete.X_std[:150], concrete.y_std[:150]
    kw = dict(method="toyrwm", n_chains=2, n_iter=60, checkpoint_every=20, n_adapt=20, subset_size=100,
              seed=5)
    full = sample(X, y, out=str(tmp_path / "full.zarr"), client=thread_client, **kw)
    assert set(full["sample_stats"].data_vars) >= {"accepted", "seconds", "warmup", "diverged"}
    assert 0.05 < float(full["sample_stats"]["accepted"].mean()) < 0.95  # it moves, and rejects
    part = str(tmp_path / "part.zarr")

    def stop(status):
        if status.done >= 20:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        sample(X, y, out=part, client=thread_client, progress=stop, **kw)
    assert read_checkpoint(part)["n_draws"] == 20
    done = resume(part, X=X, y=y, client=thread_client)
    for g in ("posterior", "warmup_posterior"):
        for name in done.attrs["param_names"]:
            np.testing.assert_array_equal(done[g][name].values, full[g][name].values)
    np.testing.assert_array_equal(done["sample_stats"]["accepted"].values,
                                  full["sample_stats"]["accepted"].values)
    assert open_run(part).attrs["config"]["method"] == "toyrwm"


def test_a_registered_sampler_is_offered_by_the_cli_and_the_dashboard(toy):
    """The toy's method and its own setting (``jump``, declared in this file only) reach the configuration,
    ``daskgp sample``'s flags and help, the dashboard's inputs and the estimator without another file."""
    import panel as pn

    from daskgp.interface.cli import build_parser
    from daskgp.interface.cli.runs import sampler_options
    from daskgp.interface.dashboard import DashboardSettings
    from daskgp.interface.page import RunPage
    from daskgp.mcmc.estimator import BayesianGPRegressor

    assert "toyrwm" in sampler_names()
    args = build_parser().parse_args(["sample", "--method", "toyrwm", "--jump", "0.25"])
    assert args.method == "toyrwm" and sampler_options(args, "toyrwm") == {"jump": 0.25}
    with pytest.raises(ValueError, match=r"--jump \(toyrwm's\) cannot apply to --method sgld"):
        sampler_options(args, "sgld")
    help_text = build_parser()._subparsers._group_actions[0].choices["sample"].format_help()
    assert "toyrwm" in help_text and "--jump" in help_text and "the toy's random-walk step" in help_text
    DashboardSettings(method="toyrwm", options={"jump": 0.3}).validate()
    with pytest.raises(ValueError, match="toyrwm setting jump must be in"):
        DashboardSettings(method="toyrwm", options={"jump": -1.0}).validate()
    page = RunPage(pn, lambda: None, 2, 1.0)
    assert "toyrwm" in page.method.options.values() and not page.setting_inputs["toyrwm"]["jump"].visible
    page.method.value = "toyrwm"
    assert page.setting_inputs["toyrwm"]["jump"].visible and page._options() == {"jump": 0.5}
    cfg = SamplerConfig(method="toyrwm").validate()
    assert cfg.sampler is toy and cfg.n_probes == ToySampler.default_probes and cfg.settings == ToySettings()
    assert SamplerConfig.from_dict({"method": "toyrwm", "jump": 0.2}).options == {"jump": 0.2}  # flat, too
    est = BayesianGPRegressor(method="toyrwm", sampler_options={"jump": 0.2})
    assert est._config().settings == ToySettings(jump=0.2)
    check_method_fits(cfg, 10**6)  # no size limit declared: none enforced


def test_the_builtin_samplers_facts_come_from_their_modules():
    """The configuration reads each built-in sampler's defaults from it (the values 0.3 hard-coded)."""
    sghmc, sgld, mh = (SamplerConfig(method=m) for m in ("sghmc", "sgld", "mh"))
    assert (sghmc.n_probes, sgld.n_probes, mh.n_probes) == (32, 4, 4)
    assert (sghmc.solver_for(6000), sghmc.solver_for(1000), sgld.solver_for(6000)) == \
        ("cg-ulisse", "ulisse", "ulisse")
    assert (sghmc.precond_rank_for(6000), sghmc.precond_rank_for(1000), sgld.precond_rank_for(6000)) == \
        (2000, 300, 100)
    target = {m: SamplerConfig(method=m, target_ess=400, n_iter=50_000) for m in ("sghmc", "sgld", "mh")}
    assert {m: c.adapt for m, c in target.items()} == {"sghmc": 400, "sgld": 400, "mh": 1000}
    assert target["sgld"].settings.step_iter == 2000
    assert SamplerConfig(method="sgld", n_iter=700).settings.step_iter == 700
    with pytest.raises(ValueError, match="n_iter >= batch"):
        SamplerConfig(method="sgld", n_iter=50, options={"batch": 100}).validate()
    with pytest.raises(MemoryError, match="exact Cholesky"):
        check_method_fits(mh, 10**6, memory_bytes=2**30)
    check_method_fits(sghmc, 10**6, memory_bytes=2**30)


def test_registry_errors_are_one_line():
    with pytest.raises(ValueError, match=r"method must be one of \('sghmc', 'sgld', 'mh'"):
        SamplerConfig(method="nuts").validate()
    with pytest.raises(ValueError, match="already registered"):
        register(type("Other", (ToySampler,), {"name": "sgld"})())
    with pytest.raises(ValueError, match="records no"):
        register(type("NoSeconds", (ToySampler,), {"name": "noseconds", "records": {"warmup": bool}})())
    with pytest.raises(TypeError, match="Sampler subclass"):
        register(object())
    with pytest.raises(ValueError, match="lower-case identifier"):
        register(type("Bad", (ToySampler,), {"name": "Bad Name"})())
    assert "noseconds" not in sampler_names()


def test_an_entry_point_sampler_is_found_on_first_lookup(monkeypatch):
    """A sampler in another package declares an entry point in the 'daskgp.samplers' group: it is loaded
    the first time a name is not found, in any process (a worker process included)."""
    import importlib.metadata

    from daskgp.mcmc.samplers import registry

    ep = importlib.metadata.EntryPoint("toyrwm", f"{__name__}:ToySampler", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(registry.SAMPLERS, "entry_points_loaded", False)
    try:
        assert isinstance(get_sampler("toyrwm"), ToySampler)
        assert SamplerConfig(method="toyrwm").validate().sampler.label.startswith("Toy")
    finally:
        unregister("toyrwm")


def test_the_retired_tables_are_gone():
    """The tables the registry replaced (deprecated in 0.4) are retired: each sampler says its records."""
    import daskgp.mcmc.config as config
    import daskgp.mcmc.segments as segments

    for module, name in ((config, "METHODS"), (segments, "RECORDS"), (segments, "GRADIENT_RECORDS")):
        with pytest.raises(AttributeError):
            getattr(module, name)
    assert "sghmc" in sampler_names() and get_sampler("mh").records


def test_a_broken_entry_point_is_one_warning_and_the_builtins_still_work(monkeypatch):
    import importlib.metadata

    from daskgp.mcmc.samplers import registry

    bad = importlib.metadata.EntryPoint("nosuch", "no_such_module_anywhere:S", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [bad] if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(registry.SAMPLERS, "entry_points_loaded", False)
    with pytest.warns(RuntimeWarning, match="'nosuch' .* was not registered: ModuleNotFoundError"):
        assert sampler_names() == ("sghmc", "sgld", "mh", "hmc")
    assert get_sampler("sghmc").name == "sghmc"


def test_auto_picks_the_sampler_by_the_datas_size_and_a_run_stores_it_resolved():
    """method='auto' (the default): the sampler the registry's measured crossovers give for n rows (HMC up
    to 1,400 rows, SGHMC beyond); the configuration for n rows is that sampler's with its defaults, so a run
    stores and resumes it."""
    from dataclasses import asdict

    cfg = SamplerConfig().validate()
    assert cfg.method == "auto" and cfg.n_probes is None and cfg.probes_from_noise is None
    with pytest.raises(ValueError, match="for_rows"):
        cfg.sampler  # noqa: B018 — the property raises
    assert get_sampler("hmc").default_max_n == 1400 and get_sampler("mh").default_max_n is None
    for n in (10, 1030, 1400):  # below the measured crossover (benchmarks/small_n_crossover.py)
        assert cfg.for_rows(n) == SamplerConfig(method="hmc")
    for n in (1401, 2000, 22_784):
        assert cfg.for_rows(n) == SamplerConfig(method="sghmc")
    # the stochastic ascent as the warmup: a sampler of the same gradients, whatever the size
    assert SamplerConfig(warmup="ascent").for_rows(1030).method == "sghmc"
    large = cfg.for_rows(22_784)
    assert large.n_probes == 32 and large.probes_from_noise is True
    assert SamplerConfig(target_ess=400).for_rows(22_784) == SamplerConfig(method="sghmc", target_ess=400)
    assert SamplerConfig(method="mh").for_rows(10**6).method == "mh"  # a named method is kept
    assert SamplerConfig.from_dict(asdict(large)) == large
    with pytest.raises(ValueError, match="n_probes must be a positive integer"):
        SamplerConfig(n_probes=0).validate()
    with pytest.raises(ValueError, match="n must be a positive integer"):
        default_method(0)


def test_a_registered_sampler_with_a_crossover_is_auto_up_to_it():
    """The registry's rule: of the samplers whose crossover covers n, the one with the smallest; the
    configuration for n rows then is that sampler's."""
    small = type("SmallN", (ToySampler,), {"name": "smalln", "default_max_n": 100})()
    mid = type("MidN", (ToySampler,), {"name": "midn", "default_max_n": 1000})()
    register(small)
    register(mid)
    try:
        assert [default_method(n) for n in (1, 100, 101, 1000, 1001, 1401)] == \
            ["smalln", "smalln", "midn", "midn", "hmc", "sghmc"]
        assert SamplerConfig(target_ess=100).for_rows(50) == SamplerConfig(method="smalln", target_ess=100)
    finally:
        unregister("smalln")
        unregister("midn")
    assert default_method(100) == "hmc" and default_method(2000) == "sghmc"
