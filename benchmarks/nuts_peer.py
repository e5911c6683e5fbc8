"""daskgp's default sampler against NUTS (NumPyro) on the exact GP hyperparameter posterior, side by side.

    python benchmarks/nuts_peer.py [--cases concrete,power_plant] [--chains 4] [--redo]

The peer a user would otherwise pick for this posterior is NUTS on the dense Cholesky likelihood:
``benchmarks/_numpyro_peer.py`` in its own venv (benchmarks/.numpyro-venv, created on first use with
``pip install numpyro jax jaxlib``), float64, the same model (standardised data, isotropic RBF, Gamma(2, 1)
priors on s2, ℓ, noise in log space with the Jacobian), NumPyro's NUTS defaults (diagonal mass matrix
adapted in warmup, target acceptance 0.8) with 400 warmup iterations and 400 kept draws per chain (not its
1,000 + 1,000: at ≈ 1.2 s per iteration on concrete four such chains take 2.7 h; a 3-parameter posterior
needs no more warmup, and ``seconds_per_ess_sampling_only`` reports NUTS's best case, the warmup amortised
over endless draws). daskgp runs its defaults (SGHMC, 4 chains on 2 local workers, ``target_ess`` 400). Per
case and side: wall time end to end, min bulk / tail ESS, max R-hat (ArviZ, post-warmup, log scale),
seconds per ESS, and the two posteriors' means and sds against each other. ``ratio`` = daskgp s/ESS ÷ NUTS
s/ESS (issue 30's targets: ≤ 1.0 on concrete, ≤ 0.2 on power_plant). A short chain alone
(``nuts_calibration``) measures NUTS's seconds per gradient inside its compiled loop; with ``--niced`` the
chains run at the lowest priority beside other work and are priced from it.

Where NUTS cannot finish in a session (power_plant: a dense Cholesky of 9,568 rows per leapfrog step), its
cost per gradient is measured on the case and its gradients per effective sample taken from the cases it
finished; the product is reported as ``nuts_extrapolated`` and labelled so, never as a measurement.

Resumable at chain granularity: each NUTS chain is its own process (seed 1000·seed + chain), written to
benchmarks/runs/nuts_<case>_chain<k>.npz when it ends, with its wall time; a rerun continues with the
chains that are missing. daskgp's run is resumable block by block and carried from one session to the
next in benchmarks/carried/ (``_common.carry_run``). benchmarks/results/nuts_peer.json is rewritten after
every step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_results, resumable, sitting, write_results  # noqa: E402

OUT = HERE / "results" / "nuts_peer.json"
RUNS = HERE / "runs"
VENV = HERE / ".numpyro-venv"
NAMES = ("variance", "lengthscale", "noise")


def numpyro_python() -> str:
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "numpyro", "jax", "jaxlib"], check=True)
    return str(py)


def _json_line(cmd: list[str], timeout: float) -> dict:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def diagnostics(phi: np.ndarray, wall: float) -> dict:
    """phi (chains, draws, 3) post-warmup log-parameters → ArviZ ESS / R-hat, moments, s per ESS."""
    import arviz as az

    ds = az.convert_to_dataset({nm: phi[..., j] for j, nm in enumerate(NAMES)})
    bulk = np.array([float(az.ess(ds, method="bulk")[nm]) for nm in NAMES])
    tail = np.array([float(az.ess(ds, method="tail")[nm]) for nm in NAMES])
    rhat = np.array([float(az.rhat(ds)[nm]) for nm in NAMES])
    flat = phi.reshape(-1, len(NAMES))
    ess = float(min(bulk.min(), tail.min()))
    return {"chains": int(phi.shape[0]), "kept_draws": int(phi.shape[1]), "mean": flat.mean(0).tolist(),
            "sd": flat.std(0, ddof=1).tolist(), "ess_bulk": bulk.tolist(), "ess_tail": tail.tolist(),
            "max_rhat": float(rhat.max()), "min_ess": ess, "wall_seconds": wall,
            "seconds_per_ess": wall / ess}


def _peer_cmd(py: str, data: Path, out: Path, seed: int, warmup: int, samples: int) -> list[str]:
    return [py, str(HERE / "_numpyro_peer.py"), str(data), str(out), "--chains", "1", "--seed", str(seed),
            "--warmup", str(warmup), "--samples", str(samples)]


def calibrate_nuts(name: str, rec: dict, warmup: int = 100, samples: int = 100) -> dict:
    """NUTS's own cost, measured alone on the machine: one short chain (its own seed), giving seconds per
    leapfrog gradient inside the compiled sampling loop and the fixed per-chain cost (start-up, both loops'
    compilation). Prices chains that ran at low priority beside other work (``--niced``)."""
    if "nuts_calibration" not in rec:
        cmd = _peer_cmd(numpyro_python(), RUNS / f"nuts_{name}_data.npz", RUNS / "calibration.npz", 987_654,
                        warmup, samples)
        info = _json_line(cmd, timeout=3600)
        per = info["sampling_seconds"] / info["sampling_gradients"]
        info.update(seconds_per_gradient=per,
                    fixed_seconds=info["wall_seconds"] - per * (info["warmup_gradients"]
                                                                + info["sampling_gradients"]))
        rec["nuts_calibration"] = info
        _save()
    return rec["nuts_calibration"]


def run_nuts(name: str, X, y, chains: int, seed: int, rec: dict, warmup: int, samples: int,
             niced: bool) -> None:
    """One process per chain (resumable); fills rec['nuts'] once every chain exists. ``niced``: the chains
    run at the lowest CPU priority beside other benchmarks, so their wall time is not NUTS's; their cost is
    then priced from :func:`calibrate_nuts` (fixed cost + gradients × seconds per gradient, both measured
    alone), the wall time kept beside it."""
    py = numpyro_python()
    RUNS.mkdir(exist_ok=True)
    data = RUNS / f"nuts_{name}_data.npz"
    if not data.exists():
        np.savez(data, X=X, y=y)
    cal = calibrate_nuts(name, rec) if niced else None
    side = rec.setdefault("nuts_chains", {})
    for c in range(chains):
        out = RUNS / f"nuts_{name}_chain{c}.npz"
        if str(c) in side and out.exists():
            continue
        print(f"{name}: NUTS chain {c} …", flush=True)
        cmd = _peer_cmd(py, data, out, 1000 * seed + c, warmup, samples)
        info = _json_line((["nice", "-n", "19"] if niced else []) + cmd, timeout=12 * 3600)
        info["niced"] = niced
        if niced:
            info["priced_seconds"] = cal["fixed_seconds"] + cal["seconds_per_gradient"] * (
                info["warmup_gradients"] + info["sampling_gradients"])
        side[str(c)] = info
        _save()
    ran = [side[str(c)] for c in range(chains)]
    phi = np.concatenate([np.load(RUNS / f"nuts_{name}_chain{c}.npz")["phi"] for c in range(chains)])
    priced = all(r.get("niced") for r in ran)
    how = ("chains ran one after another at nice 19 beside other benchmarks; wall_seconds = their cost "
           "priced at NUTS's own cost measured alone (nuts_calibration)") if priced else (
           "chains ran one after another, each alone on the machine; wall_seconds = their sum")
    wall = sum(r["priced_seconds"] if priced else r["wall_seconds"] for r in ran)
    grads = sum(r["sampling_gradients"] for r in ran)
    warm_grads = sum(r["warmup_gradients"] for r in ran)
    rec["nuts"] = {**diagnostics(phi, wall), "sampling_gradients": grads, "warmup_gradients": warm_grads,
                   "warmup_iterations": warmup, "sampling_iterations": samples,
                   "divergences": sum(r["divergences"] for r in ran),
                   "versions": {k: ran[0][k] for k in ("jax", "numpyro")},
                   "measured_wall_seconds": sum(r["wall_seconds"] for r in ran),
                   "note": how}
    rec["nuts"]["gradients_per_ess"] = (grads + warm_grads) / rec["nuts"]["min_ess"]
    rec["nuts"]["seconds_per_gradient"] = wall / (grads + warm_grads)
    # NUTS's best case: the warmup amortised over infinitely many kept draws
    sampling = sum(r["sampling_seconds"] for r in ran) * (wall / sum(r["wall_seconds"] for r in ran))
    rec["nuts"]["seconds_per_ess_sampling_only"] = sampling / rec["nuts"]["min_ess"]


def nuts_gradient_cost(name: str, X, y, rec: dict) -> None:
    RUNS.mkdir(exist_ok=True)
    data = RUNS / f"nuts_{name}_data.npz"
    if not data.exists():
        np.savez(data, X=X, y=y)
    rec["nuts_gradient_cost"] = _json_line([numpyro_python(), str(HERE / "_numpyro_peer.py"), str(data),
                                            str(RUNS / "unused.npz"), "--gradient-cost", "5"], timeout=3600)


def run_daskgp(name: str, X, y, rec: dict, client, target_ess: int) -> None:
    import daskgp as dg

    path = RUNS / f"nuts_peer_daskgp_{name}.zarr"
    out = str(path)
    hooks, finish = sitting(path)  # a run longer than a session continues from benchmarks/carried/
    if resumable(path):
        dt = dg.resume(out, X=X, y=y, client=client, **hooks)
    else:
        dt = dg.sample(X, y, out=out, client=client, target_ess=target_ess, overwrite=True, **hooks)
    post = dt["posterior"].to_dataset()
    warm = int(dt.attrs["warmup_draws"])
    phi = np.stack([np.log(post[nm].values) for nm in NAMES], axis=-1)
    rec["daskgp"] = {**diagnostics(phi, float(dt.attrs["elapsed"])), "warmup_draws": warm,
                     "segment_wall_seconds": finish(), "target_ess": target_ess}


def compare(rec: dict) -> None:
    a, b = rec.get("daskgp"), rec.get("nuts")
    if a and b:
        sd = np.array(b["sd"])
        rec["mean_gap_in_nuts_sd"] = ((np.array(a["mean"]) - np.array(b["mean"])) / sd).tolist()
        rec["sd_ratio_daskgp_over_nuts"] = (np.array(a["sd"]) / sd).tolist()
        rec["ratio"] = a["seconds_per_ess"] / b["seconds_per_ess"]
        if "seconds_per_ess_sampling_only" in b:
            rec["ratio_vs_nuts_sampling_only"] = a["seconds_per_ess"] / b["seconds_per_ess_sampling_only"]
    elif a and rec.get("nuts_gradient_cost") and RESULTS["cases"].get("concrete", {}).get("nuts"):
        gpe = RESULTS["cases"]["concrete"]["nuts"]["gradients_per_ess"]
        s = rec["nuts_gradient_cost"]["seconds_per_gradient"] * gpe
        rec["nuts_extrapolated"] = {"seconds_per_ess": s, "gradients_per_ess_from": "concrete",
                                    "note": "an extrapolation: this case's measured seconds per gradient × "
                                            "concrete's measured NUTS gradients per effective sample"}
        rec["ratio_vs_extrapolation"] = a["seconds_per_ess"] / s


RESULTS: dict = {}


def _save() -> None:
    write_results(OUT, RESULTS)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="concrete,power_plant")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target-ess", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=400, help="NUTS warmup iterations per chain")
    ap.add_argument("--samples", type=int, default=400, help="NUTS kept draws per chain")
    ap.add_argument("--niced", action="store_true",
                    help="run the NUTS chains at nice 19 beside other work; price them from a run alone")
    ap.add_argument("--sides", default="daskgp,nuts", help="which sides to run this time")
    ap.add_argument("--redo", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parent.parent / "shared" / "data"))
    sys.path.insert(0, str(HERE))
    from fidelity import case_data

    RESULTS.update(load_results(OUT, "nuts_peer", a.redo))
    client = None
    for name in a.cases.split(","):
        X, y = case_data(name)
        rec = RESULTS["cases"].setdefault(name, {"n": len(y)})
        t_seg = time.time()
        if "daskgp" in a.sides and "daskgp" not in rec:
            from daskgp.compute.cluster import close_client, get_client

            client = client or get_client(n_workers=2)
            run_daskgp(name, X, y, rec, client, a.target_ess)
            _save()
        if "nuts" in a.sides and "nuts" not in rec:
            if name == "concrete":
                run_nuts(name, X, y, a.chains, a.seed, rec, a.warmup, a.samples, a.niced)
            elif "nuts_gradient_cost" not in rec:
                nuts_gradient_cost(name, X, y, rec)
        compare(rec)
        rec.setdefault("segments", []).append({"sides": a.sides, "wall_seconds": time.time() - t_seg})
        _save()
        print(name, json.dumps({k: rec.get(k) for k in ("ratio", "ratio_vs_extrapolation",
                                                        "mean_gap_in_nuts_sd", "sd_ratio_daskgp_over_nuts")}))
    if client is not None:
        close_client(client)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
