"""The exact-GP gradient at matched accuracy: daskgp against GPyTorch as error-against-seconds curves.

    python benchmarks/exact_gradient_sweep.py [--seeds 3] [--sides daskgp,gpytorch] [--redo]

house_8L (all 22,784 rows, standardised), isotropic RBF, θ = (s2, ℓ, noise) = (1, 2, 0.3), the exact
gradient from benchmarks/results/exact_gradient.json (dense Cholesky). Each side sweeps the settings its
own experts would turn to buy accuracy, each configuration in its own process, ``--seeds`` timed gradients
after one untimed first call (reported apart, on both sides):

* daskgp: probes N_r ∈ {4, 16, 64} × solver {ULISSE (default roulette, es_tol 1e-2), CG to 1e-6}, the
  rank-1,000 pivoted-Cholesky preconditioner built at θ inside every timed gradient; float64.
* GPyTorch 1.15 (torch 2.13 CPU, its own Python 3.11 venv): ``cg_tolerance`` ∈ {1 (its default), 0.1,
  0.01}, ``num_trace_samples`` ∈ {10 (default), 64}, ``max_preconditioner_size`` 15 (default) and 100;
  float32, its default. Its float64 is not run at this n: the float32 peak is 11.9 GB and float64 doubles
  every n×n buffer, beyond this 24 GB machine (an estimate from the measured float32 peak, not a run).

``--rows N`` runs the same sweep on a fixed random subset of N rows (seed 0) with its own exact gradient
(dense Cholesky, computed once) and GPyTorch in float64 as well as float32 (its defaults, the tolerances 0.1
and 0.01, and the setting most accurate at full n), into benchmarks/results/exact_gradient_sweep_rowsN.json:
where float64 fits, the two precisions side by side.

Writes benchmarks/results/exact_gradient_sweep.json: every point (seconds mean ± sd over seeds, relative
error ‖g − g_exact‖/‖g_exact‖ mean ± sd, first-call seconds, peak RSS), and for every daskgp point the
cheapest GPyTorch point whose mean error is equal or lower: ``ratio`` = daskgp seconds ÷ its seconds
(None when no GPyTorch point got that accurate). Resumable: finished points are kept and skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "exact_gradient_sweep.json"
THETA = (1.0, 2.0, 0.3)
DASKGP = {f"{solver}_{nr}": dict(n_probes=nr, solver=solver, **({"es_tol": 1e-2} if solver == "ulisse"
                                                              else {}), tol=1e-6)
          for solver in ("ulisse", "cg") for nr in (4, 16, 64)}
GPYTORCH = {f"f32_tol{tol}_t{ts}_p{ps}": ["--cg-tolerance", str(tol), "--trace-samples", str(ts),
                                          "--precond-size", str(ps)]
            for tol, ts, ps in ((1.0, 10, 15), (0.1, 10, 15), (0.01, 10, 15), (1.0, 64, 15),
                                (0.1, 64, 15), (0.01, 64, 15), (0.01, 64, 100))}
# on a subset (``--rows``, where float64's n×n buffers fit) each precision runs GPyTorch's defaults, the
# tolerances, and the setting that reached the lowest error in float32 at full n
SUBSET = ("f32_tol1.0_t10_p15", "f32_tol0.1_t10_p15", "f32_tol0.01_t10_p15", "f32_tol0.01_t64_p100")
GPYTORCH_SUBSET = {**{k: GPYTORCH[k] for k in SUBSET},
                   **{"f64" + k[3:]: GPYTORCH[k] + ["--float64"] for k in SUBSET}}


def _data(rows: int | None = None):
    """house_8L standardised; ``rows``: a fixed random subset of that many rows (seed 0)."""
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    import daskgp

    ds = daskgp.load("house_8L")
    if rows is None:
        return ds.X_std, ds.y_std
    idx = np.sort(np.random.default_rng(0).choice(len(ds.y_std), rows, replace=False))
    return ds.X_std[idx], ds.y_std[idx]


def worker_exact(rows: int) -> dict:
    """The exact gradient by dense Cholesky on the ``rows`` subset."""
    from exact_gradient import worker_exact as exact

    return exact(*_data(rows))


def worker(config: str, seeds: int, rows: int | None = None) -> dict:
    import daskgp

    X, y = _data(rows)
    kw = dict(DASKGP[config])
    op = daskgp.KernelOperator(X, daskgp.make_kernel("rbf", variance=THETA[0], lengthscale=THETA[1]),
                               THETA[2], mode="local")
    t0 = time.perf_counter()
    daskgp.log_marginal_gradient(op, y, rng=10_000, precond=daskgp.PivotedCholesky(op, rank=1000), **kw)
    first = time.perf_counter() - t0
    runs = []
    for seed in range(seeds):
        op.invalidate_cache()  # as if θ had changed: every kernel row is recomputed
        t0 = time.perf_counter()
        est = daskgp.log_marginal_gradient(op, y, rng=seed, precond=daskgp.PivotedCholesky(op, rank=1000),
                                           **kw)
        runs.append({"seed": seed, "seconds": time.perf_counter() - t0, "grad": est.grad.tolist(),
                     "cg_iterations": est.cg_iterations.tolist()})
    import resource

    return {"runs": runs, "first_call_seconds": first, "settings": DASKGP[config],
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def _points(side: dict, exact: np.ndarray) -> dict:
    for rec in side.values():
        secs = np.array([r["seconds"] for r in rec["runs"]])
        errs = np.array([np.linalg.norm(np.array(r["grad"]) - exact) / np.linalg.norm(exact)
                         for r in rec["runs"]])
        rec["summary"] = {"seconds_mean": float(secs.mean()), "seconds_sd": float(secs.std(ddof=1)),
                          "rel_error_mean": float(errs.mean()), "rel_error_sd": float(errs.std(ddof=1))}
    return side


def _cheapest(rec: dict, peers: dict) -> dict:
    """The cheapest peer point whose mean error is at most ``rec``'s, and daskgp's time ratio against it."""
    e = rec["summary"]["rel_error_mean"]
    ok = [(r["summary"]["seconds_mean"], k) for k, r in peers.items() if r["summary"]["rel_error_mean"] <= e]
    if not ok:
        return {"peer": None, "ratio": None, "note": "no GPyTorch setting in the sweep reached this error"}
    secs, peer = min(ok)
    return {"peer": peer, "peer_seconds": secs, "ratio": rec["summary"]["seconds_mean"] / secs}


def matched(results: dict) -> None:
    """Every daskgp point against the cheapest GPyTorch point at equal or lower error: any precision
    (``matched``) and, where both precisions ran, each apart (``matched_float32`` / ``matched_float64``)."""
    d, g = results.get("daskgp", {}), results.get("gpytorch", {})
    by_dtype = {dt: {k: r for k, r in g.items() if k.startswith(dt)} for dt in ("f32", "f64")}
    for rec in d.values():
        rec["matched"] = _cheapest(rec, g)
        if by_dtype["f64"]:
            rec["matched_float32"] = _cheapest(rec, by_dtype["f32"])
            rec["matched_float64"] = _cheapest(rec, by_dtype["f64"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sides", default="daskgp,gpytorch")
    ap.add_argument("--rows", type=int, default=None,
                    help="a fixed random subset of house_8L (then GPyTorch in float64 too; own results file)")
    ap.add_argument("--redo", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from exact_gradient import _gpytorch_python, _run_json

    out = OUT if a.rows is None else OUT.with_name(f"exact_gradient_sweep_rows{a.rows}.json")
    results = {} if a.redo or not out.exists() else json.loads(out.read_text())
    results.update(benchmark="exact_gradient_sweep", dataset="house_8L", n=a.rows or 22784, seeds=a.seeds,
                   theta=dict(zip(("variance", "lengthscale", "noise"), THETA, strict=True)),
                   machine={"cpus": os.cpu_count(), "platform": platform.platform(),
                            "python": platform.python_version()})
    me = [sys.executable, str(Path(__file__).resolve())]
    rows_arg = [] if a.rows is None else ["--rows", str(a.rows)]
    if a.rows is None:
        exact = np.array(json.loads((HERE / "results" / "exact_gradient.json").read_text())["exact"]["grad"])
    else:
        if "exact" not in results:
            print(f"exact Cholesky gradient on {a.rows} rows …", flush=True)
            results["exact"] = _run_json(me + ["--worker", "exact", *rows_arg], timeout=7200)
        exact = np.array(results["exact"]["grad"])
    results["exact_grad"] = exact.tolist()

    def save():
        for side in ("daskgp", "gpytorch"):
            _points(results.get(side, {}), exact)
        matched(results)
        from _common import write_results  # stamped with its provenance (benchmarks/claims.py)
        write_results(Path(out), results)
    if "daskgp" in a.sides:
        side = results.setdefault("daskgp", {})
        for name in DASKGP:
            if name in side:
                continue
            t0 = time.time()
            print(f"daskgp {name} …", flush=True)
            side[name] = _run_json(me + ["--worker", name, "--seeds", str(a.seeds), *rows_arg], timeout=3600)
            side[name]["segment_wall_seconds"] = time.time() - t0
            save()
    if "gpytorch" in a.sides:
        py = _gpytorch_python(None)
        side = results.setdefault("gpytorch", {})
        X, y = _data(a.rows)
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "house_8L.npz")
            np.savez(data, X=X, y=y, theta=np.array(THETA))
            configs = GPYTORCH if a.rows is None else GPYTORCH_SUBSET
            for name, extra in configs.items():
                if name in side:
                    continue
                t0 = time.time()
                print(f"gpytorch {name} …", flush=True)
                side[name] = _run_json([py, str(HERE / "_gpytorch_peer.py"), data, "--seeds", str(a.seeds),
                                        "--threads", "2", "--first-call", *extra], timeout=7200)
                side[name]["segment_wall_seconds"] = time.time() - t0
                save()
    save()
    for side in ("daskgp", "gpytorch"):
        for name, rec in results.get(side, {}).items():
            s = rec["summary"]
            print(f"{side:9} {name:24} {s['seconds_mean']:8.2f} s ± {s['seconds_sd']:5.2f}   error "
                  f"{s['rel_error_mean']:.4f} ± {s['rel_error_sd']:.4f}   {rec.get('matched', '')}")
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        wp = argparse.ArgumentParser()
        wp.add_argument("--worker")
        wp.add_argument("--seeds", type=int, default=3)
        wp.add_argument("--rows", type=int, default=None)
        w = wp.parse_args()
        print(json.dumps(worker_exact(w.rows) if w.worker == "exact" else worker(w.worker, w.seeds, w.rows)))
    else:
        raise SystemExit(main())
