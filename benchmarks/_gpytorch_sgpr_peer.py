"""GPyTorch side of benchmarks/sgpr_flights.py. Runs in its own Python 3.11 venv (torch 2.13 CPU,
gpytorch), launched by the benchmark; prints one JSON line.

    python _gpytorch_sgpr_peer.py DATA.npz --reps 5 --threads 2

Titsias' collapsed bound with GPyTorch's single-process SGPR (``InducingPointKernel`` around a scaled
RBF-ARD kernel; ``ExactMarginalLogLikelihood`` adds the trace term), at the parameters in the npz (the
standardised data, Z, σ², l, noise variance). Reports the bound (GPyTorch's mll × n) and the seconds of one
bound + gradient evaluation (forward and backward), in float64 and float32.
"""

import argparse
import json
import time

import gpytorch
import numpy as np
import torch


class _SGPR(gpytorch.models.ExactGP):
    def __init__(self, X, y, Z, likelihood):
        super().__init__(X, y, likelihood)
        self.mean = gpytorch.means.ZeroMean()
        base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))
        self.cov = gpytorch.kernels.InducingPointKernel(base, inducing_points=Z, likelihood=likelihood)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean(x), self.cov(x))


def _evaluate(d, dtype, reps):
    X, y = torch.tensor(d["X"], dtype=dtype), torch.tensor(d["y"], dtype=dtype)
    Z = torch.tensor(d["Z"], dtype=dtype)
    lik = gpytorch.likelihoods.GaussianLikelihood()
    model = _SGPR(X, y, Z, lik).to(dtype)
    model.cov.base_kernel.outputscale = float(d["variance"])
    model.cov.base_kernel.base_kernel.lengthscale = torch.tensor(d["lengthscales"], dtype=dtype)[None, :]
    lik.noise = float(d["noise"])
    model.train()
    lik.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    n = X.shape[0]
    secs, bound = [], None
    for _ in range(reps):
        model.zero_grad()
        t0 = time.perf_counter()
        out = mll(model(X), y) * n
        out.backward()
        secs.append(time.perf_counter() - t0)
        bound = float(out.detach())
    return {"bound": bound, "seconds": secs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    d = np.load(a.data)
    res = {"float64": _evaluate(d, torch.float64, a.reps), "float32": _evaluate(d, torch.float32, a.reps),
           "gpytorch": gpytorch.__version__, "torch": torch.__version__, "threads": a.threads}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
