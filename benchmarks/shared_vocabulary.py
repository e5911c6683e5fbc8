"""Issue 32's before/after check: the shared kernel layer (``daskgp.inducing``) and the immutable kernel
operator with its executors must cost nothing. One run times, alternately, the code at a base git revision
(checked out into a temporary worktree) and this checkout, each in its own process (the SGPR part on its own
2-worker LocalCluster):

* SGPR: one bound + gradient evaluation on every flights training row (246,468 rows, m = 100, RBF, the
  map-reduce over 2 workers), the median of ``--reps`` after a warm-up;
* ADVGP: one partition objective + gradient (20,000 flights rows, m = 100, in-process);
* GPC: one SEP pass with the gradient (20,000 flights_delayed rows, m = 100, in-process);
* the exact GP: one stochastic gradient of log p(y|θ) on house_8L (22,784 rows, RBF, N_r = 4, ULISSE, a
  rank-100 pivoted-Cholesky preconditioner, the kernel operator's local executor; new probes each time);

* with ``--concrete``: concrete (1,030 rows) sampled by the default sampler to bulk and tail ESS 400 on a
  2-worker LocalCluster, seed 0 — seconds per effective sample (the run's wall time / the smallest bulk ESS)
  and a digest of the draws, which must be the same before and after when the sampler's arithmetic is;

and, in this checkout only, the three sparse ones with the Matérn 3/2 kernel (new: the kernel's G block is
evaluated in the gradient map, where the RBF reuses its cached K). Writes
benchmarks/results/shared_vocabulary.json with every sample and the ratios after / before (≤ 1.05 is the
issue's bar).

    python benchmarks/shared_vocabulary.py [--base REV] [--rounds 3] [--reps 5] [--concrete]
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
from _common import ROOT, base_worktree, head_revision, run_child, write_results  # noqa: E402

# the measurement, run in a child process whose daskgp comes from PYTHONPATH (a base worktree or this one)
_CHILD = r"""
import json, sys, time
import numpy as np

def main():
    kernel, reps = sys.argv[1], int(sys.argv[2])
    import daskgp
    try:
        from daskgp.datasets import train_test
    except ImportError:  # a base revision before the data sets left the core
        from daskgp.core.datasets import train_test
    from distributed import Client, LocalCluster
    ds = daskgp.load("flights")
    Xtr, ytr, _, _ = train_test(ds, train_size=None)
    Xs = (Xtr - Xtr.mean(0)) / Xtr.std(0)
    ys = (ytr - ytr.mean()) / ytr.std()
    rng = np.random.default_rng(0)
    Z = Xs[rng.choice(len(Xs), 100, replace=False)]
    out = {"daskgp": daskgp.__file__}
    from daskgp.sparse.bound import GlobalParams
    # noise variance 0.25 = precision 4: before issue 32 the fourth field was the precision, positional
    as_variance = "noise" in GlobalParams.__dataclass_fields__
    noise = 0.25 if as_variance else 4.0
    if as_variance:
        theta = GlobalParams(Z, 1.0, np.full(Xs.shape[1], 2.0), noise=noise, kernel=kernel)
    elif kernel == "rbf":
        theta = GlobalParams(Z, 1.0, np.full(Xs.shape[1], 2.0), noise)
    else:
        theta = GlobalParams(Z, 1.0, np.full(Xs.shape[1], 2.0), noise, kernel)
    from daskgp.sparse.chunks import ChunkedRows
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                      memory_limit="8GiB") as cluster, Client(cluster) as client:
        rows = ChunkedRows.from_arrays(client, ys, int(np.ceil(len(ys) / 8)), X=Xs)
        rows.bound_and_grad(theta)
        secs = []
        for _ in range(reps):
            t0 = time.perf_counter(); rows.bound_and_grad(theta); secs.append(time.perf_counter() - t0)
        out["sgpr_eval_s"] = secs
        rows.release()
    from daskgp.advgp.model import ADVGPParams, partition_objective
    X20, y20 = Xs[:20_000], ys[:20_000]
    extra = {} if kernel == "rbf" else {"kernel": kernel}
    p = ADVGPParams(Z, 1.0, np.full(Xs.shape[1], 2.0), noise, np.zeros(100), np.eye(100), **extra)
    partition_objective(X20, y20, p)
    secs = []
    for _ in range(reps):
        t0 = time.perf_counter(); partition_objective(X20, y20, p); secs.append(time.perf_counter() - t0)
    out["advgp_partition_s"] = secs
    from daskgp.gpc.ep import Factor, GPCParams, Posterior, chunk_pass
    try:
        from daskgp.gpc.methods import sep_cavity
    except ImportError:  # a base revision before the classifier's method registry (issue 57)
        from daskgp.gpc.ep import sep_cavity
    lab = np.where(ytr[:20_000] > 15, 1.0, -1.0)
    gp = GPCParams(Z, 1.0, np.full(Xs.shape[1], 2.0), **extra)
    q = Posterior(gp, Factor.zero(100))
    src = Posterior(gp, sep_cavity(Factor.zero(100), 20_000))
    chunk_pass(X20, lab, src, None, 1.0, grad=True, gradient_at=q)
    secs = []
    for _ in range(reps):
        t0 = time.perf_counter(); chunk_pass(X20, lab, src, None, 1.0, grad=True, gradient_at=q)
        secs.append(time.perf_counter() - t0)
    out["gpc_sep_pass_s"] = secs
    if kernel == "rbf":  # the exact path: one stochastic gradient on house_8L through the kernel operator
        from daskgp import KernelOperator, log_marginal_gradient, make_kernel
        h = daskgp.load("house_8L")
        op = KernelOperator(h.X_std, make_kernel("rbf", lengthscale=2.0), 0.3, mode="local")
        log_marginal_gradient(op, h.y_std, n_probes=4, rng=0, precond="pivchol", precond_rank=100)
        secs = []
        for r in range(max(2, reps // 2)):
            t0 = time.perf_counter()
            log_marginal_gradient(op, h.y_std, n_probes=4, rng=r + 1, precond="pivchol", precond_rank=100)
            secs.append(time.perf_counter() - t0)
        out["exact_gradient_s"] = secs
        op.close()
    if kernel == "rbf" and sys.argv[3] == "1":  # concrete sampled to a target ESS with the default sampler
        import hashlib, tempfile
        c = daskgp.load("concrete")
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                          memory_limit="4GiB") as cluster, Client(cluster) as client, \
                tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            dt = daskgp.sample(c.X_std, c.y_std, out=tmp + "/run.zarr", client=client, target_ess=400, seed=0)
            wall = time.perf_counter() - t0
            table, _ = daskgp.run_summary(dt)
            h = hashlib.sha1()
            for name in dt.attrs["param_names"]:
                h.update(np.ascontiguousarray(dt["posterior"][name].values).tobytes())
            out["concrete_s_per_ess"] = [float(table["sec_per_ess"].max())]
            out["concrete_wall_s"] = wall
            out["concrete_min_ess_bulk"] = float(table["ess_bulk"].min())
            out["concrete_draws_sha1"] = h.hexdigest()
    print("RESULT " + json.dumps(out))

if __name__ == "__main__":
    main()
"""


def _measure(tree: Path, kernel: str, reps: int, concrete: bool = False) -> dict:
    t0 = time.perf_counter()
    res = run_child(tree, _CHILD, [kernel, str(reps), str(int(concrete))])
    res["wall_s"] = time.perf_counter() - t0
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="9f3491f", help="the revision before the shared layer")
    ap.add_argument("--rounds", type=int, default=3, help="before/after pairs, alternating")
    ap.add_argument("--reps", type=int, default=5, help="timed evaluations per process")
    ap.add_argument("--concrete", action="store_true",
                    help="also sample concrete to bulk and tail ESS 400 with the default sampler (s/ESS)")
    ap.add_argument("--out", default=str(HERE / "results" / "shared_vocabulary.json"))
    args = ap.parse_args()
    keys = ("sgpr_eval_s", "advgp_partition_s", "gpc_sep_pass_s", "exact_gradient_s") + \
        (("concrete_s_per_ess",) if args.concrete else ())
    results = {"benchmark": "shared_vocabulary", "base": args.base, "head": head_revision(),
               "cpus": os.cpu_count(), "rounds": []}
    with base_worktree(args.base) as base:
        for r in range(args.rounds):
            pair = {}
            for side, tree in (("before", base), ("after", ROOT)) if r % 2 == 0 else (("after", ROOT),
                                                                                       ("before", base)):
                pair[side] = _measure(tree, "rbf", args.reps, args.concrete)
                medians = ", ".join(f"{k} {np.median(pair[side][k]):.3f}" for k in keys)
                print(f"round {r + 1} {side}: {medians}", flush=True)
            results["rounds"].append(pair)
        results["matern32_after"] = _measure(ROOT, "matern32", args.reps)
    summary = {}
    for k in keys:
        before = np.array([np.median(p["before"][k]) for p in results["rounds"]])
        after = np.array([np.median(p["after"][k]) for p in results["rounds"]])
        ratios = after / before
        summary[k] = {"before_median_s": float(np.median(before)), "after_median_s": float(np.median(after)),
                      "ratio_per_round": ratios.tolist(), "ratio_median": float(np.median(ratios)),
                      "matern32_after_median_s": (float(np.median(results["matern32_after"][k]))
                                                  if k in results["matern32_after"] else None),
                      "within_5_percent": bool(np.median(ratios) <= 1.05)}
    if args.concrete:  # the same seed, so the same draws if the samplers' arithmetic is unchanged
        shas = {p[side]["concrete_draws_sha1"] for p in results["rounds"] for side in ("before", "after")}
        summary["concrete_draws_identical_before_after"] = len(shas) == 1
    results["summary"] = summary
    write_results(Path(args.out), results)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
