"""``daskgp doctor``: what this machine offers daskgp, and one pass of the exact-GP path on each device.

It reports the Python stack and the GPU stack (cupy, dask-cuda, CUDA devices and their memory), starts a
Dask cluster (a LocalCUDACluster when the GPU stack is complete, else a CPU LocalCluster, or the scheduler
given), and runs on a worker of it, once per device it has ('cpu' always, 'gpu' when the workers have one):

1. one covariance matrix–vector product K V (V: 8 columns), fresh and then from the cached kernel rows;
2. one stochastic gradient of log p(y|θ) (4 probes drawn on the host from a fixed seed, CG to 1e-8);
3. a 20-iteration SGLD chain on the GP hyperparameter posterior (Filippone & Engler 2015), same seeds.

Every device's numbers are compared with the CPU ones (the same probes and draws, so they must agree to the
solves' tolerance) and, with ``--json PATH``, everything goes to a JSON file. A user with a GPU confirms the
GPU path with one command: ``daskgp doctor --device gpu``.
"""

from __future__ import annotations

import json
import platform
import time

import numpy as np

__all__ = ["environment_report", "device_checks", "doctor"]

# agreement asked of a device against the CPU: the solves stop at 1e-8 relative residual, the chain's 20
# steps then amplify the differences a little; rounding on another device (FMA, reductions) stays far below
TOLERANCE = {"cmvp": 1e-10, "gradient": 1e-5, "draws": 1e-5}
REPORT_KIND = "daskgp.doctor-report"  # the marker of a report (an earlier one may be replaced, nothing else)


def _version(module: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return None


def environment_report() -> dict:
    """Python, numpy, dask, array-api-compat versions; cupy / dask-cuda presence; CUDA devices with name and
    memory (GiB); which device 'auto' would choose here and why."""
    from ..compute.cluster import choose_device

    gpus, gpu_error = [], None
    try:
        import cupy

        for i in range(cupy.cuda.runtime.getDeviceCount()):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            gpus.append({"index": i, "name": name, "memory_gib": round(props["totalGlobalMem"] / 2**30, 1)})
    except Exception as e:  # ImportError, or a CUDA runtime error on a machine without a driver
        gpu_error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".strip()
    chosen, why = choose_device("auto")
    return {"python": platform.python_version(), "platform": platform.platform(),
            "packages": {p: _version(p) for p in ("daskgp", "numpy", "scipy", "dask", "distributed",
                                                   "array-api-compat", "cupy-cuda12x", "cupy", "dask-cuda")},
            "gpus": gpus, "gpu_error": gpu_error, "auto_device": chosen, "auto_reason": why}


def device_checks(X, y, device: str, n_iter: int = 20, seed: int = 0) -> dict:
    """The three checks on ``device`` ('cpu' | 'gpu') in this process (a Dask task on a worker): timings in
    seconds and the numbers to compare (host numpy). X (n, d), y (n,) standardised, float64."""
    from ..compute.backend import resolve_device, to_host
    from ..compute.operator import KernelOperator
    from ..exact.marginal import log_marginal_gradient
    from ..exact.posterior import GPPosterior
    from ..mcmc.samplers import StepSchedule, sgld
    from ..model.kernels import make_kernel

    where = resolve_device(device)
    out = {"device": where}
    kernel = make_kernel("rbf", lengthscale=2.0)
    V = np.random.default_rng(seed).standard_normal((X.shape[0], 8))
    with KernelOperator(X, kernel, 0.3, mode="local", device=where, cache=True) as op:
        out["array_type"] = f"{type(op.X).__module__}.{type(op.X).__name__}"
        t0 = time.perf_counter()
        KV = op.matmul(V)
        _sync(KV)
        out["cmvp_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        _sync(op.matmul(V))
        out["cmvp_cached_seconds"] = time.perf_counter() - t0
        out["cmvp"] = to_host(KV)
        t0 = time.perf_counter()
        est = log_marginal_gradient(op, y, n_probes=4, solver="cg", tol=1e-8, rng=seed)
        out["gradient_seconds"] = time.perf_counter() - t0
        out["gradient"], out["cg_iterations"] = to_host(est.grad), est.cg_iterations.tolist()
        post = GPPosterior(op, y, n_probes=4, redraw_every=10, rng=seed + 1, solver="cg", tol=1e-8)
        t0 = time.perf_counter()
        res = sgld(post.stochastic_grad, np.log([1.0, 2.0, 0.3]), n_iter, batch=10, rng=seed + 2,
                   schedule=StepSchedule(1e-3, 5e-4, n_iter))
        out["sampler_seconds"] = time.perf_counter() - t0
        out["draws"] = res.draws
    return out


def _sync(a) -> None:
    """Wait for a device array's computation (cupy runs asynchronously), so that timings are real."""
    from ..compute.backend import is_cupy

    if is_cupy(a):
        import cupy

        cupy.cuda.Device().synchronize()


def _rel(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def doctor(client, X, y, devices, n_iter: int = 20) -> dict:
    """Run :func:`device_checks` for each of ``devices`` on a worker of ``client``; the CPU run is the
    reference. Returns the report: per device its timings, array type and relative differences from the CPU
    ('ok' when within :data:`TOLERANCE`)."""
    runs = {}
    for dev in devices:
        runs[dev] = client.submit(device_checks, X, y, dev, n_iter, pure=False).result()
    ref = runs["cpu"]
    report = {}
    for dev, r in runs.items():
        diffs = {k: _rel(r[k], ref[k]) for k in TOLERANCE}
        report[dev] = {"array_type": r["array_type"],
                       "seconds": {k: r[f"{k}_seconds"] for k in ("cmvp", "cmvp_cached", "gradient",
                                                                   "sampler")},
                       "cg_iterations": r["cg_iterations"], "relative_difference_from_cpu": diffs,
                       "ok": all(diffs[k] <= TOLERANCE[k] for k in TOLERANCE),
                       "gradient": r["gradient"].tolist(), "last_draw": r["draws"][-1].tolist()}
    for dev in report:  # speed-ups against the CPU, per check
        report[dev]["speedup_vs_cpu"] = {k: report["cpu"]["seconds"][k] / max(v, 1e-12)
                                         for k, v in report[dev]["seconds"].items()}
    return report


def doctor_command(args) -> int:
    """The CLI entry: prints the environment and a table, and writes the report to ``args.json`` when given
    (by the rule of :func:`daskgp.core.files.check_destination`); 0 when every device agrees with the CPU, 1
    otherwise."""
    from ..compute.cluster import borrowed_client, choose_device, cluster_workers
    from ..core.validation import check_int
    from .cli.common import check_out_path, dataset_from_args

    check_int("--rows", args.rows, 50)
    check_int("--iterations", args.iterations, 1)
    if args.json is not None:
        check_out_path(args.json, REPORT_KIND, args.overwrite, (".json",), flag="--json")
    env = environment_report()
    if args.device == "gpu" and args.scheduler is None:
        choose_device("gpu")  # one clear error, before any cluster starts, when the GPU stack is missing
    ds, _ = dataset_from_args(args)
    rows = min(args.rows, ds.n)
    X, y = np.ascontiguousarray(ds.X_std[:rows]), np.ascontiguousarray(ds.y_std[:rows])
    print(f"daskgp doctor: Python {env['python']}, numpy {env['packages']['numpy']}, "
          f"dask {env['packages']['dask']}")
    gpus = ", ".join(f"{g['name']} ({g['memory_gib']} GiB)" for g in env["gpus"]) or "none"
    print(f"GPUs: {gpus}" + (f"  [{env['gpu_error']}]" if env["gpu_error"] else ""))
    print(f"device 'auto' here: {env['auto_device']} ({env['auto_reason']})")
    devices = ["cpu"] + (["gpu"] if args.device == "gpu" or (args.device == "auto"
                                                              and env["auto_device"] == "gpu") else [])
    with borrowed_client(None, args.scheduler, n_workers=1, threads_per_worker=1,
                         device="gpu" if "gpu" in devices and args.scheduler is None else "cpu",
                         timeout=args.timeout) as client:
        print(f"dask cluster: {len(cluster_workers(client))} worker(s) at "
              f"{client.scheduler.address}; {ds.name}, first {rows} rows; {args.iterations} SGLD iterations",
              flush=True)
        report = doctor(client, X, y, devices, args.iterations)
    print(f"\n{'device':7} {'array':28} {'CMVP s':>8} {'cached s':>9} {'grad s':>8} {'SGLD s':>8} "
          f"{'max rel. diff vs cpu':>21} {'ok':>4}")
    for dev, r in report.items():
        s = r["seconds"]
        diff = max(r["relative_difference_from_cpu"].values())
        print(f"{dev:7} {r['array_type']:28} {s['cmvp']:8.3f} {s['cmvp_cached']:9.3f} {s['gradient']:8.3f} "
              f"{s['sampler']:8.3f} {diff:21.2e} {'yes' if r['ok'] else 'NO':>4}")
    if devices == ["cpu"]:
        print("no GPU run: " + ("this machine has no usable GPU stack" if env["auto_device"] == "cpu"
                                else "pass --device gpu or auto"))
    if args.json is not None:
        from ..core.files import MARK, write_atomically

        out = {MARK: REPORT_KIND, "environment": env, "data": {"name": ds.name, "rows": rows},
               "iterations": args.iterations, "tolerance": TOLERANCE, "devices": report}
        write_atomically(args.json, json.dumps(out, indent=2).encode("utf-8"))
        print(f"wrote {args.json}")
    return 0 if all(r["ok"] for r in report.values()) else 1
