"""Adam (Kingma & Ba 2015, Algorithm 1), the first-order step the sparse families share: the EP-family
classifier ascends its evidence with it, ADVGP descends its negative ELBO with it (per-group step sizes).

Written here rather than taken from an autodiff library because the families compute their gradients by hand
(numpy, on the workers) and need the optimiser's state as plain arrays that a checkpoint stores and restores
bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Adam"]


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
