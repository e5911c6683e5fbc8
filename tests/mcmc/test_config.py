"""A run's configuration as four typed parts (issue 32): model, sampler, solver and run specs, made from
:class:`SamplerConfig`'s own fields; a run's stored flat configuration (format 3) reads into them."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, asdict, fields

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
        SamplerConfig.from_specs(sampler=SamplerSpec(method="sgld", step_start=1e-4, step_end=1e-3))
