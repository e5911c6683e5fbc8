"""One named parameter structure for every family (issue 57, item 1).

A model's parameters are named blocks, each a constrained value with a shape and a transform to the
unconstrained real line: ``identity`` (inducing inputs Z, q(w)'s mean μ), ``log`` (variances and
lengthscales: θ = exp(φ)), ``triu`` (an upper-triangular factor, its k(k+1)/2 upper entries in row-major
order). A :class:`Structure` is the ordered tuple of blocks; ``flatten`` and ``unflatten`` map named values to
the one unconstrained vector an optimiser or a sampler moves, and back, and ``bounds`` gives the
box-constraints of that vector (L-BFGS-B's). :class:`Parameters` is what the families' parameter classes are
built on: a dataclass that declares its structure and gets ``to_vector``, ``with_vector``, ``bounds``,
``named`` and plain data (JSON-able, see :mod:`daskgp.core.plaindata`) from it.

The structures of the families (the order is each family's stored vector, unchanged since 0.3):

* the sparse families' global parameters (SGPR, the GPLVM, ADVGP's kernel part): Z (m, q), log σ²,
  log l (q,), log σ²_n — :class:`daskgp.inducing.features.GlobalParams`;
* ADVGP: those, then μ (k,) and the upper triangle of U (k, k) of q(w) = N(μ, UᵀU) —
  :class:`daskgp.advgp.model.ADVGPParams`;
* GPC: Z, log σ², log l (no noise: the probit has none) — :class:`daskgp.gpc.ep.GPCParams`;
* the exact GP's φ: log σ², log l (one, or q with ARD), log σ²_n — :class:`ExactParams` and
  :func:`exact_structure`, the order of :attr:`daskgp.compute.operator.KernelOperator.param_names` (a
  sampler's draws and ``BayesianGPRegressor.params_``).

Why a scalar goes through ``math`` and an array through ``numpy``: numpy's vectorised exp and log differ from
the C library's in the last bit for a few per cent of arguments on this machine (AVX-512 kernels), and every
family already took its scalars' logs with ``math`` and its arrays' with numpy; one rule keeps each stored
vector bit for bit what it was. Reading a vector back, 0.3's SGPR and GPLVM took their scalars' exp with
numpy, ADVGP and GPC with ``math``: a log block names its scalar exp (``scalar_exp``, 'math' unless
'numpy'), so that every family's fits stay bit for bit what they were (an L-BFGS-B path carries a last-bit
difference on to the last digits of the fit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

__all__ = ["Block", "Structure", "Parameters", "ExactParams", "exact_structure", "TRANSFORMS"]

TRANSFORMS = ("identity", "log", "triu")


@dataclass(frozen=True)
class Block:
    """One named parameter: ``shape`` () for a scalar, (k,) or (m, q) for arrays, (k, k) for ``triu``;
    ``bounds`` (low, high) on each unconstrained entry (±inf: free); ``scalar_exp``: how a scalar log
    block is read back — 'math' (the C library's exp) or 'numpy' (see the module docstring)."""

    name: str
    shape: tuple[int, ...] = ()
    transform: str = "identity"
    bounds: tuple[float, float] = (-math.inf, math.inf)
    scalar_exp: str = "math"

    def __post_init__(self):
        if self.transform not in TRANSFORMS:
            raise ValueError(f"transform must be one of {TRANSFORMS}, got {self.transform!r}")
        if self.scalar_exp not in ("math", "numpy"):
            raise ValueError(f"scalar_exp must be 'math' or 'numpy', got {self.scalar_exp!r}")
        shape = tuple(int(s) for s in self.shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"block {self.name!r}: negative dimension in shape {shape}")
        if self.transform == "triu" and (len(shape) != 2 or shape[0] != shape[1]):
            raise ValueError(f"block {self.name!r}: a triangular factor is square, got shape {shape}")
        lo, hi = (float(b) for b in self.bounds)
        if not lo < hi:
            raise ValueError(f"block {self.name!r}: bounds must have low < high, got {self.bounds}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "bounds", (lo, hi))

    @property
    def size(self) -> int:
        """Entries of the unconstrained vector this block takes."""
        if self.transform == "triu":
            return self.shape[0] * (self.shape[0] + 1) // 2
        return math.prod(self.shape)

    def pack(self, value) -> np.ndarray:
        """(size,) unconstrained entries of the constrained ``value``."""
        if self.shape == ():
            v = float(value)
            return np.array([math.log(v) if self.transform == "log" else v])
        a = np.asarray(value, dtype=float)
        if a.shape != self.shape:
            raise ValueError(f"block {self.name!r} must have shape {self.shape}, got {a.shape}")
        if self.transform == "triu":
            return a[np.triu_indices(self.shape[0])]
        return (np.log(a) if self.transform == "log" else a).ravel()

    def unpack(self, entries: np.ndarray):
        """The constrained value (a float for a scalar block, else an array of ``shape``) of ``entries``."""
        if self.shape == ():
            if self.transform == "log" and self.scalar_exp == "numpy":
                return float(np.exp(entries[0]))
            e = float(entries[0])
            return math.exp(e) if self.transform == "log" else e
        if self.transform == "triu":
            k = self.shape[0]
            U = np.zeros((k, k))
            U[np.triu_indices(k)] = entries
            return U
        a = np.asarray(entries, dtype=float).reshape(self.shape)
        return np.exp(a) if self.transform == "log" else a.copy()


@dataclass(frozen=True)
class Structure:
    """The ordered blocks of one model's parameters and their unconstrained vector."""

    blocks: tuple[Block, ...]

    def __post_init__(self):
        object.__setattr__(self, "blocks", tuple(self.blocks))
        names = [b.name for b in self.blocks]
        if len(set(names)) != len(names):
            raise ValueError(f"block names must be unique, got {names}")

    @property
    def names(self) -> list[str]:
        return [b.name for b in self.blocks]

    @property
    def size(self) -> int:
        return sum(b.size for b in self.blocks)

    def __getitem__(self, name: str) -> Block:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"no parameter block {name!r}; the blocks are {self.names}")

    def slice(self, name: str) -> slice:
        """Where block ``name`` sits in the unconstrained vector."""
        o = 0
        for b in self.blocks:
            if b.name == name:
                return slice(o, o + b.size)
            o += b.size
        raise KeyError(f"no parameter block {name!r}; the blocks are {self.names}")

    def flatten(self, values: Mapping) -> np.ndarray:
        """(size,) unconstrained vector of the named constrained ``values`` (every block's name a key)."""
        missing = [b.name for b in self.blocks if b.name not in values]
        if missing:
            raise ValueError(f"missing parameter blocks {missing}")
        if not self.blocks:
            return np.zeros(0)
        return np.concatenate([b.pack(values[b.name]) for b in self.blocks])

    def unflatten(self, vector) -> dict:
        """The named constrained values of the (size,) unconstrained ``vector``."""
        v = np.asarray(vector, dtype=float)
        if v.shape != (self.size,):
            raise ValueError(f"expected an unconstrained vector of shape ({self.size},), got {v.shape}")
        out, o = {}, 0
        for b in self.blocks:
            out[b.name] = b.unpack(v[o:o + b.size])
            o += b.size
        return out

    def bounds(self) -> np.ndarray:
        """(size, 2) box bounds of the unconstrained vector, in its order (L-BFGS-B's ``bounds``)."""
        return np.array([b.bounds for b in self.blocks for _ in range(b.size)], dtype=float).reshape(-1, 2)

    def entry_names(self) -> list[str]:
        """One label per unconstrained entry: the block's name for a scalar or a one-entry array, else
        ``name_i`` / ``name_i_j`` (the exact GP's ``lengthscale_0``, ``lengthscale_1``, …)."""
        out = []
        for b in self.blocks:
            if b.shape == () or b.shape == (1,):
                out.append(b.name)
            elif b.transform == "triu":
                out += [f"{b.name}_{i}_{j}" for i, j in zip(*np.triu_indices(b.shape[0]), strict=True)]
            else:
                out += [b.name + "".join(f"_{i}" for i in ix) for ix in np.ndindex(*b.shape)]
        return out

    def to_plain(self) -> list[dict]:
        return [{"name": b.name, "shape": list(b.shape), "transform": b.transform, "bounds": list(b.bounds),
                 "scalar_exp": b.scalar_exp} for b in self.blocks]

    @classmethod
    def from_plain(cls, plain) -> Structure:
        if not isinstance(plain, list):
            raise ValueError("a parameter structure is a list of blocks")
        return cls(tuple(Block(str(d["name"]), tuple(d["shape"]), str(d["transform"]), tuple(d["bounds"]),
                               str(d.get("scalar_exp", "math"))) for d in plain))


class Parameters:
    """Base of the families' parameter dataclasses. A subclass declares :meth:`structure` — its blocks,
    each named after one of its fields — and gets the unconstrained vector, its bounds and plain data from it;
    fields that are not blocks (the kernel's name, a feature map) are structure, carried unchanged."""

    def structure(self) -> Structure:
        raise NotImplementedError

    def named(self) -> dict:
        """The blocks' constrained values by name, in the structure's order."""
        return {name: getattr(self, name) for name in self.structure().names}

    def to_vector(self) -> np.ndarray:
        """The unconstrained vector (see :meth:`structure` for its order)."""
        return self.structure().flatten(self.named())

    def with_vector(self, v):
        """The same model (shapes, kernel and every field that is not a block) at unconstrained vector
        ``v``."""
        return replace(self, **self.structure().unflatten(v))

    def bounds(self) -> np.ndarray:
        """(size, 2) L-BFGS-B bounds of :meth:`to_vector`."""
        return self.structure().bounds()

    def to_plain(self) -> dict:
        """Every field as plain data (arrays as arrays, for :mod:`daskgp.core.plaindata`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_plain(cls, plain: Mapping):
        return cls(**dict(plain))


def exact_structure(n_lengthscales: int = 1,
                    bounds: tuple[float, float] = (-math.inf, math.inf)) -> Structure:
    """The exact GP's φ = (log σ², log l, log σ²_n): ``n_lengthscales`` lengthscales (1 for an isotropic
    kernel, one per input with ARD), each entry within ``bounds`` (the samplers' ±``max_abs_phi``). Its
    vector is :attr:`daskgp.compute.operator.KernelOperator.log_params` bit for bit, in the order of
    ``param_names``."""
    return Structure((Block("variance", (), "log", bounds),
                      Block("lengthscale", (int(n_lengthscales),), "log", bounds),
                      Block("noise", (), "log", bounds)))


@dataclass(frozen=True)
class ExactParams(Parameters):
    """The exact GP's hyperparameters: kernel variance σ², lengthscale(s) l (a (1,) array for an isotropic
    kernel, (q,) with ARD), noise variance σ²_n, and the kernel's registry name; units those of the data the
    GP was fitted to (the estimators' standardised data). Its vector is φ of :func:`exact_structure`."""

    variance: float
    lengthscale: np.ndarray
    noise: float
    kernel: str = "rbf"

    def __post_init__(self):
        ls = np.atleast_1d(np.asarray(self.lengthscale, dtype=float))
        if ls.ndim != 1:
            raise ValueError(f"lengthscale must be a scalar or 1-D, got shape {ls.shape}")
        object.__setattr__(self, "variance", float(self.variance))
        object.__setattr__(self, "lengthscale", ls.copy())
        object.__setattr__(self, "noise", float(self.noise))

    def structure(self) -> Structure:
        return exact_structure(self.lengthscale.size)
