"""Stationary covariance functions with parameters in log space.

Every kernel here has the form k(x, x') = s2 · f(r²), r² = Σ_j ((x_j − x'_j) / l_j)², so the derivative
with respect to a log-lengthscale is ∂k/∂log l_j = s2 · g(r²) · Δz_j², with Δz_j = (x_j − x'_j) / l_j and g a
kernel-specific profile. The kernel operator uses that identity to turn every derivative product into
matrix products with one extra block G = s2 · g(r²) (for the RBF, G = K), never forming per-dimension
derivative blocks.

Array code is written against the array's own namespace (``array_api_compat.array_namespace``), so the
same functions run on numpy, cupy and ``array_api_strict`` arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from array_api_compat import array_namespace

__all__ = ["Kernel", "RBF", "Matern32", "Matern52", "make_kernel", "ard_kernel", "kernel_name", "KERNELS"]


def _as_positive(name: str, value) -> np.ndarray:
    v = np.atleast_1d(np.asarray(value, dtype=np.float64))
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name} must be a positive scalar or 1-D array, got shape {v.shape}")
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {v.tolist()}")
    return v


@dataclass(frozen=True, eq=False)
class Kernel:
    """Base class. ``variance`` s2 > 0 (units of y²), ``lengthscale`` l > 0 (units of x; one per input
    dimension when ``ard``). Instances are immutable: ``with_log_params`` returns a new kernel."""

    variance: float = 1.0
    lengthscale: np.ndarray | float = 1.0
    ard: bool = False

    name = "kernel"
    title = "kernel"  # for people: menus and plot labels
    g_is_k = False  # whether the derivative block G equals K (then a cached K serves as G: no second pass)

    def __post_init__(self):
        s2 = _as_positive("variance", self.variance)
        if s2.size != 1:
            raise ValueError("variance must be a scalar")
        ell = _as_positive("lengthscale", self.lengthscale)
        if not self.ard and ell.size != 1:
            raise ValueError("an isotropic kernel takes one lengthscale; pass ard=True for one per dimension")
        object.__setattr__(self, "variance", float(s2[0]))
        object.__setattr__(self, "lengthscale", ell)

    # --- parameters -------------------------------------------------------------------------------
    @property
    def n_params(self) -> int:
        return 1 + self.lengthscale.size

    @property
    def param_names(self) -> list[str]:
        if self.ard:
            return ["variance"] + [f"lengthscale_{j}" for j in range(self.lengthscale.size)]
        return ["variance", "lengthscale"]

    @property
    def log_params(self) -> np.ndarray:
        """(p,) unconstrained parameters: [log s2, log l_1, ...]."""
        return np.concatenate([[math.log(self.variance)], np.log(self.lengthscale)])

    def with_log_params(self, log_params) -> Kernel:
        lp = np.asarray(log_params, dtype=np.float64)
        if lp.shape != (self.n_params,):
            raise ValueError(f"expected {self.n_params} log-parameters, got shape {lp.shape}")
        if not np.all(np.isfinite(lp)):
            raise ValueError(f"log-parameters must be finite, got {lp.tolist()}")
        return type(self)(variance=float(np.exp(lp[0])), lengthscale=np.exp(lp[1:]), ard=self.ard)

    def check_dims(self, d: int) -> None:
        if self.ard and self.lengthscale.size != d:
            raise ValueError(f"ARD kernel has {self.lengthscale.size} lengthscales but X has {d} columns")

    # --- profiles f(r²) and g(r²), overridden by each kernel ---------------------------------------
    def _profiles(self, xp, r2, need_g: bool):
        raise NotImplementedError

    # --- block evaluation ---------------------------------------------------------------------------
    def scale(self, X):
        """Z = X / l, (n, d) in the namespace of X."""
        xp = array_namespace(X)
        ell = xp.asarray(self.lengthscale, dtype=X.dtype)
        return X / ell if self.ard else X / ell[0]

    @staticmethod
    def sqdist(Z1, Z2):
        """(n1, n2) squared Euclidean distances, clipped at 0 against round-off."""
        xp = array_namespace(Z1, Z2)
        d2 = xp.sum(Z1 * Z1, axis=1)[:, None] + xp.sum(Z2 * Z2, axis=1)[None, :] - 2.0 * (Z1 @ Z2.T)
        return xp.clip(d2, 0.0, None)

    def blocks_from_scaled(self, Z1, Z2, need_g: bool = False):
        """From scaled inputs: (K, G, R²) for one block; G is None unless ``need_g``."""
        xp = array_namespace(Z1, Z2)
        r2 = self.sqdist(Z1, Z2)
        f, g = self._profiles(xp, r2, need_g)
        s2 = self.variance
        return s2 * f, (None if g is None else s2 * g), r2

    def __call__(self, X1, X2=None):
        """K(X1, X2), (n1, n2), without noise."""
        X2 = X1 if X2 is None else X2
        K, _, _ = self.blocks_from_scaled(self.scale(X1), self.scale(X2))
        return K

    def diag(self, X):
        """(n,) prior variances k(x, x) = s2."""
        xp = array_namespace(X)
        return xp.full((X.shape[0],), self.variance, dtype=X.dtype)

    def gradients(self, X1, X2=None):
        """(p, n1, n2) derivatives ∂K(X1, X2)/∂log θ_j in the order of ``param_names``."""
        X2 = X1 if X2 is None else X2
        xp = array_namespace(X1, X2)
        Z1, Z2 = self.scale(X1), self.scale(X2)
        K, G, r2 = self.blocks_from_scaled(Z1, Z2, need_g=True)
        out = [K]
        if self.ard:
            for j in range(Z1.shape[1]):
                diff = Z1[:, j][:, None] - Z2[:, j][None, :]
                out.append(G * diff * diff)
        else:
            out.append(G * r2)
        return xp.stack(out)


    # --- numpy fast path: in place on preallocated tiles (the operator's hot loop) --------------------
    # Fresh large allocations cost page faults that dominate here, so every tile reuses the workspace.
    def augmented(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(A, B), each (n, d+2), with A_a·B_b = −r²_ab / 2: one matrix product per tile gives −r²/2."""
        Z = np.asarray(self.scale(np.asarray(X)))
        h = -0.5 * np.einsum("ij,ij->i", Z, Z)[:, None]
        one = np.ones_like(h)
        return np.hstack([Z, h, one]), np.hstack([Z, one, h])

    def tile_numpy(self, Ai, Bt, ws: dict, need_g: bool, out=None):
        """(K, G, H) for one tile from augmented inputs, H = −r²/2, computed in the workspace ``ws``
        (dict of equal-shape float64 arrays 'H', 'K', 'G', 'E', and optionally a float32 'F' for a float32
        ``out``); K goes to ``out`` when given."""
        H = ws["H"]
        np.matmul(Ai, Bt.T, out=H)
        np.minimum(H, 0.0, out=H)
        K = ws["K"] if out is None else out
        G = self._profiles_inplace(H, K, ws, need_g)
        return K, G, H

    def _profiles_inplace(self, H, K, ws, need_g):
        raise NotImplementedError


class RBF(Kernel):
    """Squared exponential: f = exp(−r²/2), g = f."""

    name = "rbf"
    title = "RBF"
    g_is_k = True

    def _profiles(self, xp, r2, need_g):
        f = xp.exp(-0.5 * r2)
        return f, (f if need_g else None)

    def _profiles_inplace(self, H, K, ws, need_g):
        if need_g:  # keep H (−r²/2) for the lengthscale derivative
            np.exp(H, out=K)
            K *= self.variance
            return K
        H += math.log(self.variance)
        if K.dtype == np.float32 and "F" in ws:
            # float32 rows (a sampler's cache): the exponential in float32, six times faster than float64's
            # on this machine; H rounded to float32 first moves K by ≤ (1 + |H|)·6e-8 relative, the size of
            # the rounding the float32 rows already carry wherever K is not negligible
            F = ws["F"]
            np.copyto(F, H, casting="same_kind")
            np.exp(F, out=K)
        else:
            np.exp(H, out=K)
        return None


class Matern32(Kernel):
    """Matérn ν=3/2: f = (1 + √3 r) e^{−√3 r}, g = 3 e^{−√3 r}."""

    name = "matern32"
    title = "Matérn 3/2"

    def _profiles(self, xp, r2, need_g):
        sr = math.sqrt(3.0) * xp.sqrt(r2)
        e = xp.exp(-sr)
        return (1.0 + sr) * e, (3.0 * e if need_g else None)

    def _profiles_inplace(self, H, K, ws, need_g):
        E = ws["E"]
        np.multiply(H, -6.0, out=E)
        np.sqrt(E, out=E)  # √3 r
        np.add(E, 1.0, out=K)
        np.negative(E, out=E)
        np.exp(E, out=E)
        K *= E
        K *= self.variance
        if need_g:
            G = ws["G"]
            np.multiply(E, 3.0 * self.variance, out=G)
            return G
        return None


class Matern52(Kernel):
    """Matérn ν=5/2: f = (1 + √5 r + 5r²/3) e^{−√5 r}, g = (5/3)(1 + √5 r) e^{−√5 r}."""

    name = "matern52"
    title = "Matérn 5/2"

    def _profiles(self, xp, r2, need_g):
        sr = math.sqrt(5.0) * xp.sqrt(r2)
        e = xp.exp(-sr)
        f = (1.0 + sr + (5.0 / 3.0) * r2) * e
        return f, ((5.0 / 3.0) * (1.0 + sr) * e if need_g else None)

    def _profiles_inplace(self, H, K, ws, need_g):
        E = ws["E"]
        np.multiply(H, -10.0, out=E)
        np.sqrt(E, out=E)  # √5 r
        np.multiply(H, -10.0 / 3.0, out=K)  # 5r²/3
        K += E
        K += 1.0
        G = None
        if need_g:
            G = ws["G"]
            np.add(E, 1.0, out=G)
        np.negative(E, out=E)
        np.exp(E, out=E)
        K *= E
        K *= self.variance
        if need_g:
            G *= E
            G *= (5.0 / 3.0) * self.variance
        return G


KERNELS = {cls.name: cls for cls in (RBF, Matern32, Matern52)}  # the one list of kernel names


def make_kernel(name: str, *, variance=1.0, lengthscale=1.0, ard: bool = False, n_dims: int | None = None):
    """Kernel by name ('rbf' | 'matern32' | 'matern52'); with ``ard`` and a scalar lengthscale, one per
    input dimension (``n_dims`` of them)."""
    try:
        cls = KERNELS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; choose one of {sorted(KERNELS)}") from None
    ell = np.atleast_1d(np.asarray(lengthscale, dtype=np.float64))
    if ard and ell.size == 1:
        if n_dims is None:
            raise ValueError("an ARD kernel needs n_dims (or one lengthscale per dimension)")
        ell = np.full(n_dims, ell[0])
    return cls(variance=variance, lengthscale=ell, ard=ard)


def ard_kernel(name: str, variance, lengthscales) -> Kernel:
    """The kernel named ``name`` with variance ``variance`` and one lengthscale per input dimension (the
    (d,) array ``lengthscales``, d = 1 included): what a fitted estimator's ``kernel_`` is."""
    return make_kernel(name, variance=variance, lengthscale=np.atleast_1d(lengthscales), ard=True,
                       n_dims=np.size(lengthscales))


def kernel_name(kernel) -> str:
    """The registry name of an estimator's ``kernel=`` argument: a name of
    :data:`KERNELS` ('rbf', 'matern32', 'matern52', any case) or a kernel object of
    those classes (its type counts; its hyperparameters are learnt). Raises ValueError for anything else."""
    if isinstance(kernel, Kernel):
        return type(kernel).name
    if isinstance(kernel, str) and kernel.lower() in KERNELS:
        return kernel.lower()
    raise ValueError(f"kernel must be one of {sorted(KERNELS)} or a kernel object of daskgp.model.kernels, "
                     f"got {kernel!r}")
