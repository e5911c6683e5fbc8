"""Properties over generated inputs (hypothesis): every kernel's matrix is symmetric and positive
semi-definite, CG solves random SPD systems to its tolerance, and checkpoint plain data round-trips through
strict JSON bit for bit."""

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from daskgp import cg, make_kernel
from daskgp.core.plaindata import decode, encode
from daskgp.model.kernels import KERNELS

finite = st.floats(-5, 5, allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(KERNELS)), ard=st.booleans(),
       X=st.integers(1, 4).flatmap(lambda d: arrays(np.float64, st.tuples(st.integers(1, 25), st.just(d)),
                                                    elements=finite)),
       variance=st.floats(1e-2, 1e2), lengthscale=st.floats(0.1, 10.0))
def test_kernel_matrices_are_symmetric_and_psd(name, ard, X, variance, lengthscale):
    d = X.shape[1]
    k = make_kernel(name, variance=variance, lengthscale=lengthscale, ard=ard, n_dims=d)
    K = np.asarray(k(X, X))
    np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-12 * variance)
    # squared distances from ‖x‖² + ‖y‖² − 2xᵀy carry rounding of about ε‖x‖²/ℓ² (up to 1e-10 here), and
    # the Matérn kernels turn a tiny r² into 1 − O(r): the diagonal is the variance to 1e-9, not to ε
    np.testing.assert_allclose(np.diag(K), variance, rtol=1e-9)
    # the eigenvalues of a PSD matrix computed in floating point: not below −n·ε·‖K‖ (‖K‖ ≤ n·variance)
    n = len(X)
    assert np.linalg.eigvalsh(K).min() >= -n * np.finfo(float).eps * n * variance


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), k=st.integers(1, 3), seed=st.integers(0, 2**32 - 1),
       cond=st.floats(1.0, 1e6))
def test_cg_solves_random_spd_systems_to_its_tolerance(n, k, seed, cond):
    """A = Q diag(λ) Qᵀ with eigenvalues spread over [1, cond]: every column's relative residual reaches tol,
    and the error obeys ‖x − x*‖ ≤ cond·tol·‖x*‖ (a residual bound turned into an error bound by κ)."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * np.geomspace(1.0, cond, n)) @ Q.T
    A = 0.5 * (A + A.T)
    B = rng.standard_normal((n, k))
    tol = 1e-9
    res = cg(A, B, tol=tol)
    X = np.linalg.solve(A, B)
    assert res.converged.all()
    resid = np.linalg.norm(B - A @ res.x, axis=0) / np.linalg.norm(B, axis=0)
    assert (resid <= 10 * tol).all(), resid
    err = np.linalg.norm(res.x - X, axis=0) / np.linalg.norm(X, axis=0)
    assert (err <= 10 * cond * tol + 1e-12).all(), (err, cond)


plain = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | arrays(st.sampled_from([np.float64, np.float32, np.int64, np.int32, np.bool_, np.uint32]),
             st.tuples(st.integers(0, 3), st.integers(0, 3))),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and a.tobytes() == b.tobytes())
    if isinstance(a, float):
        return isinstance(b, float) and (a == b or (np.isnan(a) and np.isnan(b)))
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b)


@settings(max_examples=100, deadline=None)
@given(obj=plain)
def test_plain_data_round_trips_through_strict_json(obj):
    text = json.dumps(encode(obj), allow_nan=False)  # strict JSON: no NaN / Infinity literals
    assert _same(obj, decode(json.loads(text)))
