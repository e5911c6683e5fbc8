"""``daskgp sgpr``: distributed sparse variational GP regression on the command line."""

from __future__ import annotations

import sys

from .cli_common import (
    check_fit_outputs,
    cluster_from_args,
    split_from_args,
    table_in_args,
    table_rmse,
    write_table_results,
    write_test_results,
)
from .progress import bound_progress


def sgpr_command(args) -> int:
    import pandas as pd

    from ..datasets.tables import counts_rows_by_reading
    from ..sparse.fit import FitCheckpoint
    from ..sparse.sgpr import SparseGPRegressor

    for name in ("inducing", "max_iter", "chunk_rows", "workers"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    ckpt = FitCheckpoint(f"{args.out}.checkpoint")
    # settled before a cluster starts: refusing costs nothing
    check_fit_outputs(args, ckpt, "daskgp.SparseGPRegressor")
    # settled before a cluster starts (refusing costs nothing): data in memory, and a table read from its
    # metadata alone (Parquet footers, zarr headers); a CSV glob's rows are counted where they are read,
    # on the cluster's workers
    table = table_in_args(args)
    early = not (table and counts_rows_by_reading(args.data))
    if early:
        ds, Xtr, ytr, Xte, yte = split_from_args(args, tables=True)
    if not table:
        names = list(ds.feature_names)  # the model keeps the column names (feature_names_in_)
        Xtr, Xte = pd.DataFrame(Xtr, columns=names), pd.DataFrame(Xte, columns=names)
    if args.overwrite and not args.resume:
        ckpt.remove()
    est = SparseGPRegressor(n_inducing=args.inducing, max_iter=args.max_iter, chunk_rows=args.chunk_rows,
                            random_state=args.seed, kernel=args.kernel)
    printer = bound_progress(args.max_iter)
    try:
        with cluster_from_args(args, stream=sys.stderr) as client:
            if not early:
                ds, Xtr, ytr, Xte, yte = split_from_args(args, tables=True)
            where = f" ({ds.kind}, {len(ds.chunk_names)} chunks read on the workers)" if table else ""
            print(f"daskgp sgpr: {ds.name}{where}, {Xtr.shape[0]} training / {Xte.shape[0]} test rows, "
                  f"d={Xtr.shape[1]}, m={args.inducing}, kernel={args.kernel}", flush=True)
            if args.resume:
                print(f"resuming from {ckpt.path} after {ckpt.iterations()} iterations", flush=True)
            # the checkpoint stays until the results file is written
            est.fit(Xtr, ytr, callback=printer, client=client, checkpoint=ckpt, resume=args.resume,
                    keep_checkpoint=True)
            printer.done()
            mean, sd = est.predict(Xte, return_std=True)
            if table:  # the test rows' metrics reduced on the workers; no row comes here
                rmse, rmse_mean = table_rmse(ytr, yte, mean)
    except KeyboardInterrupt:
        print(f"\ndaskgp: interrupted; the parameters after the last finished iteration are in {ckpt.path}; "
              f"continue with the same command plus --resume", file=sys.stderr)
        return 130
    if table:
        write_table_results(est.to_dataset(), args.out, ds, args, int(yte.shape[0]), rmse, rmse_mean)
    else:
        rmse, rmse_mean = write_test_results(est.to_dataset(), args.out, ds, args, ytr, yte, mean, sd)
    ckpt.remove()
    print(f"bound {est.bound_:.1f} nats after {est.fit_info_['n_iterations']} iterations "
          f"({est.fit_info_['n_evaluations']} evaluations, {est.fit_info_['seconds']:.1f} s)")
    print(f"test RMSE {rmse:.3f} {ds.target_name} (mean predictor {rmse_mean:.3f}); results in {args.out}")
    return 0
