"""SEP, EP and ADF at their defaults on real binary problems against an exact Laplace GP classifier
(issue 31): ``python benchmarks/gpc_suite.py [--rows 3000] [--problems a,b]``.

Each problem (tests/gpc/binary_sets.py: hourly weather rain, house_8L high price, RAND health visit, MNIST
zero, breast cancer) is split 2 : 1 after a stratified draw of at most ``--rows`` rows. On the same
standardised inputs: the class prior, logistic regression, scikit-learn's GaussianProcessClassifier (Laplace,
RBF-ARD times a constant, its optimizer's defaults) and daskgp's SparseGPClassifier with every default
(m = 100, 250 iterations) for each method, on a 2-worker LocalCluster. Reported per method: test NLL, the
paired per-row difference with Laplace and its standard error, the ratio NLL / Laplace NLL, and
``target_met`` (ratio ≤ 1.02, the issue's target). One JSON per problem in benchmarks/results/gpc_suite/,
written when the problem finishes, so an interrupted run resumes where it stopped (``--force`` redoes).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from advgp_flights import _save  # noqa: E402  (atomic JSON)

OUT = Path(__file__).resolve().parent / "results" / "gpc_suite"


def _losses(p, y):
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return -(y * np.log(p) + (1 - y) * np.log1p(-p))


def _paired(a, b) -> dict:
    d = a - b
    return {"mean": float(d.mean()), "se": float(d.std(ddof=1) / np.sqrt(len(d)))}


def run_problem(name: str, rows: int, client) -> dict:
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    import daskgp as dg
    from tests.gpc.binary_sets import load_problem

    P = load_problem(name, rows=rows)
    sc = StandardScaler().fit(P.X_train)
    Xtr, Xte, y = sc.transform(P.X_train), sc.transform(P.X_test), P.y_test
    out = {"problem": name, "n_train": len(P.y_train), "n_test": len(y), "features": Xtr.shape[1],
           "positive_rate": P.positive_rate}
    prior = _losses(np.full(len(y), P.positive_rate), y)
    lr = LogisticRegression(max_iter=5000).fit(Xtr, P.y_train)
    logreg = _losses(lr.predict_proba(Xte)[:, 1], y)
    d = Xtr.shape[1]
    t = time.perf_counter()
    kernel = ConstantKernel(1.0, (1e-3, 1e4)) * RBF(np.full(d, np.sqrt(d)), (1e-2, 1e4))
    gpc = GaussianProcessClassifier(kernel, random_state=0).fit(Xtr, P.y_train)
    laplace = _losses(gpc.predict_proba(Xte)[:, 1], y)
    out["laplace"] = {"nll": float(laplace.mean()), "seconds": time.perf_counter() - t}
    out["prior"] = {"nll": float(prior.mean())}
    out["logistic_regression"] = {"nll": float(logreg.mean()), "vs_prior": _paired(logreg, prior)}
    for method in ("sep", "ep", "adf"):
        t = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            est = dg.SparseGPClassifier(method=method).fit(P.X_train, P.y_train, client=client)
        loss = _losses(est.predict_proba(P.X_test)[:, 1], y)
        ratio = float(loss.mean() / laplace.mean())
        out[method] = {"nll": float(loss.mean()), "seconds": time.perf_counter() - t,
                       "vs_laplace": _paired(loss, laplace), "vs_prior": _paired(loss, prior), "ratio": ratio,
                       "target_met": ratio <= 1.02, "best_iteration": int(est.best_iteration_),
                       "warnings": [str(x.message)[:200] for x in w]}
        print(f"{name}: {method} NLL {loss.mean():.4f} (Laplace {laplace.mean():.4f}, ratio {ratio:.3f}; "
              f"logreg {logreg.mean():.4f}, prior {prior.mean():.4f})", flush=True)
    return out


def main(argv=None) -> None:
    from distributed import Client, LocalCluster

    from tests.gpc.binary_sets import NAMES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=3000, help="rows per problem before the 2 : 1 split")
    ap.add_argument("--problems", default=",".join(NAMES))
    ap.add_argument("--force", action="store_true", help="redo problems that already have a result")
    a = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0")
    with cluster, Client(cluster) as client:
        for name in a.problems.split(","):
            path = OUT / f"{name}_rows{a.rows}.json"
            if path.exists() and not a.force:
                print(f"{name}: done before ({path.name})", flush=True)
                continue
            t0 = time.perf_counter()
            res = run_problem(name, a.rows, client)
            res.update(rows=a.rows, wall_seconds=time.perf_counter() - t0, machine=platform.node(),
                       when=time.strftime("%Y-%m-%dT%H:%M:%S"))
            _save(res, path)


if __name__ == "__main__":
    main()
