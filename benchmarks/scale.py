"""ADVGP and SGPR (and SEP, the GPLVM) on 10⁶–10⁸ rows of a Parquet table read on the workers (issues 34, 58),
on this machine's 2 cores: the synthetic taxi-like table of ``benchmarks/synthetic_taxi.py`` (**synthetic**,
said wherever it is reported), at least 8 files of at most 10⁶ rows, 1 % of the rows held out by the row-index
hash (``daskgp.datasets.split_table``).

Per size and method, in a process of its own (its peak resident memory is the client's), against one local
cluster of 2 single-threaded worker processes restarted before each case (their peak memory, VmHWM, is then
that case's):
- ``advgp``: ``ADVGPRegressor(n_inducing=100, tau=4)``, one partition per file, a wall budget
  (``--budget``); seconds per update, gradients per partition, and passes over the training rows (rows
  the gradients touched ÷ training rows);
- ``advgp-batch``: the same with ``batch_size=10_000`` (each gradient on 10⁴ rows drawn from its partition,
  so a gradient per partition is far less than a pass: "passes" counts rows, not gradients);
- ``advgp-paper-start``, ``advgp-batch-paper-start``: the same two from the paper's start (``init='kmeans'``,
  the default of daskgp <= 0.5) instead of the collapsed bound of a 2·10⁴-row sample;
- ``sgpr``: ``SparseGPRegressor(n_inducing=100)``, L-BFGS-B to ``--sgpr-iter`` iterations; seconds per
  evaluation of the bound (one pass over the rows: an epoch);
- ``sgpr-subset``: the same from ``init='subset'`` (the collapsed bound of the 2·10⁴-row k-means sample
  maximised in the client first) and only ``SUBSET_ITER`` (5) iterations over all rows — what a fixed budget
  of a few passes buys. The budget was set from a 10⁶-row trajectory (test RMSE 4.80–4.81 from iteration 1
  to 50 from this start, where the k-means start needs ~45 iterations to reach 4.81) before any larger run;
- ``advgp-rule``: ``ADVGPRegressor(n_inducing=100)`` at every default (τ = 0, rows per task 'auto', its
  stopping rule) until that rule stops it, resumable from its checkpoint beside the table — issue 58, item
  3's converged ADVGP (``benchmarks/taxi_capacity.py``: on 10⁵ rows its rule stopped it after 4,480
  updates at SGPR's RMSE);
- ``sep``: ``SparseGPClassifier(n_inducing=100, method='sep')`` on the label "the trip took more than 20
  minutes" (43 % of the rows) for ``--budget`` seconds at its defaults (minibatches of 2,000, then its
  factor re-made from every row): test NLL and error against the constant predictor's — issue 58, item 4's
  SEP from Parquet with the client flat;
- ``gplvm``: ``BayesianGPLVM(n_components=2)`` on the 9 inputs, 2 rounds of 5 global and 5 local
  iterations, its default 1,000-row chunks (until 12-02: one chunk per file), q(X) kept on the workers: the
  bound per row, seconds and the memory peaks — issue 58, item 4's 10⁷-row GPLVM with the client ≤ 1 GB
  (a bounded fit, not a converged one);
- ``gplvm-1``: the same with one round of 1 global and 1 local iteration — the memory case alone (two rounds
  of 5 + 5 had not finished in 19 minutes at 10⁶ rows);
- ``bayes``: no model — the test rows' own Bayes RMSE, the generator's mean function
  (``synthetic_taxi.mean_duration``) as the prediction: the floor each method's RMSE is divided by (the
  issue's 4.58 is the table's; a hold-out's own differs from it by its noise draw);
- ``linear``: the peer — ordinary least squares on the same training rows, exactly, by dask's tall-skinny
  QR on the workers (``da.linalg.lstsq``: the best any linear model, Vowpal Wabbit's included, can do on
  squared error), and the training mean;
- ``linear-normal``: the same least squares from the normal equations summed per chunk in long double (at
  10⁸ rows tsqr's Q blocks alone would be 8 GB); at 10⁶ and 10⁷ rows both are run and compared.
Each reports its test RMSE, reduced on the workers. Peng et al. report ADVGP 17 % better than the linear
model at 10⁹ taxi rows; the issue's target is 10 % at 10⁸.

    python benchmarks/scale.py [--rows 1e6,1e7,1e8] [--methods linear,advgp,sgpr] [--budget 600]

Resumable: results go to benchmarks/results/scale.json after every case, done cases are skipped (``--rerun
WHY`` measures them again, the earlier result kept under ``earlier_runs``), and
every invocation's wall time is appended to 'segments'; an SGPR case stopped mid-fit resumes from its
checkpoint (``taxi_<rows>.sgpr-checkpoint``, after every iteration; carried in git under
benchmarks/carried/ for the next session's fresh clone) to the same parameters. The tables
are generated once under benchmarks/runs/taxi_<rows>/ (git-ignored; ≈ 0.8 GB per 10⁷ rows).
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
from _common import CARRIED, carry_run, close_segment, load_results, restore_run, write_results  # noqa: E402

OUT = HERE / "results" / "scale.json"
TEST_FRACTION, M, BATCH = 0.01, 100, 10_000


def _passes(gradients: int, partitions: int, n_train: int, batch: int | None) -> float:
    """Passes over the training rows that ``gradients`` partition gradients made: each a whole partition
    (n_train / partitions rows, on average) or, with minibatches, ``batch`` rows."""
    rows = gradients * (n_train / partitions if batch is None else batch)
    return rows / n_train
SUBSET_ITER = 5  # sgpr-subset's L-BFGS-B iterations over all the rows
LONG_TRIP = 20.0  # minutes: the classifier's label (a trip longer than this; 43 % of the rows)
GPLVM_M, GPLVM_ROUNDS = 30, 2  # the GPLVM's inducing points (its default) and global/local rounds


def _hwm_mb() -> float:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmHWM:")[1].split()[0]) / 1024


def _normal_sums(A, y):
    """(AᵀA, Aᵀy) of one chunk in long double, 65,536 rows at a time (bounded memory)."""
    AtA, Aty = np.zeros((A.shape[1],) * 2, np.longdouble), np.zeros(A.shape[1], np.longdouble)
    for a in range(0, len(y), 1 << 16):
        Ab = A[a:a + (1 << 16)].astype(np.longdouble)
        AtA += Ab.T @ Ab
        Aty += Ab.T @ y[a:a + (1 << 16)].astype(np.longdouble)
    return AtA, Aty


def _resumable(folder: str, method: str):
    """A resumable case's checkpoint beside the table (``taxi_<rows>.<method>-checkpoint``), its sidecar of
    fit seconds spent so far and that sidecar's carried copy; the checkpoint restored from
    benchmarks/carried/ when only the archive is here. Returns (checkpoint, seconds file, carried seconds
    file, whether to resume, seconds of earlier segments)."""
    ckpt = Path(folder).with_name(Path(folder).name + f".{method}-checkpoint")
    spent_file = ckpt.with_name(ckpt.name + ".seconds.json")
    carried_spent = CARRIED / spent_file.name
    if restore_run(ckpt) and carried_spent.exists():
        shutil.copyfile(carried_spent, spent_file)
    resume = ckpt.exists()
    earlier = json.loads(spent_file.read_text())["seconds"] if resume and spent_file.exists() else 0.0
    return ckpt, spent_file, carried_spent, resume, earlier


def run_case(address: str, folder: str, method: str, budget: float, sgpr_iter: int) -> dict:
    """One case as a client of ``address``; returns its measurements."""
    import dask
    import dask.array as da
    from distributed import Client

    import daskgp as dg
    from daskgp.datasets import read_table, split_table

    client = Client(address, timeout=60)
    t0 = time.perf_counter()
    t = read_table(folder, target="duration_min")
    Xtr, ytr, Xte, yte = split_table(t, TEST_FRACTION, seed=0)
    out = {"rows": t.n, "n_train": int(Xtr.shape[0]), "n_test": int(Xte.shape[0]),
           "files": len(t.chunk_names), "method": method}
    if method == "bayes":
        from synthetic_taxi import mean_duration

        pred = Xte.map_blocks(mean_duration, drop_axis=1, dtype=float)
        out.update(test_rmse=float(da.sqrt(da.mean((pred - yte) ** 2))))
    elif method == "linear":
        A = da.concatenate([Xtr, da.ones((Xtr.shape[0], 1), chunks=(Xtr.chunks[0], 1))], axis=1)
        coef = da.linalg.lstsq(A.rechunk({1: -1}), ytr)[0]
        coef = coef.compute()
        pred = Xte @ coef[:-1] + coef[-1]
        rmse, rmse_mean = dask.compute(da.sqrt(da.mean((pred - yte) ** 2)),
                                       da.sqrt(da.mean((ytr.mean() - yte) ** 2)))
        out.update(test_rmse=float(rmse), mean_predictor_rmse=float(rmse_mean))
    elif method == "linear-normal":
        # the same least squares from the normal equations: one pass of (d+1)² sums per chunk, where tsqr's
        # Q blocks would be 8 GB at 10⁸ rows; the sums in long double (np.longdouble), the solve in float64
        A = da.concatenate([Xtr, da.ones((Xtr.shape[0], 1), chunks=(Xtr.chunks[0], 1))], axis=1)
        parts = dask.compute(*[dask.delayed(_normal_sums)(a, b) for a, b in
                               zip(A.rechunk({1: -1}).to_delayed().ravel(), ytr.to_delayed().ravel(),
                                   strict=True)])
        AtA, Aty = sum(p[0] for p in parts), sum(p[1] for p in parts)
        coef = np.linalg.solve(AtA.astype(np.float64), Aty.astype(np.float64))
        pred = Xte @ coef[:-1] + coef[-1]
        rmse, rmse_mean = dask.compute(da.sqrt(da.mean((pred - yte) ** 2)),
                                       da.sqrt(da.mean((ytr.mean() - yte) ** 2)))
        out.update(test_rmse=float(rmse), mean_predictor_rmse=float(rmse_mean))
    elif method.startswith("advgp") and method != "advgp-rule":  # (advgp-rule below: no budget)
        # advgp-batch: each gradient task on BATCH rows drawn afresh from its partition (scaled to the
        # partition), not on the whole partition: many more, noisier updates in the same wall time.
        # *-paper-start: from the paper's start (init='kmeans'), as daskgp <= 0.5 did, not from the
        # collapsed bound of a 2·10⁴-row sample (the default since)
        init = "kmeans" if method.endswith("-paper-start") else "subset"
        est = dg.ADVGPRegressor(n_inducing=M, tau=4, max_iter=10**9, tol=None, random_state=0, init=init,
                                batch_size=BATCH if method.startswith("advgp-batch") else None)
        t_fit = time.perf_counter()
        est.fit(Xtr, ytr, client=client, time_budget=budget)
        out.update(init=init, fit_seconds=time.perf_counter() - t_fit,
                   start={k: v for k, v in est.start_info_.items() if k != "message"})
        rec = est.records_
        grads = sum(est.gradients_per_partition_)
        out.update(updates=est.n_iter_, server_seconds=rec[-1].seconds,
                   seconds_per_update=rec[-1].seconds / est.n_iter_,
                   gradients_per_partition=grads / len(est.gradients_per_partition_),
                   passes=_passes(grads, len(est.gradients_per_partition_), len(ytr),
                                  BATCH if method.startswith("advgp-batch") else None),
                   staleness_max=int(max(max(r.staleness) for r in rec)))
        out["test_rmse"] = float(da.sqrt(da.mean((est.predict(Xte) - yte) ** 2)).compute())
    elif method in ("sgpr", "sgpr-subset"):
        # checkpointed after every L-BFGS-B iteration (at 10⁷ rows one evaluation is a minute or more): a
        # segment stopped mid-fit resumes bit for bit; the fit seconds of earlier segments are kept beside it
        # ... and carried across sessions in git (benchmarks/carried/, _common.carry_run) with its seconds
        ckpt, spent_file, carried_spent, resume, earlier = _resumable(folder, method)
        t_fit = time.perf_counter()

        def record(event):
            spent_file.write_text(json.dumps({"seconds": earlier + time.perf_counter() - t_fit,
                                              "iterations": event.step}))
            if carry_run(ckpt) is not None:
                shutil.copyfile(spent_file, carried_spent)

        subset = method == "sgpr-subset"
        est = dg.SparseGPRegressor(n_inducing=M, max_iter=SUBSET_ITER if subset else sgpr_iter,
                                   random_state=0, init="subset" if subset else "kmeans")
        try:
            est.fit(Xtr, ytr, client=client, checkpoint=str(ckpt), resume=resume, callback=record)
        except ValueError as e:  # a checkpoint of another table (regenerated with other file times)
            if not resume or str(ckpt) not in str(e):
                raise
            print(f"starting the SGPR fit afresh: {e}", file=sys.stderr)
            shutil.rmtree(ckpt)
            earlier = 0.0
            t_fit = time.perf_counter()
            est.fit(Xtr, ytr, client=client, checkpoint=str(ckpt), callback=record)
        info = est.fit_info_
        for done in (spent_file, carried_spent, CARRIED / f"{ckpt.name}.tar.gz"):
            done.unlink(missing_ok=True)
        # a resumed fit replays its earlier evaluations from the checkpoint (no pass over the rows): the
        # counts and the rate are this segment's passes, the fit seconds all segments'
        if est.start_info_.get("init") == "subset":
            out["start"] = {k: v for k, v in est.start_info_.items() if k != "message"}
        out.update(iterations=info["n_iterations"], evaluations_this_segment=info["n_evaluations"],
                   fit_seconds=earlier + info["seconds"], resumed_after=info["resumed_after"],
                   seconds_per_epoch=(info["seconds_evaluating"] / info["n_evaluations"]
                                      if info["n_evaluations"] else None))
        out["test_rmse"] = float(da.sqrt(da.mean((est.predict(Xte) - yte) ** 2)).compute())
    elif method == "advgp-rule":
        # issue 58, item 3: ADVGP at the library's defaults (τ = 0, rows per task 'auto', its stopping rule
        # tol = 1e-4, at most 5,000 updates), run until its own rule stops it — not a wall budget. A stopped
        # segment resumes from the checkpoint beside the table (every 10 updates); seconds add up over them
        # ... and carried across sessions in git every 100 updates (benchmarks/carried/), as SGPR's is
        ckpt, spent_file, carried_spent, resume, earlier = _resumable(folder, method)
        t_fit = time.perf_counter()

        def record(event):
            if event.step % 10 == 0:  # the checkpoint's own period: the seconds match what it holds
                spent_file.write_text(json.dumps({"seconds": earlier + time.perf_counter() - t_fit,
                                                  "updates": event.step}))
            if event.step % 100 == 0 and carry_run(ckpt) is not None:
                shutil.copyfile(spent_file, carried_spent)

        est = dg.ADVGPRegressor(n_inducing=M, random_state=0)
        est.fit(Xtr, ytr, client=client, checkpoint=str(ckpt), resume=resume, callback=record)
        for done in (spent_file, carried_spent, CARRIED / f"{ckpt.name}.tar.gz"):
            done.unlink(missing_ok=True)
        grads = sum(est.gradients_per_partition_)
        fit_seconds = earlier + time.perf_counter() - t_fit
        out.update(init=est.init, fit_seconds=fit_seconds, resumed=resume, updates=est.n_iter_,
                   converged=bool(est.converged_), batch_size=est.batch_size_,
                   refine_seconds=est.refine_seconds_,  # q(w) re-made from every row after the last update
                   seconds_per_update=fit_seconds / max(1, est.n_iter_),  # set-up included
                   gradients_per_partition=grads / len(est.gradients_per_partition_),
                   passes=_passes(grads, len(est.gradients_per_partition_), len(ytr), est.batch_size_))
        out["test_rmse"] = float(da.sqrt(da.mean((est.predict(Xte) - yte) ** 2)).compute())
    elif method == "sep":
        # the classifier on the same rows (issue 58, item 4): is the trip longer than LONG_TRIP minutes (43 %
        # of the rows); SEP at its defaults (minibatches of 2,000 beyond 20,000 rows, then its factor
        # re-made from every row), ``--budget`` seconds of minibatches; every pass where the rows are
        est = dg.SparseGPClassifier(n_inducing=M, method="sep", max_iter=10**9, random_state=0)
        t_fit = time.perf_counter()
        est.fit(Xtr, (ytr > LONG_TRIP).astype(int), client=client, time_budget=budget)
        out.update(label=f"duration_min > {LONG_TRIP:g}", fit_seconds=time.perf_counter() - t_fit,
                   iterations=est.n_iter_, batch_size=est.batch_size_, refine_seconds=est.refine_seconds_)
        p1 = da.clip(est.predict_proba(Xte)[:, 1], 1e-12, 1 - 1e-12)
        label = yte > LONG_TRIP
        nll, err, base = dask.compute(-da.mean(da.where(label, da.log(p1), da.log(1 - p1))),
                                      da.mean((p1 > 0.5) != label), da.mean(label))
        base = float(base)
        out.update(test_nll=float(nll), test_error=float(err), positive_fraction=base,
                   constant_nll=float(-(base * np.log(base) + (1 - base) * np.log(1 - base))))
    elif method in ("gplvm", "gplvm-1"):
        # the Bayesian GPLVM on the table's 9 inputs (issue 58, item 4): q(X) kept on the workers, in the
        # estimator's default chunks (1,000 rows: the best bound for the iterations at 10⁶ rows, for ≤ 12 %
        # more time than larger ones, benchmarks/gplvm_chunks.py); a bounded fit (GPLVM_ROUNDS rounds) —
        # what is measured is that it runs at this n with the client flat, not a converged embedding
        Y = Xtr.rechunk({1: -1})
        rounds, inner = (GPLVM_ROUNDS, 5) if method == "gplvm" else (1, 1)
        est = dg.BayesianGPLVM(n_components=2, n_inducing=GPLVM_M, n_outer=rounds, global_iter=inner,
                               local_iter=inner, random_state=0)
        t_fit = time.perf_counter()
        est.fit(Y, client=client)
        out.update(fit_seconds=time.perf_counter() - t_fit, rounds=rounds, iterations_per_round=inner,
                   m=GPLVM_M,
                   bound_per_row=float(est.bound_) / int(Y.shape[0]),
                   bound_trace=list(map(float, est.bound_trace_)),
                   embedding_on_workers=isinstance(est.embedding_, da.Array),
                   lengthscales=list(map(float, est.lengthscales_)))
    else:
        raise SystemExit(f"unknown method {method!r}")
    out["wall_seconds"] = time.perf_counter() - t0
    out["client_peak_mb"] = _hwm_mb()
    out["worker_peak_mb"] = sorted(client.run(_hwm_mb).values())
    client.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1e6,1e7,1e8")
    ap.add_argument("--methods", default="linear,advgp,advgp-batch,sgpr")
    ap.add_argument("--budget", type=float, default=600.0, help="ADVGP's wall seconds per case")
    ap.add_argument("--sgpr-iter", type=int, default=50)
    ap.add_argument("--worker-memory", default="8GiB")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--rerun", default=None, metavar="WHY",
                    help="measure the named methods' cases at these rows again; each case measured before is "
                         "kept under earlier_runs as 'ROWS/METHOD (WHY)'")
    ap.add_argument("--case", nargs=3, metavar=("ADDRESS", "FOLDER", "METHOD"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.case:  # the child: one case, its JSON on stdout
        print("RESULT", json.dumps(run_case(*a.case, a.budget, a.sgpr_iter)))
        return 0

    from distributed import Client, LocalCluster
    from synthetic_taxi import write

    from daskgp.compute.cluster import worker_environ

    res = load_results(OUT, "scale", a.fresh)
    if a.rerun:
        for rows in (int(float(r)) for r in a.rows.split(",")):
            for method in a.methods.split(","):
                old = res.get("cases", {}).pop(f"{rows}/{method}", None)
                if old is not None:
                    res.setdefault("earlier_runs", {})[f"{rows}/{method} ({a.rerun})"] = old
    res.update(data="synthetic taxi-like table (benchmarks/synthetic_taxi.py), NOT real trips", m=M,
               test_fraction=TEST_FRACTION, advgp_tau=4, advgp_budget=a.budget, sgpr_iter=a.sgpr_iter,
               workers=2, threads_per_worker=1, worker_memory=a.worker_memory)
    t_start = time.time()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                           memory_limit=a.worker_memory, env=worker_environ())
    client = Client(cluster)
    try:
        for rows in (int(float(r)) for r in a.rows.split(",")):
            folder = HERE / "runs" / f"taxi_{rows:.0e}".replace("+", "")
            t_gen = time.time()
            # at least 8 files (ADVGP's partitions: 4 per worker), at most 10⁶ rows each
            write(folder, rows, rows_per_file=min(1_000_000, -(-rows // 8)))
            res.setdefault("generation_seconds", {})[str(rows)] = res.get("generation_seconds", {}).get(
                str(rows), time.time() - t_gen)
            for method in a.methods.split(","):
                key = f"{rows}/{method}"
                if key in res["cases"]:
                    continue
                client.restart()  # fresh worker processes: their VmHWM is this case's
                argv = [sys.executable, __file__, "--case", cluster.scheduler_address, str(folder), method,
                        "--budget", str(a.budget), "--sgpr-iter", str(a.sgpr_iter)]
                r = subprocess.run(argv, capture_output=True, text=True, env=os.environ.copy())
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
                if r.returncode or not lines:
                    raise SystemExit(f"{key} failed: {r.stderr[-3000:]}")
                res["cases"][key] = json.loads(lines[-1][7:])
                write_results(OUT, res)
                c = res["cases"][key]
                score = next((f"{k} {c[k]:.4g}" for k in ("test_rmse", "test_nll", "bound_per_row")
                              if k in c), "")
                print(key, f"{score}, client {c['client_peak_mb']:.0f} MB, workers "
                      f"{c['worker_peak_mb']} MB, {c['wall_seconds']:.0f} s", flush=True)
    finally:
        client.close()
        cluster.close()
        close_segment(OUT, res, t_start, rows=a.rows, methods=a.methods)
    return 0


if __name__ == "__main__":
    sys.exit(main())
