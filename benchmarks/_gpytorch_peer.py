"""GPyTorch side of benchmarks/exact_gradient.py. Runs in its own Python 3.11 venv (torch 2.13 CPU,
gpytorch), launched by the benchmark; prints one JSON line.

    python _gpytorch_peer.py DATA.npz --seeds 5 --threads 2 [--cg-tolerance 0.01] [--float64]

Gradient of log p(y|θ) (the sum, not GPyTorch's per-point average) w.r.t. log θ = [log s2, log l, log noise]
at θ given in the npz, by GPyTorch's ExactMarginalLogLikelihood backward (CG-based for n > 800).
"""

import argparse
import json
import resource
import time

import gpytorch
import numpy as np
import torch


class _GP(gpytorch.models.ExactGP):
    def __init__(self, X, y, likelihood):
        super().__init__(X, y, likelihood)
        self.mean = gpytorch.means.ZeroMean()
        self.cov = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean(x), self.cov(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cg-tolerance", type=float, default=None, help="default: GPyTorch's own (1)")
    ap.add_argument("--float64", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = torch.float64 if a.float64 else torch.float32
    d = np.load(a.data)
    X, y = torch.tensor(d["X"], dtype=dtype), torch.tensor(d["y"], dtype=dtype)
    s2, ell, noise = (float(v) for v in d["theta"])
    n = X.shape[0]
    lik = gpytorch.likelihoods.GaussianLikelihood()
    model = _GP(X, y, lik).to(dtype)
    model.cov.outputscale = s2
    model.cov.base_kernel.lengthscale = ell
    lik.noise = noise
    model.train()
    lik.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    params = [(model.cov, "outputscale"), (model.cov.base_kernel, "lengthscale"), (lik.noise_covar, "noise")]
    ctx = gpytorch.settings.cg_tolerance(a.cg_tolerance or 1.0)  # 1.0 is GPyTorch's own default
    runs = []
    with ctx:
        for seed in range(a.seeds):
            torch.manual_seed(seed)
            model.zero_grad()
            t0 = time.perf_counter()
            loss = -mll(model(X), y) * n
            loss.backward()
            secs = time.perf_counter() - t0
            grad = []
            for mod, name in params:
                raw = getattr(mod, f"raw_{name}").detach()
                theta = getattr(mod, f"raw_{name}_constraint").transform(raw)
                # softplus constraints: dθ/draw = sigmoid(raw); d/dlog θ = θ · (d/draw) / sigmoid(raw)
                g_raw = -getattr(mod, f"raw_{name}").grad.detach()
                grad.append(float((theta * g_raw / torch.sigmoid(raw)).sum()))
            runs.append({"seed": seed, "seconds": secs, "grad": grad})
    print(json.dumps({"runs": runs, "dtype": str(dtype), "cg_tolerance": a.cg_tolerance or 1.0,
                      "gpytorch": gpytorch.__version__, "torch": torch.__version__, "threads": a.threads,
                      "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))


if __name__ == "__main__":
    main()
