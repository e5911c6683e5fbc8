"""The one named parameter structure (issue 57, item 1): blocks, their unconstrained vector, bounds and plain
data, and the families' parameter classes built on it — their vectors laid out exactly as 0.4 stored them."""

import json
import math

import numpy as np
import pytest

from daskgp.advgp.model import ADVGPParams
from daskgp.compute.operator import KernelOperator
from daskgp.core.plaindata import decode, encode
from daskgp.gpc.ep import GPCParams
from daskgp.inducing.features import GlobalParams, global_blocks, vector_bounds
from daskgp.model.kernels import make_kernel
from daskgp.model.params import Block, Parameters, Structure, exact_structure


@pytest.fixture
def rng():
    return np.random.default_rng(57)


def test_blocks_map_values_to_the_unconstrained_line_and_back(rng):
    s = Structure((Block("Z", (3, 2)), Block("variance", (), "log"), Block("ls", (2,), "log"),
                   Block("U", (3, 3), "triu"), Block("shift", ())))
    Z, U = rng.normal(size=(3, 2)), np.triu(rng.normal(size=(3, 3)))
    values = {"Z": Z, "variance": 2.5, "ls": np.array([0.5, 4.0]), "U": U, "shift": -1.25}
    v = s.flatten(values)
    assert s.size == v.size == 6 + 1 + 2 + 6 + 1
    expect = np.concatenate([Z.ravel(), [math.log(2.5)], np.log([0.5, 4.0]), U[np.triu_indices(3)], [-1.25]])
    assert np.array_equal(v, expect)
    back = s.unflatten(v)
    assert list(back) == s.names
    assert np.array_equal(back["Z"], Z) and np.array_equal(back["U"], U) and back["shift"] == -1.25
    assert back["variance"] == math.exp(math.log(2.5)) and isinstance(back["variance"], float)
    assert np.array_equal(back["ls"], np.exp(np.log([0.5, 4.0])))
    assert v[s.slice("ls")].tolist() == np.log([0.5, 4.0]).tolist()
    # the lower triangle of a triangular block is not a parameter: it comes back zero
    assert s.flatten({**values, "U": U + np.tril(np.ones((3, 3)), -1)}).tolist() == v.tolist()


def test_scalars_go_through_math_and_arrays_through_numpy(rng):
    # the rule that keeps every family's stored vector bit for bit (see the module docstring): numpy's
    # vectorised exp differs from libm's in the last bit for some arguments; a scalar block must use libm's
    x = rng.uniform(-20, 20, 5000)
    scalar, array = Block("s", (), "log"), Block("a", (5000,), "log")
    assert [scalar.unpack(np.array([e])) for e in x] == [math.exp(e) for e in x]
    assert np.array_equal(array.unpack(x), np.exp(x))
    y = np.exp(x)
    assert [float(scalar.pack(e)[0]) for e in y] == [math.log(e) for e in y]
    assert np.array_equal(array.pack(y), np.log(y))


def test_a_scalar_block_reads_back_through_the_exp_it_names(rng):
    x = rng.uniform(-20, 20, 5000)
    libm, vec = Block("s", (), "log"), Block("s", (), "log", scalar_exp="numpy")
    assert [vec.unpack(np.array([e])) for e in x] == [float(np.exp(e)) for e in x]
    assert all(abs(libm.unpack(np.array([e])) / vec.unpack(np.array([e])) - 1) < 3e-16 for e in x)
    with pytest.raises(ValueError, match="scalar_exp must be 'math' or 'numpy'"):
        Block("s", (), "log", scalar_exp="mpmath")
    assert [b.scalar_exp for b in GlobalParams(np.zeros((2, 1)), 1.0, [1.0], noise=0.1).structure().blocks
            if b.shape == ()] == ["numpy", "numpy"]
    assert all(b.scalar_exp == "math" for b in GPCParams(np.zeros((2, 1)), 1.0, [1.0]).structure().blocks)


def test_bounds_and_names_follow_the_vector():
    s = Structure((Block("Z", (2, 2)), Block("variance", (), "log", (-1.0, 2.0)),
                   Block("U", (2, 2), "triu", (-3.0, 3.0))))
    b = s.bounds()
    assert b.shape == (s.size, 2)
    assert np.isinf(b[:4]).all() and b[4].tolist() == [-1.0, 2.0] and (b[5:] == [-3.0, 3.0]).all()
    assert s.entry_names() == ["Z_0_0", "Z_0_1", "Z_1_0", "Z_1_1", "variance", "U_0_0", "U_0_1", "U_1_1"]


@pytest.mark.parametrize("bad, match", [
    (lambda: Block("a", (2,), "softplus"), "transform"),
    (lambda: Block("U", (2, 3), "triu"), "square"),
    (lambda: Block("a", (), "log", (1.0, 1.0)), "low < high"),
    (lambda: Structure((Block("a"), Block("a"))), "unique"),
    (lambda: Structure((Block("a", (2,)),)).unflatten(np.zeros(3)), r"shape \(2,\)"),
    (lambda: Structure((Block("a", (2,)),)).flatten({}), "missing"),
    (lambda: Structure((Block("a", (2,)),)).flatten({"a": np.zeros(3)}), "shape"),
    (lambda: Structure((Block("a", (2,)),))["b"], "no parameter block"),
])
def test_a_wrong_structure_or_vector_is_refused_in_one_line(bad, match):
    with pytest.raises((ValueError, KeyError), match=match):
        bad()


def test_a_structure_travels_as_plain_data():
    s = Structure(global_blocks(4, 3))
    back = Structure.from_plain(json.loads(json.dumps(s.to_plain())))
    assert back == s and np.array_equal(back.bounds(), s.bounds())
    with pytest.raises(ValueError, match="list of blocks"):
        Structure.from_plain({"name": "Z"})


def test_the_sparse_families_vectors_are_laid_out_as_0_4_stored_them(rng):
    m, q = 4, 3
    Z, ls = rng.normal(size=(m, q)), np.exp(rng.normal(size=q))
    g = GlobalParams(Z, 1.7, ls, noise=0.2, kernel="matern52")
    layout = np.concatenate([Z.ravel(), [math.log(1.7)], np.log(ls), [math.log(0.2)]])
    assert np.array_equal(g.to_vector(), layout)
    moved = g.with_vector(layout + 0.5)
    # SGPR's and the GPLVM's scalars are read back through numpy's exp, as since 0.3 (ADVGP's and GPC's
    # through the C library's): every family's fits stay bit for bit
    assert moved.kernel == "matern52" and moved.variance == float(np.exp(np.float64(math.log(1.7) + 0.5)))
    assert np.array_equal(moved.Z, Z + 0.5) and moved.noise == float(np.exp(np.float64(math.log(0.2) + 0.5)))
    again = GlobalParams.from_vector(layout, m, q, kernel="matern52")
    assert again.kernel == "matern52" and np.array_equal(again.to_vector(), g.with_vector(layout).to_vector())
    legacy_bounds = np.array([(-np.inf, np.inf)] * (m * q) + [(-13.8, 13.8)] + [(-9.2, 30.0)] * q
                             + [(-18.4, 5.0)])
    assert np.array_equal(vector_bounds(m, q), legacy_bounds) and np.array_equal(g.bounds(), legacy_bounds)

    c = GPCParams(Z, 1.7, ls, "matern32")
    assert np.array_equal(c.to_vector(), layout[:-1])
    assert c.structure().names == ["Z", "variance", "lengthscales"]
    assert c.with_vector(layout[:-1]).kernel == "matern32"

    k = m
    mu, U = rng.normal(size=k), np.triu(rng.normal(size=(k, k)))
    a = ADVGPParams(Z, 1.7, ls, 0.2, mu, U, feature_map="nystrom")
    assert np.array_equal(a.to_vector(), np.concatenate([layout, mu, U[np.triu_indices(k)]]))
    assert a.n_kernel == layout.size and a.structure().slice("mu") == slice(layout.size, layout.size + k)
    b = a.with_vector(a.to_vector())
    assert b.feature_map == "nystrom" and np.array_equal(b.U, U) and np.array_equal(b.mu, mu)
    assert isinstance(a, Parameters) and isinstance(g, Parameters) and isinstance(c, Parameters)


@pytest.mark.parametrize("ard, d", [(False, 3), (True, 3)])
def test_the_exact_gps_phi_is_the_operators_log_parameters(rng, ard, d):
    X = rng.normal(size=(20, d))
    k = make_kernel("rbf", variance=1.3, lengthscale=0.7, ard=ard, n_dims=d)
    op = KernelOperator(X, k, 0.05)
    s = exact_structure(k.lengthscale.size)
    values = {"variance": k.variance, "lengthscale": k.lengthscale, "noise": op.noise}
    assert np.array_equal(s.flatten(values), op.log_params)
    assert s.entry_names() == op.param_names
    named = s.unflatten(op.log_params)
    assert named["noise"] == pytest.approx(0.05, rel=1e-15)


def test_parameters_travel_as_plain_data(rng):
    a = ADVGPParams(rng.normal(size=(2, 2)), 1.0, [1.0, 2.0], 0.1, np.zeros(2), np.eye(2), kernel="matern32")
    back = ADVGPParams.from_plain(decode(json.loads(json.dumps(encode(a.to_plain())))))
    assert np.array_equal(back.to_vector(), a.to_vector()) and back.kernel == "matern32"
