"""GPyTorch SVGP trained as its experts train it: natural-gradient steps on q(u) and Adam on the rest
(issue 58, item 1). Runs in the GPyTorch venv (benchmarks/.gpytorch-venv, Python 3.11, torch CPU), launched by
benchmarks/ngd_peers.py; prints one JSON line.

    python _gpytorch_ngd_peer.py DATA.npz --task regression --budget 300 --batch 5000 --ngd-lr 0.1
    python _gpytorch_ngd_peer.py DATA.npz --task classification --budget 300 --batch 1000 --ngd-lr 0.1
    python _gpytorch_ngd_peer.py DATA.npz --task regression --check      # the peer's own correctness

Stochastic variational GP (Hensman et al. 2013; 2015 for classification) with q(u) in natural parameters
(``NaturalVariationalDistribution``; ``TrilNaturalVariationalDistribution`` for the Bernoulli likelihood,
GPyTorch's advice for non-conjugate likelihoods) updated by ``gpytorch.optim.NGD`` (Salimbeni et al. 2018),
and Adam (lr 0.01) on the kernel, mean, likelihood and inducing locations (started at the npz's Z, the k-means
centres daskgp starts from), float64 by default as daskgp is. For a non-conjugate likelihood the natural step
ramps log-linearly from 1e-4 to ``--ngd-lr`` over the first 5 steps, as Salimbeni et al. do. The two
optimisers' parameter sets are split by object (the variational distribution's parameters against every
other), never by name. Regression: constant mean, scaled RBF-ARD, Gaussian likelihood, test RMSE (in y units)
and mean test negative log predictive density; classification: zero mean, the kernel started at σ² = 1 and
lengthscales √d (daskgp's start), ``BernoulliLikelihood`` (the probit), test error and mean test NLL. The
clock stops while the test scores are measured (every ``--eval-every`` training seconds).

``--check`` (regression, a small set): with the npz's hyperparameters fixed, one full-batch natural step of
size 1 takes a Gaussian-likelihood q(u) to its optimum, where the ELBO equals the collapsed (Titsias) bound;
it prints both — the ELBO through GPyTorch and the bound written out here with the same K_mm jitter — and
the jitter, so that the caller can also compare daskgp's own bound at the same point.
"""

import argparse
import json
import math
import time

import gpytorch
import numpy as np
import torch


class NGDSVGP(gpytorch.models.ApproximateGP):
    def __init__(self, Z, classification: bool):
        m = Z.shape[0]
        dist = (gpytorch.variational.TrilNaturalVariationalDistribution(m) if classification
                else gpytorch.variational.NaturalVariationalDistribution(m))
        strategy = gpytorch.variational.VariationalStrategy(self, Z, dist, learn_inducing_locations=True)
        super().__init__(strategy)
        self.mean = gpytorch.means.ZeroMean() if classification else gpytorch.means.ConstantMean()
        self.cov = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=Z.shape[1]))

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean(x), self.cov(x))


def split_parameters(model, lik):
    """(q(u)'s natural parameters, everything else), by object identity."""
    dist = model.variational_strategy._variational_distribution
    natural = list(dist.parameters())
    ids = {id(p) for p in natural}
    rest = [p for p in [*model.parameters(), *lik.parameters()] if id(p) not in ids]
    return natural, rest


def scores(model, lik, Xte, yte, task: str, y_scale: float = 1.0):
    model.eval()
    lik.eval()
    with torch.no_grad():
        outs = [lik(model(Xte[a:a + 5000])) for a in range(0, len(Xte), 5000)]
    model.train()
    lik.train()
    if task == "regression":
        mean = torch.cat([o.mean for o in outs])
        var = torch.cat([o.variance for o in outs])
        rmse = float(torch.sqrt(torch.mean((mean - yte) ** 2))) * y_scale
        nlpd = float(torch.mean(0.5 * torch.log(2 * math.pi * var) + 0.5 * (yte - mean) ** 2 / var)
                     + math.log(y_scale))  # in y units
        return rmse, nlpd
    p = torch.cat([o.probs for o in outs]).double().clamp(1e-12, 1 - 1e-12)
    y = yte.double()
    nll = float(-torch.mean(y * torch.log(p) + (1 - y) * torch.log(1 - p)))
    return float(torch.mean(((p > 0.5).double() != y).double())), nll


def collapsed_bound(model, lik, X, y) -> float:
    """Titsias's bound log N(y | μ, Q_nn + σ²I) − tr(K_nn − Q_nn)/(2σ²), with K_mm's jitter as the
    variational strategy adds it, written out with dense matrices (a small set)."""
    with torch.no_grad():
        Z = model.variational_strategy.inducing_points
        kern = model.cov
        jitter = model.variational_strategy.jitter_val
        Kmm = kern(Z).to_dense() + jitter * torch.eye(Z.shape[0], dtype=Z.dtype)
        Kmn = kern(Z, X).to_dense()
        kdiag = kern(X, diag=True)
        L = torch.linalg.cholesky(Kmm)
        A = torch.linalg.solve_triangular(L, Kmn, upper=False)
        Q = A.T @ A
        s2 = lik.noise.squeeze()
        r = y - model.mean(X)
        C = Q + s2 * torch.eye(X.shape[0], dtype=X.dtype)
        dist = torch.distributions.MultivariateNormal(torch.zeros_like(r), covariance_matrix=C)
        return float(dist.log_prob(r) - (kdiag.sum() - torch.trace(Q)) / (2 * s2))


def check(d, dt) -> dict:
    X, y = torch.tensor(d["X"], dtype=dt), torch.tensor(d["y"], dtype=dt)
    model, lik = NGDSVGP(torch.tensor(d["Z"], dtype=dt), False), gpytorch.likelihoods.GaussianLikelihood()
    model.cov.outputscale = float(d["variance"])
    model.cov.base_kernel.lengthscale = torch.tensor(d["lengthscales"], dtype=dt)
    lik.noise = float(d["noise"])
    model.mean.constant.data.fill_(float(d["mean"]))
    model.train()
    lik.train()
    natural, _ = split_parameters(model, lik)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=len(y))
    ngd = gpytorch.optim.NGD(natural, num_data=len(y), lr=1.0)
    ngd.zero_grad()
    (-mll(model(X), y)).backward()
    ngd.step()  # Gaussian likelihood, whole batch, step 1: q(u) at its optimum
    with torch.no_grad():
        elbo = float(mll(model(X), y)) * len(y)
    # a second step from the optimum must not move it (the fixed point), the ELBO unchanged
    ngd.zero_grad()
    (-mll(model(X), y)).backward()
    ngd.step()
    with torch.no_grad():
        elbo2 = float(mll(model(X), y)) * len(y)
    return {"elbo": elbo, "elbo_after_second_step": elbo2, "collapsed": collapsed_bound(model, lik, X, y),
            "jitter": float(model.variational_strategy.jitter_val), "n": len(y), "m": int(d["Z"].shape[0]),
            "gpytorch": gpytorch.__version__, "torch": torch.__version__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--task", choices=("regression", "classification"), required=True)
    ap.add_argument("--budget", type=float, default=300.0, help="training seconds")
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--ngd-lr", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=0.01, help="Adam's, on every other parameter")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-every", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    dt = getattr(torch, a.dtype)
    torch.set_default_dtype(dt)  # the model's parameters and buffers too, not only the data
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    d = np.load(a.data)
    if a.check:
        print(json.dumps(check(d, dt)))
        return
    classification = a.task == "classification"
    X, y = torch.tensor(d["X"], dtype=dt), torch.tensor(d["y"], dtype=dt)
    Xte, yte = torch.tensor(d["Xte"], dtype=dt), torch.tensor(d["yte"], dtype=dt)
    y_scale = float(d["y_scale"]) if "y_scale" in d else 1.0
    model = NGDSVGP(torch.tensor(d["Z"], dtype=dt), classification)
    if classification:
        lik = gpytorch.likelihoods.BernoulliLikelihood()
        # daskgp's start: σ² = 1, every lengthscale √d (GPyTorch's 0.69 leaves a 784-pixel kernel at zero)
        model.cov.outputscale = 1.0
        model.cov.base_kernel.lengthscale = float(np.sqrt(X.shape[1]))
    else:
        lik = gpytorch.likelihoods.GaussianLikelihood()
    model.train()
    lik.train()
    natural, rest = split_parameters(model, lik)
    ngd = gpytorch.optim.NGD(natural, num_data=len(y), lr=a.ngd_lr)
    adam = torch.optim.Adam(rest, lr=a.lr)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=len(y))
    curve = [(0.0, *scores(model, lik, Xte, yte, a.task, y_scale))]
    trained, steps, epochs, next_eval = 0.0, 0, 0, a.eval_every
    diverged = None
    while trained < a.budget and diverged is None:
        perm = torch.randperm(len(y))
        epochs += 1
        for s in range(0, len(y), a.batch):
            idx = perm[s:s + a.batch]
            if classification and steps < 5:  # Salimbeni et al.'s ramp for a non-conjugate likelihood
                for g in ngd.param_groups:
                    g["lr"] = math.exp(math.log(1e-4) + (math.log(a.ngd_lr) - math.log(1e-4)) * steps / 4)
            t0 = time.perf_counter()
            ngd.zero_grad()
            adam.zero_grad()
            try:
                loss = -mll(model(X[idx]), y[idx])
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"the ELBO is {float(loss)}")
                loss.backward()
            except Exception as e:  # a natural step that left q(u) not positive definite, or NaN
                diverged = f"step {steps}: {type(e).__name__}: {str(e)[:200]}"
                break
            ngd.step()
            adam.step()
            trained += time.perf_counter() - t0
            steps += 1
            if trained >= next_eval or trained >= a.budget:
                curve.append((trained, *scores(model, lik, Xte, yte, a.task, y_scale)))
                next_eval += a.eval_every
            if trained >= a.budget:
                break
    names = ("test_rmse", "test_nlpd") if not classification else ("test_error", "test_nll")
    print(json.dumps({"curve": curve, names[0]: curve[-1][1], names[1]: curve[-1][2], "seconds": trained,
                      "steps": steps, "epochs": epochs, "seconds_per_step": trained / max(steps, 1),
                      "diverged": diverged, "task": a.task, "batch": a.batch, "ngd_lr": a.ngd_lr,
                      "adam_lr": a.lr, "threads": a.threads, "dtype": a.dtype, "m": int(d["Z"].shape[0]),
                      "variational": type(model.variational_strategy._variational_distribution).__name__,
                      "gpytorch": gpytorch.__version__, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
