import array_api_strict as xps
import numpy as np
import pytest

from daskgp.model.kernels import KERNELS, make_kernel

KERNEL_CASES = [("rbf", False), ("rbf", True), ("matern32", False), ("matern32", True),
                ("matern52", False), ("matern52", True)]


def _kernel(name, ard, d=3):
    ell = np.linspace(0.7, 1.6, d) if ard else 1.3
    return make_kernel(name, variance=0.8, lengthscale=ell, ard=ard)


@pytest.mark.parametrize("name,ard", KERNEL_CASES)
def test_gradients_match_finite_differences(name, ard, rng):
    X1, X2 = rng.standard_normal((17, 3)), rng.standard_normal((11, 3))
    k = _kernel(name, ard)
    dK = k.gradients(X1, X2)
    assert dK.shape == (k.n_params, 17, 11)
    h = 1e-6
    for j in range(k.n_params):
        lp_p, lp_m = k.log_params.copy(), k.log_params.copy()
        lp_p[j] += h
        lp_m[j] -= h
        fd = (k.with_log_params(lp_p)(X1, X2) - k.with_log_params(lp_m)(X1, X2)) / (2 * h)
        np.testing.assert_allclose(dK[j], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name,ard", KERNEL_CASES)
def test_known_values_and_symmetry(name, ard, rng):
    k = _kernel(name, ard)
    X = rng.standard_normal((9, 3))
    K = k(X)
    np.testing.assert_allclose(np.diag(K), 0.8)
    np.testing.assert_allclose(K, K.T, atol=1e-15)
    assert np.linalg.eigvalsh(K).min() > -1e-10
    # one pair by hand
    r = np.sqrt(np.sum(((X[0] - X[1]) / k.lengthscale) ** 2))
    ref = {"rbf": np.exp(-0.5 * r * r),
           "matern32": (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r),
           "matern52": (1 + np.sqrt(5) * r + 5 * r * r / 3) * np.exp(-np.sqrt(5) * r)}[name]
    assert K[0, 1] == pytest.approx(0.8 * ref, rel=1e-12)


@pytest.mark.parametrize("name,ard", KERNEL_CASES)
def test_numpy_fast_path_equals_generic(name, ard, rng):
    k = _kernel(name, ard)
    X1, X2 = rng.standard_normal((13, 3)), rng.standard_normal((21, 3))
    A, _ = k.augmented(X1)
    _, B = k.augmented(X2)
    ws = {n: np.empty((13, 21)) for n in ("H", "K", "G", "E", "T")}
    K, G, H = k.tile_numpy(A, B, ws, need_g=True)
    Kref, Gref, R2 = k.blocks_from_scaled(k.scale(X1), k.scale(X2), need_g=True)
    np.testing.assert_allclose(K, Kref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(G, Gref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(-2 * H, R2, rtol=1e-10, atol=1e-12)
    K2, G2, _ = k.tile_numpy(A, B, ws, need_g=False)
    np.testing.assert_allclose(K2, Kref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,ard", KERNEL_CASES)
def test_kernel_code_runs_on_array_api_strict(name, ard, rng):
    """The kernel code uses only the array API standard: it runs on array_api_strict arrays."""
    k = _kernel(name, ard)
    X1, X2 = rng.standard_normal((7, 3)), rng.standard_normal((5, 3))
    S1, S2 = xps.asarray(X1), xps.asarray(X2)
    K = k(S1, S2)
    dK = k.gradients(S1, S2)
    assert type(K).__module__.startswith("array_api_strict")
    np.testing.assert_allclose(np.asarray(K), k(X1, X2), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(dK), k.gradients(X1, X2), rtol=1e-13, atol=1e-15)
    assert np.asarray(k.diag(S1)).shape == (7,)


def test_log_params_roundtrip_and_names():
    k = make_kernel("matern52", variance=2.0, lengthscale=[1.0, 3.0], ard=True)
    assert k.param_names == ["variance", "lengthscale_0", "lengthscale_1"]
    k2 = k.with_log_params(k.log_params)
    assert k2.variance == pytest.approx(2.0)
    np.testing.assert_allclose(k2.lengthscale, [1.0, 3.0])
    assert set(KERNELS) == {"rbf", "matern32", "matern52"}


@pytest.mark.parametrize("kwargs,msg", [
    (dict(variance=0.0), "variance"), (dict(variance=-1.0), "variance"),
    (dict(lengthscale=0.0), "lengthscale"), (dict(lengthscale=float("nan")), "lengthscale"),
    (dict(lengthscale=[1.0, 2.0]), "isotropic"),
])
def test_bad_hyperparameters_raise(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        make_kernel("rbf", **kwargs)


def test_bad_kernel_name_and_dims():
    with pytest.raises(ValueError, match="unknown kernel"):
        make_kernel("linear")
    k = make_kernel("rbf", lengthscale=[1.0, 2.0], ard=True)
    with pytest.raises(ValueError, match="2 lengthscales but X has 3"):
        k.check_dims(3)
    with pytest.raises(ValueError, match="finite"):
        k.with_log_params([0.0, np.inf, 0.0])
