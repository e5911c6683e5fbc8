"""Is the default sampler's posterior the exact one at every n? (issue 28)

For each case — concrete (1,030 rows), synthetic GP draws at 4,096 and 8,192 rows with known
hyperparameters and low noise, 4,096- and 8,192-row subsets of house_8L, power_plant (9,568), house_8L
(22,784, reference from ``house8l_reference.json``, sampled with a fixed budget) — the exact reference
posterior (MAP by L-BFGS-B on the dense-Cholesky log posterior, Laplace covariance from central
differences of the exact gradient, as ``house8l_reference.py`` computes it) beside the default sampler's
(``daskgp.sample`` with every default: SGHMC, 4 chains, 2 local workers, ``target_ess`` 200 under a cap):
per parameter the mean gap in exact sd and the sd ratio; iterations and seconds per effective sample; the
run's own fidelity verdict (:mod:`daskgp.mcmc.fidelity`). Target: every mean within 0.2 sd and every sd
within ±15 % at every n.

    python benchmarks/fidelity.py [--cases synth4k,house8k,...] [--target-ess 200] [--cap 1500] [--redo]

Resumable: each reference and each case's result is written to ``benchmarks/results/fidelity.json`` as
soon as it exists, with its wall time, and a rerun skips what is there (``--redo`` recomputes the samples,
never the references). A case's run is a resumable zarr store under ``benchmarks/runs/``, packed into
``benchmarks/carried/`` after every committed block (:func:`_common.carry_run`) so that a case longer than a
session continues in the next one from a fresh clone; every sitting's wall time and draws are recorded under
``segments``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import resumable, sitting, write_results  # noqa: E402

OUT = HERE / "results" / "fidelity.json"
H_STEP = 1e-3
CASES = {  # name: (data set, rows or None for all, seed of the subset)
    "concrete": ("concrete", None),
    "house2k": ("house_8L", 2000),  # the small-n crossover (benchmarks/small_n_crossover.py)
    "power1k": ("power_plant", 1000),  # HMC's adaptation length (benchmarks/hmc_adaptation.py)
    "synth4k": ("synth", 4096),
    "house4k": ("house_8L", 4096),
    "synth8k": ("synth", 8192),
    "house8k": ("house_8L", 8192),
    "power2k": ("power_plant", 2000),  # issue 55's NUTS comparison sizes (benchmarks/nuts_fair.py)
    "power5k": ("power_plant", 5000),
    "power_plant": ("power_plant", None),
    "house_8L": ("house_8L", None),
}
# the synthetic cases: inputs N(0, I₄), an RBF GP draw of variance 1 and lengthscale 1.5, noise variance 0.01
SYNTH = {"d": 4, "variance": 1.0, "lengthscale": 1.5, "noise": 0.01}


def case_data(name: str):
    """(X, y) standardised, for a case: a data set's rows (a seeded subset, re-standardised) or a synthetic
    GP draw with the hyperparameters of :data:`SYNTH`."""
    os.environ.setdefault("DASKGP_DATA", str(HERE.parents[0].parent / "shared" / "data"))
    import daskgp as dg
    from daskgp.model.kernels import make_kernel

    source, n = CASES[name]
    if source == "synth":
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, SYNTH["d"]))
        k = make_kernel("rbf", lengthscale=SYNTH["lengthscale"], variance=SYNTH["variance"])
        K = np.asarray(k(X, X)) + 1e-8 * np.eye(n)
        y = np.linalg.cholesky(K) @ rng.standard_normal(n) + np.sqrt(SYNTH["noise"]) * rng.standard_normal(n)
    else:
        ds = dg.load(source)
        X, y = ds.X_std, ds.y_std
        if n is not None and n < len(y):
            idx = np.random.default_rng(0).choice(len(y), n, replace=False)
            X, y = X[idx], y[idx]
    return (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


def exact_reference(X, y) -> dict:
    """MAP (L-BFGS-B from φ = (0, 0, −2)) and Laplace covariance (central differences of the exact gradient,
    step 1e-3) of the default model (isotropic RBF, Gamma(2, 1) priors) by dense Cholesky."""
    import scipy.optimize

    from daskgp.core.priors import GammaPrior
    from daskgp.exact.posterior import central_hessian, exact_log_posterior
    from daskgp.model.kernels import make_kernel

    kern, prior = make_kernel("rbf", n_dims=X.shape[1]), GammaPrior(2.0, 1.0)

    def neg(phi):
        v, g = exact_log_posterior(X, y, kern, prior, phi)
        return -v, -g

    t0 = time.perf_counter()
    res = scipy.optimize.minimize(neg, np.array([0.0, 0.0, -2.0]), jac=True, method="L-BFGS-B")
    phi, p = res.x, res.x.size
    cov = np.linalg.inv(central_hessian(neg, phi, H_STEP))
    return {"phi": phi.tolist(), "cov": cov.tolist(), "sd": np.sqrt(np.diag(cov)).tolist(),
            "evaluations": int(res.nfev) + 2 * p, "seconds": time.perf_counter() - t0}


def compare(dt, ref: dict) -> dict:
    """Per parameter (log scale, where the Laplace approximation is made): the sampled mean's gap in exact
    sd and the sd ratio; and the run's ESS, iterations and seconds per effective sample, fidelity verdict."""
    import arviz as az

    from daskgp.mcmc.diagnostics import run_fidelity

    names = dt.attrs["param_names"]
    post = dt["posterior"].to_dataset()
    phi = np.stack([np.log(post[nm].values) for nm in names], axis=-1)  # (chains, draws, p)
    flat = phi.reshape(-1, len(names))
    mu, sd = np.asarray(ref["phi"]), np.asarray(ref["sd"])
    ess = az.ess(np.log(post)).to_array().values
    fid = run_fidelity(dt)
    C, D = phi.shape[:2]
    return {"names": names, "chains": C, "kept_draws": D, "warmup_draws": int(dt.attrs["warmup_draws"]),
            "mean_gap_sd": ((flat.mean(0) - mu) / sd).tolist(), "sd_ratio": (flat.std(0) / sd).tolist(),
            "ess_bulk": ess.tolist(), "iterations_per_ess": float(C * D / ess.min()),
            "seconds": float(dt.attrs["elapsed"]), "seconds_per_ess": float(dt.attrs["elapsed"] / ess.min()),
            "fidelity": None if fid is None else fid.to_dict(), "sampler": sampler_stats(dt),
            "warmup": {k: dt.attrs["warmup"].get(k) for k in ("cov_from", "iterations", "seconds")}}


def sampler_stats(dt) -> dict:
    """What sets the mixing, over the kept draws: per chain the median adapted step h (whitened time units)
    and the median share of the momentum refresh that the gradient noise takes (SGHMC's noise_fraction; the
    adaptation keeps it at most its budget, 0.5); the mean CG iterations and seconds per iteration."""
    stats = dt["sample_stats"].to_dataset()
    out = {}
    for name, how in (("step", "per_chain"), ("noise_fraction", "per_chain"), ("cg_iterations", "mean"),
                      ("seconds", "mean")):
        if name in stats:
            v = stats[name].values
            out[name] = np.median(v, axis=1).tolist() if how == "per_chain" else float(np.nanmean(v))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="concrete,synth4k,house4k,synth8k,house8k,power_plant")
    ap.add_argument("--target-ess", type=int, default=200)
    ap.add_argument("--cap", type=int, default=1500, help="iterations per chain at most")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--checkpoint-every", type=int, default=50,
                    help="iterations per committed block: what a stop can lose (the run is carried across "
                         "sessions in benchmarks/carried/ after every block)")
    ap.add_argument("--redo", action="store_true")
    args = ap.parse_args(argv)
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    results.setdefault("machine", {"cpus": os.cpu_count(), "python": platform.python_version(),
                                   "platform": platform.platform()})
    results.setdefault("references", {})
    results.setdefault("cases", {})

    def save():
        write_results(OUT, json.loads(json.dumps(results, default=float)))

    import daskgp as dg
    from daskgp.compute.cluster import close_client, get_client
    from daskgp.mcmc.warmup import warmup_path

    client = None
    runs = HERE / "runs"
    runs.mkdir(exist_ok=True)
    for name in args.cases.split(","):
        if name not in CASES:
            print(f"unknown case {name!r}: one of {', '.join(CASES)}", file=sys.stderr)
            return 2
        X, y = case_data(name)
        if name not in results["references"]:
            if name == "house_8L":
                ref = json.loads((HERE / "results" / "house8l_reference.json").read_text())["iso"]
                ref = {"phi": ref["phi_map"], "cov": ref["laplace_cov"], "sd": ref["laplace_sd"],
                       "from": "house8l_reference.json"}

            else:
                print(f"{name}: exact reference on {len(y)} rows …", flush=True)
                ref = exact_reference(X, y)
            results["references"][name] = {"n": len(y), **ref}
            save()
        if name in results["cases"] and not args.redo:
            continue
        client = client or get_client(n_workers=args.workers)
        out = runs / f"fidelity_{name}.zarr"
        if args.redo:
            for part in (out, Path(warmup_path(str(out)))):
                shutil.rmtree(part, ignore_errors=True)
            results.get("segments", {}).pop(name, None)
        # every segment (one sitting of this script on the case) with its wall time, updated at every block
        hooks, finish = sitting(out, results.setdefault("segments", {}).setdefault(name, []), save)
        print(f"{name}: sampling {len(y)} rows …", flush=True)
        if resumable(out):
            dt = dg.resume(str(out), X=X, y=y, client=client, **hooks)
        else:
            dt = dg.sample(X, y, out=str(out), client=client, target_ess=args.target_ess, n_iter=args.cap,
                           checkpoint_every=args.checkpoint_every, overwrite=True, **hooks)
        finish()
        row = compare(dt, results["references"][name])
        row["segment_wall_s"] = [g["wall_s"] for g in results["segments"][name]]
        row["n"] = len(y)
        row["target_met"] = bool(max(abs(v) for v in row["mean_gap_sd"]) <= 0.2
                                 and max(abs(v - 1) for v in row["sd_ratio"]) <= 0.15)
        results["cases"][name] = row
        save()
        print(name, json.dumps({k: row[k] for k in ("mean_gap_sd", "sd_ratio", "iterations_per_ess",
                                                    "seconds_per_ess", "target_met")}, default=float))
    results["target_met"] = bool(results["cases"]) and all(r["target_met"] for r in results["cases"].values())
    save()
    if client is not None:
        close_client(client)
    return 0


if __name__ == "__main__":
    sys.exit(main())
