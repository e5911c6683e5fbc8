"""Samplers on an unconstrained parameter vector φ (p,), each in its own module with its driver entry
(:class:`Sampler`): SGHMC (:mod:`.sghmc`, what ``method='auto'`` runs wherever no other sampler's measured
crossover covers the data's size: :func:`default_method`), the paper's SGLD (:mod:`.sgld`), adaptive
random-walk MH on the exact posterior (:mod:`.mh`) and HMC on the exact posterior and gradient (:mod:`.hmc`,
the small-n path: what 'auto' runs up to its measured crossover with SGHMC). The algorithms work on plain
callables, so the GP wiring (gradients through the kernel operator, chains on the cluster, checkpoints) stays
outside.

Each algorithm is a small object with an explicit state (``init`` → state, ``run(state, n)`` → records and
the next state). A state is a dataclass whose ``to_dict`` is plain arrays, numbers and the generator's state
dict — what a checkpoint stores — and whose ``from_dict`` checks every field it reads back, so a chain can run
in segments on any worker and resume from a checkpoint with its random stream; :func:`sgld` and
:func:`random_walk_mh` run one chain in one go.

Adding a sampler: a module with the algorithm and a :class:`Sampler` subclass, and one :func:`register` line
below (or an entry point in the ``daskgp.samplers`` group, see :mod:`.registry`).
"""

from ...core.random import rng_from_state
from .base import Sampler, Target
from .hmc import HMC, HMCSampler, HMCState
from .mh import MHResult, MHSampler, MHState, RandomWalkMH, random_walk_mh
from .registry import AUTO, default_method, find_sampler, get_sampler, register, sampler_names, unregister
from .sghmc import SGHMC, SGHMCResult, SGHMCSampler, SGHMCState, whitened_hessian
from .sgld import SGLD, SGLDResult, SGLDSampler, SGLDState, StepSchedule, sgld

__all__ = ["Sampler", "Target", "register", "unregister", "get_sampler", "find_sampler", "sampler_names",
           "default_method", "AUTO",
           "StepSchedule", "SGLD", "SGLDState", "SGLDResult", "sgld", "RandomWalkMH", "MHState", "MHResult",
           "random_walk_mh", "SGHMC", "SGHMCState", "SGHMCResult", "rng_from_state", "whitened_hessian",
           "HMC", "HMCState", "HMCSampler"]

# the built-in samplers, one line each (the first is listed first in menus)
register(SGHMCSampler())
register(SGLDSampler())
register(MHSampler())
register(HMCSampler())
