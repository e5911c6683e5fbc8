"""daskgp's exact-posterior samplers against NUTS configured as its experts run it (issue 55, item 6), side by
side on this machine's 2 cores, end to end.

    python benchmarks/nuts_fair.py [--cases concrete] [--chains 4] [--target-ess 400] [--sides ...] [--redo]

The peer (benchmarks/_numpyro_peer.py, NumPyro in its own venv benchmarks/.numpyro-venv): the same model
(standardised data, isotropic RBF, Gamma(2, 1) priors on s2, ℓ, noise in log space with the Jacobian,
float64), NUTS with a **dense** mass matrix adapted in warmup (the posterior has a variance–lengthscale
ridge), target acceptance 0.8, 1,000 warmup and 1,000 kept iterations per chain (NumPyro's defaults), the
cheaper of two gradients of the same density — JAX autodiff through NumPyro's MultivariateNormal, or a
hand-written one (½ tr((ααᵀ − K⁻¹)∂K), K⁻¹ from the Cholesky factor) — measured first
(``nuts_gradient_cost``, beside daskgp's own exact gradient at the same size), and its chains **in
parallel**: two processes side by side, each pinned to one core with one XLA thread, each running half the
chains one after the other. NUTS's wall time is the slower process's.

daskgp's sides, each with its own 2-worker local cluster of one thread per worker, run to a target ESS (bulk
and tail, every parameter; R-hat < 1.01): 'hmc' (``method='hmc'``, the exact gradient with an accept step)
and 'sghmc' (the stochastic-gradient default). Per side: wall time end to end (warmup included), min ESS,
max R-hat, seconds per ESS, and means and sds against NUTS's. ``ratio_<side>`` = its s/ESS ÷ NUTS's (issue
55's target: ≤ 1 at every n). Where NUTS to convergence would take this machine hours to days (its
Cholesky gradient costs n³: 8× concrete's at 2,000 rows; concrete's run took about 20,000 gradients per
process), ``--sides nuts-extrapolated,sghmc`` measures its gradient's cost at that size and carries over
the gradients per ESS of a case where it ran (``--nuts-from``): ``ratio_<side>_extrapolated``, labelled so
(:func:`extrapolate_nuts`). ``--sides nuts-target,...`` runs NUTS (same model, gradient, dense mass matrix,
two pinned processes) to daskgp's own stopping rule instead of a fixed length: a warmup of ``--warmup``
iterations per chain (Stan's windowed schedule fits 500 exactly: 75 + 25 + 50 + 100 + 200 + 50), then kept
draws checked every 25 per chain against the same ESS and R-hat target, in resumable steps whose NUTS states
are carried (benchmarks/carried/nuts_target_CASE_K.npz) — NUTS end to end at sizes where a session is too
short for it (:func:`run_nuts_target`). Resumable per side and per NUTS process (benchmarks/runs/); writes
benchmarks/results/nuts_fair.json after every step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import (  # noqa: E402
    CARRIED,
    carry_run,
    discard_run,
    load_results,
    resumable,
    sitting,
    stop_on_signals,
    write_results,
)
from nuts_peer import NAMES, RUNS, diagnostics, numpyro_python  # noqa: E402

OUT = HERE / "results" / "nuts_fair.json"
RESULTS: dict = {}
SINGLE_THREAD = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
                 "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _save() -> None:
    write_results(OUT, RESULTS)


def _json_line(proc_out: str) -> dict:
    return json.loads(proc_out.strip().splitlines()[-1])


def gradient_costs(name: str, X, y, rec: dict) -> None:
    """Seconds per gradient of NUTS's two gradients (one thread) and of daskgp's exact one (one BLAS
    thread), at the same φ; the values must agree."""
    if "gradient_cost" in rec:
        return
    data = RUNS / f"nuts_{name}_data.npz"
    reps = 10 if len(y) <= 2000 else 3  # a gradient at 9,568 rows costs seconds
    cmd = [numpyro_python(), str(HERE / "_numpyro_peer.py"), str(data), str(RUNS / "unused.npz"),
           "--gradient-cost", str(reps)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env={**os.environ, **SINGLE_THREAD})
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    nuts = _json_line(r.stdout)
    from threadpoolctl import threadpool_limits

    from daskgp.mcmc.config import SamplerConfig
    from daskgp.mcmc.segments import _exact_target

    f = _exact_target(X, y, SamplerConfig(method="hmc"))
    phi = np.log([2.0, 1.0, 0.1])
    with threadpool_limits(1, "blas"):
        v, g = f(phi)
        t0 = time.perf_counter()
        for _ in range(reps):
            f(phi)
        ours = (time.perf_counter() - t0) / reps
    rec["gradient_cost"] = {**nuts, "daskgp_seconds_per_gradient": ours, "daskgp_value": v,
                            "daskgp_grad": g.tolist(),
                            "note": "one thread each; NumPyro's values are potentials (−log p): their signs "
                                    "are opposite to daskgp's"}
    _save()


def run_nuts(name: str, rec: dict, chains: int, seed: int, warmup: int, samples: int) -> None:
    if "nuts" in rec:
        return
    cost = rec["gradient_cost"]
    hand_cheaper = cost["hand_seconds_per_gradient"] < cost["autodiff_seconds_per_gradient"]
    gradient = "hand" if hand_cheaper else "autodiff"
    data = RUNS / f"nuts_{name}_data.npz"
    per = chains // 2
    runs = rec.setdefault("nuts_processes", {})
    todo = [k for k in range(2) if str(k) not in runs or not (RUNS / f"nuts_fair_{name}_{k}.npz").exists()]
    procs = {}
    taskset = shutil.which("taskset")
    for k in todo:
        cmd = [numpyro_python(), str(HERE / "_numpyro_peer.py"), str(data),
               str(RUNS / f"nuts_fair_{name}_{k}.npz"), "--chains", str(per), "--seed", str(1000 * seed + k),
               "--warmup", str(warmup), "--samples", str(samples), "--gradient", gradient]
        if taskset:
            cmd = [taskset, "-c", str(k)] + cmd
        print(f"{name}: NUTS process {k} ({per} chains, {gradient} gradient) …", flush=True)
        procs[k] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, **SINGLE_THREAD})
    for k, p in procs.items():
        out, err = p.communicate(timeout=24 * 3600)
        if p.returncode:
            raise RuntimeError(f"NUTS process {k} failed: {err[-2000:]}")
        runs[str(k)] = {**_json_line(out), "gradient": gradient, "pinned": bool(taskset)}
        _save()
    ran = [runs[str(k)] for k in range(2)]
    phi = np.concatenate([np.load(RUNS / f"nuts_fair_{name}_{k}.npz")["phi"] for k in range(2)])
    wall = max(r["wall_seconds"] for r in ran)
    grads = sum(r["sampling_gradients"] + r["warmup_gradients"] for r in ran)
    rec["nuts"] = {**diagnostics(phi, wall), "gradient": gradient, "warmup_iterations": warmup,
                   "sampling_iterations": samples, "gradients": grads,
                   "divergences": sum(r["divergences"] for r in ran),
                   "step_sizes": [r["step_size"] for r in ran],
                   "versions": {k: ran[0][k] for k in ("jax", "numpyro")},
                   "note": "dense mass matrix; 2 processes side by side, each pinned to a core, "
                           f"{per} chains each one after the other; wall = the slower process"}
    rec["nuts"]["gradients_per_ess"] = grads / rec["nuts"]["min_ess"]
    _save()


def _cheaper_gradient(rec: dict) -> str:
    cost = rec["gradient_cost"]
    return "hand" if cost["hand_seconds_per_gradient"] < cost["autodiff_seconds_per_gradient"] else "autodiff"


def _nuts_draws(paths: list[Path]) -> tuple[np.ndarray, int]:
    """The kept draws of every chain of the carried NUTS states, cut to the shortest chain: (chains, draws,
    3) φ, and the warmup iterations the slowest chain has done."""
    phis, warm = [], []
    for path in paths:
        if not path.exists():
            return np.zeros((0, 0, 3)), 0
        z = np.load(path)
        for c in range(int(z["chains"])):
            phis.append(z[f"phi{c}"])
            warm.append(min(len(z[f"steps{c}"]), int(z["warmup"])))
    k = min(len(p) for p in phis)
    return np.stack([p[:k] for p in phis]), min(warm)


def run_nuts_target(name: str, rec: dict, chains: int, seed: int, warmup: int, target_ess: int, control,
                    target_rhat: float = 1.01, warmup_step: int = 100, sample_step: int = 25,
                    max_kept: int = 5000) -> bool:
    """NUTS to daskgp's stopping rule (min bulk and tail ESS ≥ ``target_ess`` for every parameter, R-hat <
    ``target_rhat``), checked every ``sample_step`` kept draws per chain after a ``warmup``-iteration warmup,
    in steps of two pinned processes side by side (``_numpyro_peer.py --advance``), each advancing its half
    of the chains and writing its NUTS states whole: a stopped sitting loses at most the step in flight.
    NUTS's wall time is that of an uninterrupted run: per process, one start-up and compilation plus its
    steps' compute seconds, the slower process's sum (its restarts between steps, which only resumability
    costs, are recorded apart). Returns whether the side is done."""
    key = "nuts_target"
    if key in rec:
        return True
    gradient = _cheaper_gradient(rec)
    per = chains // 2
    data = RUNS / f"nuts_{name}_data.npz"
    states = [CARRIED / f"nuts_target_{name}_{k}.npz" for k in range(2)]
    prog = rec.setdefault("in_progress", {}).setdefault(key, {"warmup": warmup, "chains": chains,
                                                               "seed": seed, "gradient": gradient,
                                                               "steps": [], "checks": []})
    if (prog["warmup"], prog["chains"], prog["seed"]) != (warmup, chains, seed):
        raise SystemExit(f"{name}: a NUTS run to the target with warmup {prog['warmup']}, {prog['chains']} "
                         f"chains and seed {prog['seed']} is under way; finish it with the same settings")
    CARRIED.mkdir(exist_ok=True)
    taskset = shutil.which("taskset")

    def wall() -> tuple[float, float]:
        per_proc = [0.0, 0.0]
        for k in range(2):
            firsts = [st["processes"][k] for st in prog["steps"]][:1]
            per_proc[k] = sum(f["startup_seconds"] + f["compile_seconds"] for f in firsts) + sum(
                st["processes"][k]["compute_seconds"] for st in prog["steps"])
        return max(per_proc), sum(st["wall_seconds"] for st in prog["steps"])

    while not control.stopped:
        phi, warm = _nuts_draws(states)
        kept = phi.shape[1]
        if warm >= warmup and kept >= sample_step and (not prog["checks"] or
                                                       prog["checks"][-1]["kept_per_chain"] != kept):
            d = diagnostics(phi, wall()[0])
            prog["checks"].append({"kept_per_chain": kept, "min_ess": d["min_ess"],
                                   "max_rhat": d["max_rhat"]})
            _save()
            print(f"{name}: NUTS to the target: {kept} kept per chain, min ESS {d['min_ess']:.0f}, max R-hat "
                  f"{d['max_rhat']:.4f}, {d['wall_seconds']:.0f} s", flush=True)
            if (d["min_ess"] >= target_ess and d["max_rhat"] < target_rhat) or kept >= max_kept:
                grads = {"warmup": sum(st["processes"][k]["warmup_gradients"] for k in range(2)
                                       for st in prog["steps"][-1:]),
                         "sampling": sum(st["processes"][k]["sampling_gradients"] for k in range(2)
                                         for st in prog["steps"][-1:])}
                last = prog["steps"][-1]["processes"]
                rec[key] = {**d, "converged": d["min_ess"] >= target_ess and d["max_rhat"] < target_rhat,
                            "target_ess": target_ess, "target_rhat": target_rhat, "gradient": gradient,
                            "warmup_iterations": warmup, "gradients": grads,
                            "gradients_per_ess": (grads["warmup"] + grads["sampling"]) / d["min_ess"],
                            "divergences": sum(p["divergences"] for p in last),
                            "step_sizes": [c["step_size"] for p in last for c in p["chains"]],
                            "wall_seconds_with_restarts": wall()[1], "steps": prog["steps"],
                            "checks": prog["checks"], "versions": {k: last[0][k] for k in ("jax", "numpyro")},
                            "note": "NUTS stopped by daskgp's rule (checked every 25 kept draws per chain); "
                                    "dense mass matrix; 2 processes side by side, each pinned to a core, "
                                    f"{per} chains each one after the other; wall = the slower process's "
                                    "start-up and compilation once plus its steps' compute seconds"}
                del rec["in_progress"][key]
                if not rec["in_progress"]:
                    del rec["in_progress"]
                _save()
                return True
        step = min(warmup_step, warmup - warm) if warm < warmup else sample_step
        t0 = time.time()
        procs = []
        for k in range(2):
            cmd = [numpyro_python(), str(HERE / "_numpyro_peer.py"), str(data), str(states[k]), "--chains",
                   str(per), "--seed", str(1000 * seed + k), "--warmup", str(warmup), "--advance", str(step),
                   "--gradient", gradient]
            if taskset:
                cmd = [taskset, "-c", str(k)] + cmd
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          env={**os.environ, **SINGLE_THREAD}))
        while any(p.poll() is None for p in procs) and not control.stopped:
            time.sleep(1.0)
        if control.stopped:  # the step in flight is lost (its states are written whole or not at all)
            for p in procs:
                p.terminate()
                p.wait()
            break
        outs = []
        for k, p in enumerate(procs):
            out, err = p.communicate()
            if p.returncode:
                raise RuntimeError(f"NUTS process {k} failed: {err[-2000:]}")
            outs.append(_json_line(out))
        prog["steps"].append({"advance": step, "wall_seconds": time.time() - t0, "pinned": bool(taskset),
                              "processes": outs})
        _save()
    print(f"{name}: NUTS to the target stopped after {wall()[1]:.0f} s in {len(prog['steps'])} steps; its "
          "states are carried, continued by the next invocation", flush=True)
    return False


def extrapolate_nuts(rec: dict, source: str) -> None:
    """NUTS's seconds per ESS at a size where running it to convergence would take this machine days: its
    gradient's cost measured here (the cheaper of the two, one thread) times the gradients per ESS it spent
    on ``source`` (a case whose NUTS ran end to end; warmup included, per process: the two run side by
    side). Gradient time only — NUTS's other work, which ``source_overhead`` measures on the source, is left
    out, and the source's posterior (small n, unimodal) takes no more gradients per ESS than a larger one
    would — both in NUTS's favour. Labelled as an extrapolation wherever it is reported."""
    src = RESULTS["cases"].get(source, {})
    if "nuts" not in src:
        raise SystemExit(f"--nuts-from {source}: that case has no measured NUTS run in {OUT.name}")
    cost = rec["gradient_cost"]
    spg = min(cost["hand_seconds_per_gradient"], cost["autodiff_seconds_per_gradient"])
    per_process = src["nuts"]["gradients"] / 2 / src["nuts"]["min_ess"]
    gradient_time = src["nuts"]["gradients"] / 2 * src["gradient_cost"]["seconds_per_gradient"]
    rec["nuts_extrapolated"] = {
        "seconds_per_ess": spg * per_process, "seconds_per_gradient": spg,
        "gradients_per_ess_per_process": per_process, "source": source,
        "source_overhead": src["nuts"]["wall_seconds"] / gradient_time,
        "note": f"extrapolated, not run: NUTS's gradients per ESS on {source} (warmup included) times its "
                "gradient's cost measured at this size; gradient time only"}
    _save()


def run_daskgp(name: str, X, y, rec: dict, method: str, target_ess: int, chains: int, seed: int,
               control=None) -> bool:
    """daskgp's side to the target, resumable across sittings: a run stopped by SIGINT/SIGTERM (``control``)
    is carried (benchmarks/carried/) and continued by the next invocation, every sitting's wall time
    recorded; the side's wall time is their sum. Returns whether the side is done."""
    key = f"daskgp_{method}"
    if key in rec:
        return True
    import daskgp as dg
    from daskgp.compute.cluster import close_client, get_client
    from daskgp.mcmc.control import RunStopped

    out = RUNS / f"nuts_fair_{name}_{method}.zarr"
    segments = rec.setdefault("in_progress", {}).setdefault(key, [])
    client = get_client(n_workers=2, threads_per_worker=1)
    hooks, finish = sitting(out, segments, _save)  # after the cluster's start: its time is left out
    try:
        if resumable(out):
            dt = dg.resume(str(out), X=X, y=y, client=client, control=control, **hooks)
        else:
            dt = dg.sample(X, y, out=str(out), client=client, method=method, n_chains=chains,
                           target_ess=target_ess, seed=seed, overwrite=True, control=control, **hooks)
    except RunStopped:
        print(f"{name} {method}: stopped after {sum(float(g['wall_s']) for g in segments):.0f} s in "
              f"{len(segments)} sittings; carried, continued by the next invocation", flush=True)
        return False
    finally:
        finish()
        _save()
        close_client(client)  # its local cluster too: a side's idle workers would load the next side's cores
        carry_run(out)
    wall = sum(float(g["wall_s"]) for g in segments)
    post = dt["posterior"].to_dataset()
    phi = np.stack([np.log(post[nm].values) for nm in NAMES], axis=-1)
    rec[key] = {**diagnostics(phi, wall), "elapsed_attr": float(dt.attrs["elapsed"]),
                "warmup_draws": int(dt.attrs["warmup_draws"]), "target_ess": target_ess,
                "sittings": list(segments)}
    del rec["in_progress"][key]
    if not rec["in_progress"]:
        del rec["in_progress"]
    discard_run(out)  # recorded: nothing to carry on
    _save()
    return True


def compare(rec: dict) -> None:
    t = rec.get("nuts_target")
    if t:  # NUTS run to the same stopping rule as daskgp's sides
        sd = np.array(t["sd"])
        for key in [k for k in rec if k.startswith("daskgp_")]:
            a, side = rec[key], key[len("daskgp_"):]
            rec[f"ratio_{side}_vs_nuts_target"] = a["seconds_per_ess"] / t["seconds_per_ess"]
            gap = (np.array(a["mean"]) - np.array(t["mean"])) / sd
            rec[f"mean_gap_in_nuts_target_sd_{side}"] = gap.tolist()
            rec[f"sd_ratio_{side}_over_nuts_target"] = (np.array(a["sd"]) / sd).tolist()
    b = rec.get("nuts")
    if not b:
        e = rec.get("nuts_extrapolated")
        for key in [k for k in rec if k.startswith("daskgp_")] if e else []:
            side = key[len("daskgp_"):]
            rec[f"ratio_{side}_extrapolated"] = rec[key]["seconds_per_ess"] / e["seconds_per_ess"]
        return
    sd = np.array(b["sd"])
    for key in [k for k in rec if k.startswith("daskgp_")]:
        a, side = rec[key], key[len("daskgp_"):]
        rec[f"ratio_{side}"] = a["seconds_per_ess"] / b["seconds_per_ess"]
        rec[f"mean_gap_in_nuts_sd_{side}"] = ((np.array(a["mean"]) - np.array(b["mean"])) / sd).tolist()
        rec[f"sd_ratio_{side}_over_nuts"] = (np.array(a["sd"]) / sd).tolist()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="concrete")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target-ess", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--sides", default="nuts,hmc,sghmc")  # or nuts-extrapolated instead of nuts
    ap.add_argument("--nuts-from", default="concrete")  # the measured case nuts-extrapolated carries over
    ap.add_argument("--redo", action="store_true")
    ap.add_argument("--again", default="", help="daskgp sides to run again in this invocation (the earlier "
                                                "record kept under 'previous'), e.g. sghmc")
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    from fidelity import case_data

    RESULTS.update(load_results(OUT, "nuts_fair", a.redo))
    RUNS.mkdir(exist_ok=True)
    control = stop_on_signals()  # SIGINT/SIGTERM: the daskgp side in flight is carried, not lost
    sides = a.sides.split(",")
    for name in a.cases.split(","):
        if control.stopped:
            break
        X, y = case_data(name)
        rec = RESULTS["cases"].setdefault(name, {"n": len(y)})
        data = RUNS / f"nuts_{name}_data.npz"
        if not data.exists():
            np.savez(data, X=X, y=y)
        t_seg = time.time()
        try:
            if "nuts" in sides:
                gradient_costs(name, X, y, rec)
                run_nuts(name, rec, a.chains, a.seed, a.warmup, a.samples)
            if "nuts-extrapolated" in sides:
                gradient_costs(name, X, y, rec)
                extrapolate_nuts(rec, a.nuts_from)
            if "nuts-target" in sides:
                gradient_costs(name, X, y, rec)
                if not run_nuts_target(name, rec, a.chains, a.seed, a.warmup, a.target_ess, control):
                    continue
            for method in ("hmc", "sghmc"):
                if method in a.again.split(",") and method not in rec.get("again", []) \
                        and f"daskgp_{method}" in rec:  # once: the earlier record kept, a new run beside
                    old = rec.pop(f"daskgp_{method}")
                    rec.setdefault("previous", {})[f"daskgp_{method}@{old['sittings'][0]['started']}"] = old
                    rec.setdefault("again", []).append(method)
                if method in sides and not control.stopped:
                    run_daskgp(name, X, y, rec, method, a.target_ess, a.chains, a.seed, control)
            compare(rec)
        finally:
            rec.setdefault("segments", []).append({"sides": sides, "wall_seconds": time.time() - t_seg})
            _save()
        shown = {k: v for k, v in rec.items() if k.startswith(("ratio", "mean_gap", "sd_ratio"))}
        print(name, json.dumps(shown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
