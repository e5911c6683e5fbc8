"""A run's configuration as four typed parts (issue 32): model, sampler, solver and run specs, made from
:class:`SamplerConfig`'s own fields; a run's stored flat configuration (format 3) reads into them."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, asdict, fields

import numpy as np
import pytest

from daskgp.mcmc.config import SPEC_TYPES, ModelSpec, RunSpec, SamplerConfig, SamplerSpec, SolverSpec, Specs
from daskgp.mcmc.samplers import sampler_names


def test_every_field_is_in_exactly_one_part_with_the_configs_default():
    names = [f.name for kind in SPEC_TYPES for f in fields(kind)]
    assert sorted(names) == sorted(f.name for f in fields(SamplerConfig)) and len(names) == len(set(names))
    defaults = {f.name: f.default for f in fields(SamplerConfig)}
    for kind in SPEC_TYPES:
        assert asdict(kind()) == {f.name: defaults[f.name] for f in fields(kind)}


@pytest.mark.parametrize("method", sampler_names())
def test_a_configuration_splits_into_its_parts_and_joins_back_unchanged(method):
    cfg = SamplerConfig.from_dict({"method": method, "kernel": "matern52", "ard": True, "n_chains": 3,
                                   "target_ess": 150, "solver": "cg", "precond_rank": 50, "seed": 7})
    parts = cfg.specs()
    assert isinstance(parts, Specs) and [type(p) for p in parts] == list(SPEC_TYPES)
    assert (parts.model.kernel, parts.sampler.method, parts.solver.solver, parts.run.n_chains) == \
        ("matern52", method, "cg", 3)
    assert parts.solver.n_probes == cfg.n_probes and parts.sampler.n_adapt == cfg.n_adapt  # resolved
    assert asdict(SamplerConfig.from_specs(*parts)) == asdict(cfg)


def test_a_stored_flat_configuration_reads_into_the_parts():
    """What a run stores (format 3: the flat fields as JSON) is read by from_dict, then split."""
    stored = json.loads(json.dumps(asdict(SamplerConfig(method="sgld", n_iter=300))))
    parts = SamplerConfig.from_dict(stored).specs()
    assert parts.sampler.method == "sgld" and parts.run.n_iter == 300 and parts.solver.n_probes == 4


def test_the_parts_are_typed_frozen_and_validated_when_joined():
    with pytest.raises(FrozenInstanceError):
        ModelSpec().kernel = "matern32"
    with pytest.raises(TypeError, match="model must be a ModelSpec, got RunSpec"):
        SamplerConfig.from_specs(model=RunSpec())
    with pytest.raises(TypeError):
        SolverSpec(kernel="rbf")  # a field of another part
    with pytest.raises(ValueError, match="step_start"):
        SamplerConfig.from_specs(sampler=SamplerSpec(method="sgld", options={"step_start": 1e-4,
                                                                             "step_end": 1e-3}))


def test_a_target_runs_adaptation_is_left_to_the_noise_only_when_the_user_left_it_unset():
    """adapt_from_noise is resolved once, before n_adapt: True for a target run whose n_adapt is unset
    (SGHMC), False otherwise — and False for a run stored before the field existed (its n_adapt is set)."""
    assert SamplerConfig(method="sghmc", target_ess=100).adapt_from_noise is True
    # the fixed rule, until a warmup measures the noise
    assert SamplerConfig(method="sghmc", target_ess=100).n_adapt == 400
    assert SamplerConfig(method="sghmc", target_ess=100, n_adapt=300).adapt_from_noise is False
    assert SamplerConfig(method="sghmc").adapt_from_noise is False  # a fixed length: over its first fifth
    assert SamplerConfig(method="sgld", target_ess=100).adapt_from_noise is False
    assert SamplerConfig(method="mh", target_ess=100).adapt_from_noise is False
    old = asdict(SamplerConfig(method="sghmc", target_ess=100))
    del old["adapt_from_noise"]
    assert SamplerConfig.from_dict(old).adapt_from_noise is False
    stored = json.loads(json.dumps(asdict(SamplerConfig(method="sghmc", target_ess=100))))
    assert SamplerConfig.from_dict(stored) == SamplerConfig(method="sghmc", target_ess=100)
    with pytest.raises(ValueError, match="adapt_from_noise must be True or False"):
        SamplerConfig.from_dict({"adapt_from_noise": "yes"})


def test_the_block_is_the_samplers_for_a_target_run_only_when_the_user_left_it_unset():
    """checkpoint_every unset: 100, or the sampler's own block for a run to a target ESS (HMC: 25, so a run
    whose draws are nearly independent stops near its target); a given value is kept; 'auto' leaves it to
    the sampler for_rows picks; a stored run's block reads back unchanged."""
    assert SamplerConfig(method="hmc", target_ess=400).checkpoint_every == 25
    assert SamplerConfig(method="hmc").checkpoint_every == 100  # a fixed length: no target to stop near
    assert SamplerConfig(method="hmc", target_ess=400, checkpoint_every=50).checkpoint_every == 50
    assert SamplerConfig(method="sghmc", target_ess=400).checkpoint_every == 100
    auto = SamplerConfig(target_ess=400)
    assert auto.checkpoint_every is None
    assert auto.validate().for_rows(1030).checkpoint_every == SamplerConfig(
        method=auto.for_rows(1030).method, target_ess=400).checkpoint_every
    stored = json.loads(json.dumps(asdict(SamplerConfig(method="hmc", target_ess=400))))
    assert SamplerConfig.from_dict(stored).checkpoint_every == 25
    with pytest.raises(ValueError, match="checkpoint_every must be a positive integer"):
        SamplerConfig(method="hmc", checkpoint_every=0).validate()


def test_sghmcs_adaptation_from_the_noise_is_whole_windows_growing_with_the_noise_to_the_fixed_length():
    """2 + ⌈5λ/0.25²/50⌉ windows of 50: concrete's λ ≈ 3.2 (32 probes) keeps the fixed 400 iterations,
    house_8L's ≈ 0.45 (CG, rank 2,000) needs 150; never more than the fixed rule, none without a noise."""
    import numpy as np

    from daskgp.mcmc.samplers import get_sampler
    from daskgp.mcmc.samplers.sghmc import SGHMC_WINDOW

    sghmc, cfg = get_sampler("sghmc"), SamplerConfig(method="sghmc", target_ess=100)
    rule = [sghmc.adaptation_from_noise(cfg, lam) for lam in np.linspace(0.01, 10, 200)]
    assert all(n % SGHMC_WINDOW == 0 and 3 * SGHMC_WINDOW <= n <= 400 for n in rule)
    assert rule == sorted(rule) and rule[0] == 150 and rule[-1] == 400
    assert sghmc.adaptation_from_noise(cfg, 3.2) == 400
    assert sghmc.adaptation_from_noise(cfg, 1.38) == 250  # 110 pairs: 3 windows of them, 5 in all
    assert sghmc.adaptation_from_noise(cfg, 0.45) == 150
    assert sghmc.adaptation_from_noise(cfg, 0.0) is None and sghmc.adaptation_from_noise(cfg, np.nan) is None
    assert get_sampler("sgld").adaptation_from_noise(cfg, 0.45) is None


@pytest.mark.parametrize(("warm", "cfg", "n_probes", "n_adapt"), [
    # 0.45 with 32 probes (all of house_8L): 12 probes keep the step at h_max, and their noise (1.2) calls
    # for a longer adaptation than 32 probes' would
    (dict(noise_at_mode=0.45), dict(target_ess=100), 12, 200),
    (dict(noise_at_mode=0.45), dict(target_ess=100, n_probes=32), 32, 150),  # the user's probes are kept
    (dict(noise_at_mode=0.45), dict(target_ess=100, n_iter=600), 12, 120),  # a fifth of a small cap
    (dict(noise_at_mode=0.45), dict(), 12, 400),  # a fixed-length run: probes cut, its adaptation kept
    (dict(noise_at_mode=3.2), dict(target_ess=100), 32, 400),  # concrete's noise already caps the step
    (dict(noise_at_mode=0.45, converged=False), dict(target_ess=100), 32, 400),
    (dict(noise_at_mode=0.45, cov_from="saddle-free"), dict(target_ess=100), 32, 400),
    (dict(noise_at_mode=None), dict(target_ess=100), 32, 400),  # a warmup checkpointed before it was measured
    (dict(noise_at_mode=0.45), dict(target_ess=100, n_adapt=300), 12, 300),  # the user's length is kept
])
def test_the_run_takes_the_noises_probes_and_adaptation_only_after_a_warmup_it_can_trust(warm, cfg, n_probes,
                                                                                         n_adapt):
    from daskgp.mcmc.warmup import FULL_LAPLACE
    from daskgp.mcmc.warmup_route import tuned_from_warmup

    result = {"converged": True, "cov_from": FULL_LAPLACE, **warm}
    tuned = tuned_from_warmup(SamplerConfig(**{"method": "sghmc", **cfg}), result)
    assert (tuned.n_probes, tuned.adapt) == (n_probes, n_adapt)
    assert SamplerConfig.from_dict(asdict(tuned)) == tuned  # stored as it ran, resumed as it ran


def test_the_probes_from_the_noise_are_the_fewest_that_leave_the_step_at_its_cap():
    from daskgp.mcmc.samplers import get_sampler
    from daskgp.mcmc.samplers.sghmc import MIN_PROBES, _baoab_noise_gains

    cfg = SamplerConfig(method="sghmc")
    sghmc = get_sampler("sghmc")
    s = cfg.settings
    b = _baoab_noise_gains(s.h_max, s.friction)[1]
    for lam in np.geomspace(0.01, 10, 60):
        n = sghmc.probes_from_noise(cfg, lam)
        assert MIN_PROBES <= n <= cfg.n_probes

        def ok(k, lam=lam):  # k probes' noise takes at most 3/4 of what the step h_max tolerates
            return b * lam * cfg.n_probes / k <= 0.75 * s.noise_budget
        if MIN_PROBES < n < cfg.n_probes:
            assert ok(n) and not ok(n - 1)
        elif n == MIN_PROBES:
            assert ok(n)
        else:
            assert not ok(n - 1)
    assert sghmc.probes_from_noise(cfg, np.nan) is None and sghmc.probes_from_noise(cfg, 0.0) is None
    assert get_sampler("sgld").probes_from_noise(cfg, 0.45) is None


# a configuration as daskgp 0.4 stored it (asdict of its SamplerConfig: the samplers' settings flat)
_STORED_04 = {
    "method": "sghmc", "n_chains": 4, "n_iter": 2000, "kernel": "rbf", "ard": False, "prior_shape": 2.0,
    "prior_rate": 1.0, "seed": 0, "checkpoint_every": 100, "subset_size": 500, "step_start": 0.1,
    "step_end": 0.001, "step_gamma": 0.55, "batch": 100, "freeze_threshold": 0.01, "n_probes": 32,
    "redraw_every": 20, "solver": None, "es_tol": 0.01, "tol": 1e-06, "mean_tol": 0.0001, "beta": 1.0,
    "roulette": "increment", "precond": "pivchol", "precond_rank": None, "cache_dtype": "float32",
    "device": "cpu", "max_abs_phi": 30.0, "warmup": "map", "warmup_iter": 400, "laplace_probes": 128,
    "overdispersion": 1.5, "friction": 1.2, "h_max": 0.6, "noise_budget": 0.4, "n_adapt": 400,
    "adapt_from_noise": False, "probes_from_noise": False, "step_iter": None, "target_ess": None,
    "target_rhat": 1.01, "workers_per_chain": None}


@pytest.mark.parametrize("method,own", [
    ("sghmc", {"friction": 1.2, "h_max": 0.6, "noise_budget": 0.4, "batch": 100}),
    ("sgld", {"step_start": 0.1, "step_end": 0.001, "step_gamma": 0.55, "step_iter": 2000, "batch": 100,
              "freeze_threshold": 0.01}),
    ("mh", {}), ("hmc", {}),
])
def test_a_04_configuration_reads_with_its_methods_settings_in_options(method, own):
    """0.4 stored SGLD's and SGHMC's settings as flat fields of every run: on reading, the run's own
    sampler's move into ``options`` with their stored values (a resumed run continues with them), the
    others — inert for that sampler in 0.4 — go; MH and HMC have none. Read twice, the same."""
    cfg = SamplerConfig.from_dict({**_STORED_04, "method": method})
    assert cfg.options == own and not {"friction", "step_start", "batch"} & {f.name for f in fields(cfg)}
    assert SamplerConfig.from_dict(json.loads(json.dumps(asdict(cfg)))) == cfg
    if own:
        assert cfg.settings == type(cfg.settings)(**own)


def test_a_methods_setting_given_flat_wins_and_one_of_another_method_is_refused():
    """``sample(..., step_start=…)`` names a setting flat: it lands in ``options`` over the configuration's;
    a setting the method does not have is refused in one line, naming the method."""
    base = asdict(SamplerConfig(method="sgld"))
    assert SamplerConfig.from_dict({**base, "step_start": 0.05}).settings.step_start == 0.05
    with pytest.raises(ValueError, match="sghmc has no setting 'step_start'"):
        SamplerConfig(method="sghmc", options={"step_start": 0.05}).validate()
    with pytest.raises(ValueError, match="calls for hmc, which has no setting"):
        SamplerConfig.from_dict({"friction": 1.0}).for_rows(500)


def test_a_setting_named_like_a_configuration_field_is_given_through_options_only():
    """A registered sampler may name a setting like one of the run's fields (``seed``): a flat ``seed`` stays
    the run's, and the sampler's comes from ``options``."""
    from dataclasses import dataclass

    from daskgp.inference.settings import setting
    from daskgp.mcmc.samplers import Sampler, register, unregister

    @dataclass(frozen=True)
    class Clash:
        seed: int = setting(1, "a sampler's own seed", low=0)

    class ClashSampler(Sampler):
        name, settings, records = "clashing", Clash, {"seconds": float, "warmup": bool}

    register(ClashSampler())
    try:
        cfg = SamplerConfig.from_dict({"method": "clashing", "seed": 5})
        assert cfg.seed == 5 and cfg.settings == Clash(seed=1)
        cfg = SamplerConfig.from_dict({"method": "clashing", "seed": 5, "options": {"seed": 7}})
        assert cfg.seed == 5 and cfg.settings == Clash(seed=7)
    finally:
        unregister("clashing")
