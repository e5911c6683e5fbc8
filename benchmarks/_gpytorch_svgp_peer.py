"""GPyTorch side of benchmarks/advgp_flights.py. Runs in its own Python 3.11 venv (torch 2.13 CPU, gpytorch),
launched by the benchmark; prints one JSON line.

    python _gpytorch_svgp_peer.py DATA.npz --budget 600 --batch 5000 --threads 2

Stochastic variational GP regression (Hensman et al. 2013) as GPyTorch's documentation sets it up: an
``ApproximateGP`` with a Cholesky variational distribution over m inducing values, learned inducing
locations (started at the npz's Z, the same k-means centres daskgp starts from), a constant mean, a scaled
RBF-ARD kernel, ``VariationalELBO`` on shuffled minibatches and Adam (lr 0.01) on all parameters, in
GPyTorch's default float32 (or ``--dtype float64``). The data in the npz are standardised; the test RMSE
is reported in y units (× y_scale). The clock stops while the test RMSE is measured (every ``--eval-every``
training seconds).
"""

import argparse
import json
import time

import gpytorch
import numpy as np
import torch


class _SVGP(gpytorch.models.ApproximateGP):
    """GPyTorch's SVGP as its documentation sets it up; also the classifier peer's (with a zero mean)."""

    def __init__(self, Z, mean=None):
        dist = gpytorch.variational.CholeskyVariationalDistribution(Z.shape[0])
        strategy = gpytorch.variational.VariationalStrategy(self, Z, dist, learn_inducing_locations=True)
        super().__init__(strategy)
        self.mean = gpytorch.means.ConstantMean() if mean is None else mean
        self.cov = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=Z.shape[1]))

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean(x), self.cov(x))


def _rmse(model, lik, Xte, yte, y_scale) -> float:
    model.eval()
    lik.eval()
    with torch.no_grad(), gpytorch.settings.fast_pred_var():
        mean = torch.cat([lik(model(Xte[a:a + 10_000])).mean for a in range(0, len(Xte), 10_000)])
    model.train()
    lik.train()
    return float(torch.sqrt(torch.mean((mean - yte) ** 2))) * y_scale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--budget", type=float, default=600.0, help="training seconds")
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-every", type=float, default=10.0)
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
    y_scale = float(d["y_scale"])
    model, lik = _SVGP(torch.tensor(d["Z"], dtype=dt)), gpytorch.likelihoods.GaussianLikelihood()
    model.train()
    lik.train()
    opt = torch.optim.Adam([*model.parameters(), *lik.parameters()], lr=a.lr)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=len(y))
    curve = [(0.0, _rmse(model, lik, Xte, yte, y_scale))]
    trained, steps, epochs, next_eval = 0.0, 0, 0, a.eval_every
    while trained < a.budget:
        perm = torch.randperm(len(y))
        epochs += 1
        for s in range(0, len(y), a.batch):
            idx = perm[s:s + a.batch]
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = -mll(model(X[idx]), y[idx])
            loss.backward()
            opt.step()
            trained += time.perf_counter() - t0
            steps += 1
            if trained >= next_eval or trained >= a.budget:
                curve.append((trained, _rmse(model, lik, Xte, yte, y_scale)))
                next_eval += a.eval_every
            if trained >= a.budget:
                break
    print(json.dumps({"curve": curve, "steps": steps, "epochs": epochs, "seconds_per_step": trained / steps,
                      "batch": a.batch, "lr": a.lr, "threads": a.threads, "dtype": a.dtype,
                      "m": int(d["Z"].shape[0]), "gpytorch": gpytorch.__version__,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
