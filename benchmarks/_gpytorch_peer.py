"""GPyTorch side of benchmarks/exact_gradient.py. Runs in its own Python 3.11 venv (torch 2.13 CPU,
gpytorch), launched by the benchmark; prints one JSON line.

    python _gpytorch_peer.py DATA.npz --seeds 5 --threads 2 [--cg-tolerance 0.01] [--float64]
        [--trace-samples 10] [--precond-size 15] [--max-cg-iterations 1000] [--first-call]
        [--device cuda] [--cholesky]

Gradient of log p(y|θ) (the sum, not GPyTorch's per-point average) w.r.t. log θ = [log s2, log l, log noise]
at θ given in the npz, by GPyTorch's ExactMarginalLogLikelihood backward (CG-based for n > 800). Its
accuracy settings are GPyTorch's own: ``cg_tolerance`` (default 1), ``num_trace_samples`` (the probes of
the log-determinant's derivative, default 10), ``max_preconditioner_size`` (the pivoted-Cholesky rank,
default 15), ``max_cg_iterations`` (default 1000). With ``--first-call`` one untimed gradient runs first and
its seconds are reported apart, so that every timed seed is a steady-state one (as on daskgp's side).
``--device cuda`` runs on the GPU (timings after ``torch.cuda.synchronize()``); ``--cholesky`` raises
``max_cholesky_size`` above n, so that GPyTorch factorises K exactly instead of running CG.
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
    ap.add_argument("--trace-samples", type=int, default=None, help="default: GPyTorch's own (10)")
    ap.add_argument("--precond-size", type=int, default=None, help="default: GPyTorch's own (15)")
    ap.add_argument("--max-cg-iterations", type=int, default=None, help="default: GPyTorch's own (1000)")
    ap.add_argument("--first-call", action="store_true", help="time one untimed first call apart")
    ap.add_argument("--device", default="cpu", help="torch device: cpu or cuda")
    ap.add_argument("--cholesky", action="store_true", help="exact Cholesky, not CG")
    a = ap.parse_args()
    dev = torch.device(a.device)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    torch.set_num_threads(a.threads)
    dtype = torch.float64 if a.float64 else torch.float32
    d = np.load(a.data)
    X, y = torch.tensor(d["X"], dtype=dtype, device=dev), torch.tensor(d["y"], dtype=dtype, device=dev)
    s2, ell, noise = (float(v) for v in d["theta"])
    n = X.shape[0]
    lik = gpytorch.likelihoods.GaussianLikelihood()
    model = _GP(X, y, lik).to(device=dev, dtype=dtype)
    model.cov.outputscale = s2
    model.cov.base_kernel.lengthscale = ell
    lik.noise = noise
    model.train()
    lik.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    params = [(model.cov, "outputscale"), (model.cov.base_kernel, "lengthscale"), (lik.noise_covar, "noise")]
    from contextlib import ExitStack

    runs, first = [], None
    with ExitStack() as stack:
        stack.enter_context(gpytorch.settings.cg_tolerance(a.cg_tolerance or 1.0))  # 1.0: GPyTorch's default
        if a.trace_samples:
            stack.enter_context(gpytorch.settings.num_trace_samples(a.trace_samples))
        if a.precond_size:
            stack.enter_context(gpytorch.settings.max_preconditioner_size(a.precond_size))
        if a.max_cg_iterations:
            stack.enter_context(gpytorch.settings.max_cg_iterations(a.max_cg_iterations))
        if a.cholesky:
            stack.enter_context(gpytorch.settings.max_cholesky_size(10 * n))
        if a.first_call:
            torch.manual_seed(10_000)
            model.zero_grad()
            sync()
            t0 = time.perf_counter()
            (-mll(model(X), y) * n).backward()
            sync()
            first = time.perf_counter() - t0
        for seed in range(a.seeds):
            torch.manual_seed(seed)
            model.zero_grad()
            sync()
            t0 = time.perf_counter()
            loss = -mll(model(X), y) * n
            loss.backward()
            sync()
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
                      "trace_samples": a.trace_samples or 10, "precond_size": a.precond_size or 15,
                      "max_cg_iterations": a.max_cg_iterations or 1000, "first_call_seconds": first,
                      "gpytorch": gpytorch.__version__, "torch": torch.__version__, "threads": a.threads,
                      "device": str(dev), "cholesky": a.cholesky,
                      "gpu_peak_bytes": torch.cuda.max_memory_allocated() if dev.type == "cuda" else None,
                      "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))


if __name__ == "__main__":
    main()
