"""daskgp's default sampler against NUTS (NumPyro) on the exact GP hyperparameter posterior, side by side.

    python benchmarks/nuts_peer.py [--cases concrete,power_plant] [--chains 4] [--redo]

The peer a user would otherwise pick for this posterior is NUTS on the dense Cholesky likelihood:
``benchmarks/_numpyro_peer.py`` in its own venv (benchmarks/.numpyro-venv, created on first use with
``pip install numpyro jax jaxlib``), float64, the same model (standardised data, isotropic RBF, Gamma(2, 1)
priors on s2, ℓ, noise in log space with the Jacobian), NumPyro's defaults (1,000 warmup and 1,000 kept
draws per chain, diagonal mass matrix, target acceptance 0.8). daskgp runs its defaults (SGHMC, 4 chains
on 2 local workers, ``target_ess`` 400). Per case and side: wall time end to end, min bulk / tail ESS, max
R-hat (ArviZ, post-warmup, log scale), seconds per ESS, and the two posteriors' means and sds against each
other. ``ratio`` = daskgp s/ESS ÷ NUTS s/ESS (issue 30's targets: ≤ 1.0 on concrete, ≤ 0.2 on
power_plant).

Where NUTS cannot finish in a session (power_plant: a dense Cholesky of 9,568 rows per leapfrog step), its
cost per gradient is measured on the case and its gradients per effective sample taken from the cases it
finished; the product is reported as ``nuts_extrapolated`` and labelled so, never as a measurement.

Resumable at chain granularity: each NUTS chain is its own process (seed 1000·seed + chain), written to
benchmarks/runs/nuts_<case>_chain<k>.npz when it ends, with its wall time; a rerun continues with the
chains that are missing. benchmarks/results/nuts_peer.json is rewritten after every step.
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
from _common import load_results, write_results  # noqa: E402

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


def run_nuts(name: str, X, y, chains: int, seed: int, rec: dict) -> None:
    """One process per chain (resumable); fills rec['nuts'] once every chain exists."""
    py = numpyro_python()
    RUNS.mkdir(exist_ok=True)
    data = RUNS / f"nuts_{name}_data.npz"
    if not data.exists():
        np.savez(data, X=X, y=y)
    side = rec.setdefault("nuts_chains", {})
    for c in range(chains):
        out = RUNS / f"nuts_{name}_chain{c}.npz"
        if str(c) in side and out.exists():
            continue
        print(f"{name}: NUTS chain {c} …", flush=True)
        info = _json_line([py, str(HERE / "_numpyro_peer.py"), str(data), str(out), "--chains", "1",
                           "--seed", str(1000 * seed + c)], timeout=6 * 3600)
        side[str(c)] = info
        _save()
    phi = np.concatenate([np.load(RUNS / f"nuts_{name}_chain{c}.npz")["phi"] for c in range(chains)])
    wall = sum(side[str(c)]["wall_seconds"] for c in range(chains))
    grads = sum(side[str(c)]["sampling_gradients"] for c in range(chains))
    rec["nuts"] = {**diagnostics(phi, wall), "sampling_gradients": grads,
                   "divergences": sum(side[str(c)]["divergences"] for c in range(chains)),
                   "versions": {k: side["0"][k] for k in ("jax", "numpyro")},
                   "note": "chains run one after another, each alone on the machine; wall = their sum"}
    rec["nuts"]["gradients_per_ess"] = grads / rec["nuts"]["min_ess"]


def nuts_gradient_cost(name: str, X, y, rec: dict) -> None:
    RUNS.mkdir(exist_ok=True)
    data = RUNS / f"nuts_{name}_data.npz"
    if not data.exists():
        np.savez(data, X=X, y=y)
    rec["nuts_gradient_cost"] = _json_line([numpyro_python(), str(HERE / "_numpyro_peer.py"), str(data),
                                            str(RUNS / "unused.npz"), "--gradient-cost", "5"], timeout=3600)


def run_daskgp(name: str, X, y, rec: dict, client, target_ess: int) -> None:
    import daskgp as dg

    out = str(RUNS / f"nuts_peer_daskgp_{name}.zarr")
    t0 = time.perf_counter()
    if os.path.exists(out):
        dt = dg.resume(out, X=X, y=y, client=client)
    else:
        dt = dg.sample(X, y, out=out, client=client, target_ess=target_ess, overwrite=True)
    post = dt["posterior"].to_dataset()
    warm = int(dt.attrs["warmup_draws"])
    phi = np.stack([np.log(post[nm].values) for nm in NAMES], axis=-1)
    rec["daskgp"] = {**diagnostics(phi, float(dt.attrs["elapsed"])), "warmup_draws": warm,
                     "segment_wall_seconds": time.perf_counter() - t0, "target_ess": target_ess}


def compare(rec: dict) -> None:
    a, b = rec.get("daskgp"), rec.get("nuts")
    if a and b:
        sd = np.array(b["sd"])
        rec["mean_gap_in_nuts_sd"] = ((np.array(a["mean"]) - np.array(b["mean"])) / sd).tolist()
        rec["sd_ratio_daskgp_over_nuts"] = (np.array(a["sd"]) / sd).tolist()
        rec["ratio"] = a["seconds_per_ess"] / b["seconds_per_ess"]
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
            from daskgp.compute.cluster import get_client

            client = client or get_client(n_workers=2)
            run_daskgp(name, X, y, rec, client, a.target_ess)
            _save()
        if "nuts" in a.sides and "nuts" not in rec:
            if name == "concrete":
                run_nuts(name, X, y, a.chains, a.seed, rec)
            elif "nuts_gradient_cost" not in rec:
                nuts_gradient_cost(name, X, y, rec)
        compare(rec)
        rec.setdefault("segments", []).append({"sides": a.sides, "wall_seconds": time.time() - t_seg})
        _save()
        print(name, json.dumps({k: rec.get(k) for k in ("ratio", "ratio_vs_extrapolation",
                                                        "mean_gap_in_nuts_sd", "sd_ratio_daskgp_over_nuts")}))
    if client is not None:
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
