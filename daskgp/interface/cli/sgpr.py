"""``daskgp sgpr``: distributed sparse variational GP regression on the command line."""

from __future__ import annotations

import sys

import numpy as np

from ..progress import fit_progress
from .args import (
    check_counts,
    cluster_arguments,
    data_arguments,
    inducing_arguments,
    output_arguments,
    split_arguments,
)
from .common import announce_split, cluster_from_args, split_before_cluster, split_from_args, table_in_args
from .results import (
    HELDOUT_EVERY,
    attach_heldout,
    check_fit_outputs,
    gaussian_nlpd,
    naming_table_files,
    save_predictions,
    table_rmse,
    write_results,
)


def sgpr_command(args) -> int:
    import pandas as pd

    from ...sparse.fit import FitCheckpoint
    from ...sparse.sgpr import SparseGPRegressor

    check_counts(args, ("inducing", "max_iter", "chunk_rows", "workers"))
    ckpt = FitCheckpoint(f"{args.out}.checkpoint")
    # settled before a cluster starts: refusing costs nothing
    check_fit_outputs(args, ckpt, "daskgp.SparseGPRegressor")
    table, early = table_in_args(args), split_before_cluster(args)
    if early:
        ds, Xtr, ytr, Xte, yte = split_from_args(args, tables=True)
    if not table:
        names = list(ds.feature_names)  # the model keeps the column names (feature_names_in_)
        Xtr, Xte = pd.DataFrame(Xtr, columns=names), pd.DataFrame(Xte, columns=names)
    if args.overwrite and not args.resume:
        ckpt.remove()
    est = SparseGPRegressor(n_inducing=args.inducing, max_iter=args.max_iter, chunk_rows=args.chunk_rows,
                            random_state=args.seed, kernel=args.kernel, init=args.init)
    printer = fit_progress(args.max_iter, "L-BFGS-B", every=1)
    try:
        with cluster_from_args(args, stream=sys.stderr) as client:
            if not early:
                ds, Xtr, ytr, Xte, yte = split_from_args(args, tables=True)
            announce_split("sgpr", ds, Xtr, Xte, f"m={args.inducing}, kernel={args.kernel}")
            if args.resume:
                print(f"resuming from {ckpt.path} after {ckpt.iterations()} iterations", flush=True)
            # the checkpoint stays until the results file is written
            with naming_table_files(ds):
                est.fit(Xtr, ytr, callback=printer, client=client, checkpoint=ckpt, resume=args.resume,
                        keep_checkpoint=True, on_posterior=None if table else _heldout_logger(ckpt, Xte, yte))
            printer.done()
            mean, sd = est.predict(Xte, return_std=True)
            # a table's test metrics reduced on the workers; no row comes here
            reduced = table_rmse(ytr, yte, mean) if table else None
            if table:
                save_predictions(args, ds, yte, mean=mean, sd=sd)
    except KeyboardInterrupt:
        print(f"\ndaskgp: interrupted; the parameters after the last finished iteration are in {ckpt.path}; "
              f"continue with the same command plus --resume", file=sys.stderr)
        return 130
    res = attach_heldout(est.to_dataset(), ckpt)  # the held-out curve outlives the checkpoint
    rmse, rmse_mean = write_results(res, args.out, ds, args, ytr, yte, mean, sd, reduced)
    ckpt.remove()
    start = getattr(est, "start_info_", {})
    if start.get("init") == "subset":
        print(f"subset start: bound {start['bound_per_row_start']:.4f} -> {start['bound_per_row']:.4f} nats "
              f"per row on {start['rows']} rows ({start['iterations']} iterations)")
    stop = ("converged" if est.converged_ else
            f"not converged: stopped at --max-iter {args.max_iter} (a larger one fits further)"
            if est.n_iter_ >= args.max_iter else f"not converged: {est.fit_info_.get('message', '?')}")
    print(f"bound {est.bound_:.1f} nats after {est.fit_info_['n_iterations']} iterations "
          f"({est.fit_info_['n_evaluations']} evaluations, {est.fit_info_['seconds']:.1f} s; {stop})")
    print(f"test RMSE {rmse:.3f} {ds.target_name} (mean predictor {rmse_mean:.3f}); results in {args.out}")
    return 0


def _heldout_logger(ckpt, Xte, yte):
    """``on_posterior`` for a fit with its test rows in memory: every :data:`HELDOUT_EVERY` iterations (and
    the first) the iterate's test RMSE and mean negative log predictive density (nats, y units) go into the
    checkpoint's held-out log, for the dashboard. It costs predictions on the test rows here, no pass over
    the training rows."""
    X, y = np.asarray(Xte, np.float64), np.asarray(yte, np.float64)

    def log(iteration, seconds, predict):
        if iteration % HELDOUT_EVERY and iteration != 1:
            return
        mean, sd = predict(X)
        ckpt.log_heldout({"step": int(iteration), "seconds": float(seconds),
                          "test_rmse": float(np.sqrt(np.mean((mean - y) ** 2))),
                          "test_nlpd": gaussian_nlpd(y, mean, sd)})
    return log


def add_parser(sub) -> None:
    """``daskgp sgpr``'s flags, on the subcommands ``sub`` of the command line."""
    sg = sub.add_parser("sgpr", help="distributed sparse variational GP regression (map-reduce bound)")
    data_arguments(sg, "flights")
    inducing_arguments(sg)
    split_arguments(sg)
    sg.add_argument("--max-iter", type=int, default=1000, help="L-BFGS-B iterations")
    sg.add_argument("--chunk-rows", type=int, default=20_000, help="rows per chunk (one task each)")
    sg.add_argument("--init", choices=("kmeans", "subset"), default="kmeans",
                    help="where the fit starts: kmeans (Z at k-means centres of a 20,000-row sample) or "
                         "subset (then moved to the optimum of that sample's bound, in this process: a good "
                         "fit in a few passes over the rows, which can end below the kmeans start's after "
                         "many); a --resume needs the same --init")
    output_arguments(sg, "sgpr.nc", "netCDF file for parameters, bound trace, predictions",
                     "continue from the checkpoint folder OUT.checkpoint (committed every iteration) "
                     "after an interruption")
    cluster_arguments(sg)
    sg.set_defaults(func=sgpr_command)
