"""ULISSE's bias and cost, settled on the same probes: the paper's exponential roulette against the residual
roulette (the default since issue 30), both against CG to ULISSE's own target tolerance.

    python benchmarks/ulisse_bias.py [--cases house_8L,concrete,house4k] [--seeds N] [--redo]

For every seed one set of Rademacher probes; on those probes CG to tol 1e-6 (what ULISSE's expectation is)
and ULISSE with each roulette (fresh roulette draws), all with the same pivoted-Cholesky preconditioner built
once at θ. The difference ULISSE − CG per seed holds only the roulette's error, so its mean over seeds,
with the standard error of that mean, is the bias. Cases:

* house_8L — all 22,784 rows at θ = (s2, ℓ, noise) = (1, 2, 0.3) with the settings of
  ``benchmarks/exact_gradient.py``'s ULISSE row (4 probes, es_tol 3e-2, rank 1,000): where the issue saw
  ULISSE − CG of one sign in 5/5 seeds.
* concrete, house4k (4,096 rows of house_8L, fidelity.py's subset) — at the exact posterior mode
  (``fidelity.json``) with SGHMC's settings for n ≤ 5,000 (32 probes, es_tol 1e-2, rank 300). These also
  answer "ULISSE or CG to 1e-6 for SGHMC at n ≤ 5,000": seconds per gradient × λ, the largest eigenvalue of
  the gradients' covariance over seeds whitened by the exact posterior sds (a sampler's step shrinks as 1/λ,
  so s × λ is what a unit of sampler progress costs).

Resumable: every finished seed is written to benchmarks/results/ulisse_bias.json at once, and a rerun
continues where it stopped (each segment's wall time is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_results, write_results  # noqa: E402

OUT = HERE / "results" / "ulisse_bias.json"
CASES = {
    "house_8L": dict(theta=(1.0, 2.0, 0.3), probes=4, es_tol=3e-2, rank=1000, seeds=20),
    "concrete": dict(mode=True, probes=32, es_tol=1e-2, rank=300, seeds=60),
    "house4k": dict(mode=True, probes=32, es_tol=1e-2, rank=300, seeds=40),
}
SOLVERS = {"cg": dict(solver="cg", tol=1e-6),
           "ulisse_exponential": dict(solver="ulisse", tol=1e-6, roulette="exponential"),
           "ulisse_residual": dict(solver="ulisse", tol=1e-6, roulette="residual"),
           "ulisse_increment": dict(solver="ulisse", tol=1e-6, roulette="increment")}


def _setup(name: str):
    sys.path.insert(0, str(HERE))
    from fidelity import case_data

    import daskgp as dg

    cfg = CASES[name]
    X, y = case_data(name)
    if cfg.get("mode"):
        ref = json.loads((HERE / "results" / "fidelity.json").read_text())["references"][name]
        phi, sd = np.array(ref["phi"]), np.array(ref["sd"])
    else:
        phi, sd = np.log(np.array(cfg["theta"])), None
    op = dg.KernelOperator(X, dg.make_kernel("rbf").with_log_params(phi[:-1]), float(np.exp(phi[-1])),
                           mode="local")
    t0 = time.perf_counter()
    precond = dg.PivotedCholesky(op, rank=min(cfg["rank"], len(y) // 2))
    return op, y, precond, time.perf_counter() - t0, phi, sd


def run_case(name: str, n_seeds: int, results: dict) -> None:
    import daskgp as dg
    from daskgp.core.random import rademacher

    cfg = CASES[name]
    rec = results["cases"].setdefault(name, {"settings": cfg, "seeds": [], "segments": []})
    done = {s["seed"] for s in rec["seeds"]}
    todo = [s for s in range(n_seeds) if s not in done]
    if not todo:
        return
    t_seg = time.time()
    segment = {"seeds": [], "wall_seconds": 0.0}  # updated after every seed: a killed run keeps its record
    rec["segments"].append(segment)
    op, y, precond, t_pre, phi, sd = _setup(name)
    rec.update(n=int(op.n), phi=phi.tolist(), precond_seconds=t_pre,
               posterior_sd=None if sd is None else sd.tolist())
    for seed in todo:
        probes = rademacher(op.n, cfg["probes"], np.random.default_rng(seed))
        row = {"seed": seed}
        for i, (label, kw) in enumerate(SOLVERS.items()):
            kw = dict(kw, es_tol=cfg["es_tol"]) if kw["solver"] == "ulisse" else kw
            t0 = time.perf_counter()
            est = dg.log_marginal_gradient(op, y, probes=probes, precond=precond,
                                           rng=np.random.default_rng([seed, i]), **kw)
            row[label] = {"grad": est.grad.tolist(), "seconds": time.perf_counter() - t0,
                          "cg_iterations": est.cg_iterations.tolist()}
        rec["seeds"].append(row)
        segment["seeds"].append(seed)
        segment["wall_seconds"] = time.time() - t_seg
        print(f"{name} seed {seed}: " + ", ".join(
            f"{k} {np.round(np.array(row[k]['grad']) - row['cg']['grad'], 2).tolist()}"
            for k in SOLVERS if k != "cg"), flush=True)
        _write(results)
    _write(results)


def summarise(rec: dict) -> dict:
    """Bias per roulette (mean ± se of ULISSE − CG over seeds, and how many seeds had each sign), and the
    cost per solver (mean seconds, CG iterations, and with posterior sds λ and s × λ)."""
    rows = rec["seeds"]
    cg = np.array([r["cg"]["grad"] for r in rows])
    out = {"seeds": len(rows)}
    for label in SOLVERS:
        G = np.array([r[label]["grad"] for r in rows])
        secs = float(np.mean([r[label]["seconds"] for r in rows]))
        its = float(np.mean([max(r[label]["cg_iterations"]) for r in rows]))
        s = {"seconds_per_gradient": secs, "max_cg_iterations_mean": its}
        if label != "cg":
            D = G - cg
            se = D.std(axis=0, ddof=1) / np.sqrt(len(D))
            s.update(bias_mean=D.mean(axis=0).tolist(), bias_se=se.tolist(),
                     bias_z=(D.mean(axis=0) / se).tolist(), positive_seeds=(D > 0).sum(axis=0).tolist(),
                     roulette_sd=D.std(axis=0, ddof=1).tolist())
        if rec.get("posterior_sd") is not None and len(G) > 3:
            W = G * np.array(rec["posterior_sd"])  # the gradient in the posterior's whitened coordinates
            lam = float(np.linalg.eigvalsh(np.cov(W.T)).max())
            s.update(whitened_noise_lambda=lam, seconds_times_lambda=secs * lam)
        out[label] = s
    return out


def _write(results: dict) -> None:
    for rec in results["cases"].values():
        if len(rec["seeds"]) >= 2:
            rec["summary"] = summarise(rec)
    write_results(OUT, results)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="concrete,house4k,house_8L")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per case (default: the case's)")
    ap.add_argument("--redo", action="store_true", help="start afresh instead of continuing")
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    results = load_results(OUT, "ulisse_bias", a.redo)
    for name in a.cases.split(","):
        if name not in CASES:
            print(f"unknown case {name!r}: one of {', '.join(CASES)}", file=sys.stderr)
            return 2
        run_case(name, a.seeds or CASES[name]["seeds"], results)
    for name, rec in results["cases"].items():
        for label, s in rec.get("summary", {}).items():
            if isinstance(s, dict):
                print(name, label, {k: np.round(v, 3).tolist() for k, v in s.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
