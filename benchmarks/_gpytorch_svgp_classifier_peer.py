"""GPyTorch side of benchmarks/gpc.py. Runs in its own Python 3.11 venv (torch 2.13 CPU, gpytorch), launched
by the benchmark; prints one JSON line.

    python _gpytorch_svgp_classifier_peer.py DATA.npz --steps 2000 --batch 1000 --threads 2

Stochastic variational GP classification (Hensman, Matthews & Ghahramani 2015) as GPyTorch's documentation
sets it up: an ``ApproximateGP`` with a Cholesky variational distribution over m inducing values (started at
the npz's Z: the same k-means centres daskgp starts from), learned inducing locations, a zero mean, a scaled
RBF-ARD kernel started where daskgp starts (σ² = 1, lengthscales √d), ``BernoulliLikelihood`` (the probit,
as daskgp's), ``VariationalELBO`` on shuffled minibatches and Adam (lr 0.01), float32 or ``--dtype float64``.
X is standardised, labels are 0/1. Reports the test error and the mean test negative log-likelihood, and
their curve against training seconds (the clock stops while they are measured).
"""

import argparse
import json
import time

import gpytorch
import numpy as np
import torch
from _gpytorch_svgp_peer import _SVGP  # the regression peer's model (this script runs from benchmarks/)


def _scores(model, lik, Xte, yte):
    model.eval()
    lik.eval()
    with torch.no_grad():
        p = torch.cat([lik(model(Xte[a:a + 5000])).probs for a in range(0, len(Xte), 5000)]).double()
    model.train()
    lik.train()
    p = p.clamp(1e-12, 1 - 1e-12)
    y = yte.double()
    nll = float(-torch.mean(y * torch.log(p) + (1 - y) * torch.log(1 - p)))
    return float(torch.mean(((p > 0.5).double() != y).double())), nll


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--budget", type=float, default=None, help="stop after this many training seconds")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-every", type=float, default=10.0, help="training seconds between test scores")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    a = ap.parse_args()
    dt = getattr(torch, a.dtype)
    torch.set_default_dtype(dt)  # the model's parameters and buffers too, not only the data
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    d = np.load(a.data)
    X, y = torch.tensor(d["X"], dtype=dt), torch.tensor(d["y"], dtype=dt)
    Xte, yte = torch.tensor(d["Xte"], dtype=dt), torch.tensor(d["yte"], dtype=dt)
    model = _SVGP(torch.tensor(d["Z"], dtype=dt), mean=gpytorch.means.ZeroMean())
    lik = gpytorch.likelihoods.BernoulliLikelihood()
    # daskgp's starting point: σ² = 1, every lengthscale √d. GPyTorch's default (0.69) leaves a 784-pixel
    # kernel at exactly zero between distinct digits, and then no gradient ever moves it.
    model.cov.outputscale = 1.0
    model.cov.base_kernel.lengthscale = float(np.sqrt(X.shape[1]))
    model.train()
    lik.train()
    opt = torch.optim.Adam([*model.parameters(), *lik.parameters()], lr=a.lr)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=len(y))
    curve = [(0.0, *_scores(model, lik, Xte, yte))]
    trained, steps, next_eval = 0.0, 0, a.eval_every
    budget = a.budget if a.budget is not None else float("inf")
    while steps < a.steps and trained < budget:
        perm = torch.randperm(len(y))
        for s in range(0, len(y), a.batch):
            idx = perm[s:s + a.batch]
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = -mll(model(X[idx]), y[idx])
            loss.backward()
            opt.step()
            trained += time.perf_counter() - t0
            steps += 1
            if trained >= next_eval:
                curve.append((trained, *_scores(model, lik, Xte, yte)))
                next_eval += a.eval_every
            if steps >= a.steps or trained >= budget:
                break
    err, nll = _scores(model, lik, Xte, yte)
    curve.append((trained, err, nll))
    print(json.dumps({"test_error": err, "test_nll": nll, "seconds": trained, "steps": steps,
                      "curve": curve, "batch": a.batch, "lr": a.lr, "threads": a.threads, "dtype": a.dtype,
                      "m": int(d["Z"].shape[0]), "init": "variance 1, lengthscales sqrt(d)",
                      "gpytorch": gpytorch.__version__,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
