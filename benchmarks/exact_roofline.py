"""Where a sampler's gradient spends its time, against this machine's floor (issue 55, item 1): the default
SGHMC gradient of the exact GP posterior at three sizes, before and after a change, in one run.

    python benchmarks/exact_roofline.py [--before REV] [--sizes 1030,8192,22784] [--repeats 3] [--redo]

For each size n — concrete (1,030 rows) at its exact MAP, and 8,192 random rows and all 22,784 rows of
house_8L at house_8L's reference MAP (``results/house8l_reference.json``) — the gradient a chain computes
(``daskgp.mcmc.segments.chain_posterior`` of the default ``SamplerConfig`` for n rows: probes, solver,
tolerance, preconditioner rank and its kept pivots, float32 cached kernel rows; the probes a run's chains
would use, by the sampler's rule from the gradient noise at the mode — 3 gradients there, whitened by the
Laplace covariance, as the warmup measures it), ``--repeats`` times along a chain-like path: each θ one step
h_max·L·ξ from the last (L the Laplace covariance's Cholesky factor, ξ standard normal: SGHMC's stride in
its whitened units), so each gradient rebuilds the cached kernel rows and K⁻¹y's warm start is as far off
as along a chain, with fresh probes (SGHMC redraws them every iteration); the first gradient, which also
builds the preconditioner (a chain rebuilds it every ``redraw_every`` iterations), is timed apart. Per size:

* seconds per gradient (median), operator passes (products) per gradient and their widths (a column leaves
  the product once it converges, or once ULISSE stops it), CG iterations;
* seconds per cached product of 1 + N_r columns and of 1 column, measured alone at the same θ;
* the floor: per product, 2·n²·width flops at this machine's measured float32 GEMM rate or the n² float32
  rows read at its copy rate, the larger, summed over the gradient's products;
* "everything else" = gradient − its products' seconds (the kernel rows recomputed at the new θ, the
  derivative pass, the preconditioner's applies, the solver's bookkeeping).

Each side ("before": a git worktree of ``--before``, default the revision before issue 55's first change;
"after": this checkout) runs in its own process, one size at a time, with the machine's default BLAS
threads (the local executor runs a thread per core), so the two sides are measured alike. Resumable: each
(side, size) is kept in ``results/exact_roofline.json`` as it finishes; ``--redo`` starts again.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _common import ROOT, base_worktree, close_segment, load_results, run_child, write_results

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "exact_roofline.json"
BEFORE = "3913b69"  # main before issue 55's changes

CHILD = r'''
import json, sys, time
import numpy as np
import daskgp
from daskgp.compute.operator import KernelOperator
from daskgp.model.kernels import make_kernel
from daskgp.exact.posterior import subset_map
from daskgp.mcmc.config import SamplerConfig
from daskgp.mcmc.layout import chain_block_rows
from daskgp.mcmc.segments import chain_posterior

n, repeats, ref_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def gemm_rate(dtype, m=6000, k=33):
    A = np.random.default_rng(0).standard_normal((m, m)).astype(dtype)
    B = np.random.default_rng(1).standard_normal((m, k)).astype(dtype)
    A @ B
    t = time.perf_counter()
    for _ in range(5):
        A @ B
    return 2.0 * m * m * k * 5 / (time.perf_counter() - t)

def copy_rate(m=6000):
    A = np.ones((m, m), dtype=np.float32)
    B = np.empty_like(A)
    np.copyto(B, A)
    t = time.perf_counter()
    for _ in range(5):
        np.copyto(B, A)
    return 2.0 * A.nbytes * 5 / (time.perf_counter() - t)  # read + write

if n == 1030:
    ds = daskgp.load("concrete")
    X, y = ds.X_std, ds.y_std
    phi, cov = subset_map(X, y, make_kernel("rbf"), 0.3, size=n, rng=0)
    data = "concrete"
else:
    ds = daskgp.load("house_8L")
    idx = np.arange(ds.n) if n >= ds.n else np.sort(np.random.default_rng(0).choice(ds.n, n, replace=False))
    X, y = ds.X_std[idx], ds.y_std[idx]
    ref = json.load(open(ref_path))["iso"]
    phi = np.array(ref["phi_map"])
    cov = np.array(ref["laplace_cov"]) * ds.n / n  # the posterior widens as 1/n: a subset's, roughly
    data = f"house_8L rows {n} of {ds.n} (seed 0)" if n < ds.n else "house_8L"
L = np.linalg.cholesky(cov)
base = SamplerConfig(method="sghmc")
if hasattr(base, "for_start"):  # the rows' dtype a run resolves from its start (here the mode)
    base = base.for_start(n, phi, cov)[0]
op = KernelOperator(X, make_kernel(base.kernel, n_dims=X.shape[1]), 1.0, mode="local",
                    cache_dtype=base.cache_dtype, block_rows=chain_block_rows(n))
# the probes a run's chains use: where the sampler cuts them from the warmup's noise at the mode
# (SGHMCSampler.probes_from_noise), the same rule on the noise of 3 gradients at the mode, whitened by the
# Laplace covariance as the warmup's is; a revision without the rule keeps its default
rule = getattr(base.sampler, "probes_from_noise", None)
lam = None
if rule is not None:
    post = chain_posterior(op, y, base, redraw_every=base.sampler.redraw_every(base), rng=1)
    lams = [float(np.linalg.eigvalsh(L.T @ post.stochastic_grad(phi, r)[1]["noise_cov"] @ L).max())
            for r in range(3)]
    lam = float(np.median(lams))
    probes = rule(base, lam) or base.n_probes
    cfg = SamplerConfig(method="sghmc", n_probes=probes, cache_dtype=base.cache_dtype)
else:
    cfg = base
post = chain_posterior(op, y, cfg, redraw_every=cfg.sampler.redraw_every(cfg), rng=0)
t = time.perf_counter()
post.stochastic_grad(phi, 0)  # builds the preconditioner and the cached rows at φ
first = time.perf_counter() - t
at = op.with_log_params(phi)
k = 1 + cfg.n_probes


def product_time(width):
    V = np.random.default_rng(2).standard_normal((n, width))
    at.matmul(V)
    t = time.perf_counter()
    for _ in range(5):
        at.matmul(V)
    return (time.perf_counter() - t) / 5


per_product, per_narrow = product_time(k), product_time(1)
# the width (columns) of every product: once a column converges (or ULISSE stops it) it leaves the product
widths = []
_matmul = KernelOperator.matmul


def counted(self, V):
    widths.append(1 if V.ndim == 1 else V.shape[1])
    return _matmul(self, V)


KernelOperator.matmul = counted
secs, products, iters, width_runs = [], [], [], []
move = np.random.default_rng(3)
at_r = phi.copy()
for r in range(1, repeats + 1):
    p0 = op.n_products
    widths.clear()
    # a chain's step: h_max times a momentum drawn in the Laplace metric (SGHMC's whitened units), so the
    # cached rows are rebuilt and K⁻¹y's warm start is as far off as along a chain
    at_r = at_r + base.settings.h_max * (L @ move.standard_normal(phi.size))
    t = time.perf_counter()
    g, info = post.stochastic_grad(at_r, r)
    secs.append(time.perf_counter() - t)
    products.append(op.n_products - p0)
    iters.append(info["cg_iterations"])
    width_runs.append(list(widths))
f32, f64, mem = gemm_rate(np.float32), gemm_rate(np.float64), copy_rate()
floor_product = max(2.0 * n * n * k / f32, 4.0 * n * n / mem)


def floor_of(w):  # a product of w columns: its flops at the GEMM rate or its n² float32 reads, the larger
    return max(2.0 * n * n * w / f32, 4.0 * n * n / mem)


def time_of(w):  # measured at 1 and k columns, in between by the line through them
    return per_narrow + (per_product - per_narrow) * (w - 1) / max(k - 1, 1)


med = float(np.median(secs))
# the derivative pass (matmul_grads) is not a cached product: it stays in "everything else"
products_s = float(np.median([sum(time_of(w) for w in ws) for ws in width_runs]))
floor_s = float(np.median([sum(floor_of(w) for w in ws) for ws in width_runs]))
print("RESULT " + json.dumps({
    "daskgp": daskgp.__file__, "n": n, "data": data, "phi": phi.tolist(), "probes": cfg.n_probes,
    "noise_lambda_32": lam,
    "solver": cfg.solver_for(n), "tol": cfg.tol, "precond_rank": cfg.precond_rank_for(n),
    "first_gradient_s": first, "gradient_s": secs, "gradient_median_s": med, "products": products,
    "cg_iterations": iters, "product_widths": width_runs, "product_s": per_product,
    "product_1_column_s": per_narrow, "floor_product_s": floor_product,
    "products_s": products_s, "everything_else_s": med - products_s,
    "floor_gradient_s": floor_s, "ratio_to_floor": med / floor_s,
    "gemm_f32_gflops": f32 / 1e9, "gemm_f64_gflops": f64 / 1e9, "copy_gbs": mem / 1e9}))
'''


def _child(tree: Path, n: int, repeats: int) -> dict:
    return run_child(tree, CHILD, [str(n), str(repeats), str(HERE / "results" / "house8l_reference.json")],
                     timeout=3600, single_threaded=False)


def _table(results: dict) -> list[str]:
    rows = ["| n | side | probes | s/gradient | products | s/product (floor) | products s | "
            "everything else s | × floor |", "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(results["cases"].values(), key=lambda c: (c["n"], c["side"] != "before")):
        rows.append(f"| {r['n']:,} | {r['side']} | {r['probes']} | {r['gradient_median_s']:.2f} | "
                    f"{int(np.median(r['products']))} | "
                    f"{r['product_s']:.3f} ({r['floor_product_s']:.3f}) | {r['products_s']:.2f} | "
                    f"{r['everything_else_s']:.2f} | {r['ratio_to_floor']:.1f} |")
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE, help="the revision of the 'before' side")
    ap.add_argument("--sizes", default="1030,8192,22784")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sides", default="before,after")
    ap.add_argument("--redo", action="store_true")
    args = ap.parse_args(argv)
    results = load_results(OUT, "exact_roofline", args.redo)
    results["before_revision"] = args.before
    started = time.time()
    sizes = [int(s) for s in args.sizes.split(",")]
    sides = args.sides.split(",")
    try:
        for n in sizes:
            for side in sides:
                key = f"{side}/{n}"
                if key in results["cases"]:
                    continue
                print(f"{key} ...", flush=True)
                if side == "before":
                    with base_worktree(args.before) as tree:
                        res = _child(tree, n, args.repeats)
                else:
                    res = _child(ROOT, n, args.repeats)
                results["cases"][key] = {"side": side, **res}
                write_results(OUT, results)
                print(json.dumps({k: res[k] for k in ("gradient_median_s", "products", "product_s",
                                                      "everything_else_s", "ratio_to_floor")}), flush=True)
        for n in sizes:
            b, a = results["cases"].get(f"before/{n}"), results["cases"].get(f"after/{n}")
            if a and b:
                results.setdefault("speedup", {})[str(n)] = b["gradient_median_s"] / a["gradient_median_s"]
        a = results["cases"].get("after/22784")
        if a:  # the target: ≤ 15 s per gradient on house_8L's 22,784 rows
            results["ratio"] = a["gradient_median_s"] / 15.0
            results["target_met"] = a["gradient_median_s"] <= 15.0
    finally:
        close_segment(OUT, results, started, sizes=sizes, sides=sides)
    print("\n".join(_table(results)))


if __name__ == "__main__":
    main()
