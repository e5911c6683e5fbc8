"""The optimisers every family shares, in one place.

- :class:`Adam` (Kingma & Ba 2015, Algorithm 1): the EP-family classifier ascends its evidence with it, ADVGP
  descends its negative ELBO with it (per-group step sizes);
- :class:`Adadelta` (Zeiler 2012): ADVGP's paper optimiser, whose per-coordinate rate is also the proximal
  step of its regularised coordinates (Peng et al. 2017, eq. 10);
- :func:`lbfgsb`: scipy's L-BFGS-B with the gradient returned by the objective, for every family's
  deterministic fits (SGPR's and the GPLVM's global step, the GPLVM's local and new-point steps, the exact
  GP's subset MAP).

Adam and ADADELTA are written here rather than taken from an autodiff library because the families compute
their gradients by hand (numpy, on the workers) and need the optimiser's state as plain arrays that a
checkpoint stores and restores bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Adam", "Adadelta", "lbfgsb"]


@dataclass
class Adam:
    """Adam's step for gradient g: lr·m̂/(√v̂ + ε) — add it to ascend, subtract it to descend. ``lr`` a scalar
    or one step size per coordinate (size,), in the units of the coordinates."""

    size: int
    lr: float | np.ndarray = 0.01
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    m: np.ndarray = None
    v: np.ndarray = None

    def __post_init__(self):
        self.m = np.zeros(self.size) if self.m is None else np.asarray(self.m, float)
        self.v = np.zeros(self.size) if self.v is None else np.asarray(self.v, float)

    def step(self, g) -> np.ndarray:
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * g
        self.v = self.b2 * self.v + (1 - self.b2) * g * g
        mh, vh = self.m / (1 - self.b1**self.t), self.v / (1 - self.b2**self.t)
        return self.lr * mh / (np.sqrt(vh) + self.eps)

    def to_dict(self) -> dict:
        return {"b1": self.b1, "b2": self.b2, "eps": self.eps, "t": self.t, "m": self.m.tolist(),
                "v": self.v.tolist()}

    @classmethod
    def from_dict(cls, d: dict, lr) -> Adam:
        return cls(len(d["m"]), lr, float(d["b1"]), float(d["b2"]), float(d["eps"]), int(d["t"]), d["m"],
                   d["v"])


@dataclass
class Adadelta:
    """ADADELTA (Zeiler 2012): per-coordinate steps from running averages of squared gradients and steps."""

    size: int
    rho: float = 0.95
    eps: float = 1e-6
    Eg2: np.ndarray = None
    Edx2: np.ndarray = None

    def __post_init__(self):
        self.Eg2 = np.zeros(self.size) if self.Eg2 is None else np.asarray(self.Eg2, float)
        self.Edx2 = np.zeros(self.size) if self.Edx2 is None else np.asarray(self.Edx2, float)

    def step(self, g) -> tuple[np.ndarray, np.ndarray]:
        """(Δ, rate): the step for gradient g (of the objective to minimise) and the per-coordinate rate
        Δ = −rate·g, which is the proximal step γ of the regularised coordinates."""
        self.Eg2 = self.rho * self.Eg2 + (1 - self.rho) * g * g
        rate = np.sqrt(self.Edx2 + self.eps) / np.sqrt(self.Eg2 + self.eps)
        delta = -rate * g
        self.Edx2 = self.rho * self.Edx2 + (1 - self.rho) * delta * delta
        return delta, rate

    def to_dict(self) -> dict:
        return {"rho": self.rho, "eps": self.eps, "Eg2": self.Eg2.tolist(), "Edx2": self.Edx2.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> Adadelta:
        return cls(len(d["Eg2"]), float(d["rho"]), float(d["eps"]), d["Eg2"], d["Edx2"])


def lbfgsb(fun, x0, bounds=None, max_iter: int | None = None, callback=None, **options):
    """Minimise ``fun(x) -> (f, ∇f)`` from x0 (k,) by scipy's L-BFGS-B within ``bounds`` (k pairs, None for
    unbounded), for at most ``max_iter`` iterations (None: scipy's default); ``callback(intermediate_result)``
    after each iteration; further ``options`` (ftol, gtol, …) go to scipy. Returns scipy's OptimizeResult."""
    import scipy.optimize

    if max_iter is not None:
        options["maxiter"] = int(max_iter)
    return scipy.optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds, callback=callback,
                                   options=options or None)
