"""``daskgp advgp``: asynchronous distributed variational GP regression (Peng, Zhe & Qi 2017) on the command
line, with the split, outputs and checkpointing of ``daskgp sgpr``."""

from __future__ import annotations

import sys

import numpy as np

from ...advgp.updates import ADVGP_UPDATES
from ..progress import fit_progress
from .args import (
    check_counts,
    cluster_arguments,
    data_arguments,
    inducing_arguments,
    method_options,
    method_setting_arguments,
    output_arguments,
    split_arguments,
)
from .common import (
    announce_split,
    batch_rows,
    cluster_from_args,
    split_before_cluster,
    split_from_args,
    table_in_args,
)
from .results import (
    attach_heldout,
    check_fit_outputs,
    gaussian_nlpd,
    naming_table_files,
    save_predictions,
    table_rmse,
    write_results,
)


def advgp_command(args) -> int:
    import pandas as pd

    from ...advgp.estimator import ADVGPRegressor
    from ...advgp.server import ServerCheckpoint

    check_counts(args, ("inducing", "max_iter", "workers"))
    batch = batch_rows(args.batch)
    if args.tau < 0:
        raise ValueError(f"--tau must be >= 0, got {args.tau}")
    ckpt = ServerCheckpoint(f"{args.out}.checkpoint")
    # settled before a cluster starts: refusing costs nothing
    check_fit_outputs(args, ckpt, "daskgp.ADVGPRegressor")
    table, early = table_in_args(args), split_before_cluster(args)
    est = ADVGPRegressor(n_inducing=args.inducing, max_iter=args.max_iter, tau=args.tau,
                         n_partitions=args.partitions, batch_size=batch, random_state=args.seed,
                         optimizer=args.optimizer, tol=args.tol or None, kernel=args.kernel, init=args.init,
                         update_options=method_options(args, ADVGP_UPDATES, args.optimizer, "--optimizer")
                         or None)
    if early:
        ds, Xtr, ytr, Xte, yte = split_from_args(args, tables=True)
        est._check_params(Xtr.shape[0])  # --partitions and the rest: refused before a cluster starts
    if not table:
        names = list(ds.feature_names)
        Xtr, Xte = pd.DataFrame(Xtr, columns=names), pd.DataFrame(Xte, columns=names)
        X_test = Xte.to_numpy(np.float64)
        last = {}

        def rmse_of(params):
            # (mean, sd): the NLPD is logged too
            last["pred"] = est._predict_block(X_test, params=params)
            return float(np.sqrt(np.mean((last["pred"][:, 0] - yte) ** 2)))

        def test_rmse(event):
            return rmse_of(event.model)
    else:  # a table's test rows stay on the workers: the RMSE once, at the end
        test_rmse = None
    if args.overwrite and not args.resume:
        ckpt.remove()
    def log_heldout(step, seconds, rmse):  # beside the checkpoint, for the dashboard
        ckpt.log_heldout({"step": int(step), "seconds": float(seconds), "test_rmse": float(rmse),
                          "test_nlpd": gaussian_nlpd(yte, last["pred"][:, 0], last["pred"][:, 1])})

    def log_rmse(event, rmse):
        log_heldout(event.step, event.seconds, rmse)

    printer = fit_progress(args.max_iter, "ADVGP", test_rmse, "test RMSE", "{:.3f}", on_metric=log_rmse)
    try:
        with cluster_from_args(args, stream=sys.stderr) as client:
            if not early:
                ds, Xtr, ytr, Xte, yte = split_from_args(args, tables=True)
                est._check_params(Xtr.shape[0])
            announce_split("advgp", ds, Xtr, Xte, f"m={args.inducing}, tau={args.tau}, kernel={args.kernel}")
            with naming_table_files(ds):
                est.fit(Xtr, ytr, client=client, callback=printer, checkpoint=ckpt.path, resume=args.resume,
                        keep_checkpoint=True)
            printer.done()
            if test_rmse is not None and est.refine_seconds_ is not None:
                # the refined model at the last update supersedes its held-out point (attach_heldout)
                log_heldout(est.n_iter_, est.records_[-1].seconds + est.refine_seconds_, rmse_of(est.params_))
            mean, sd = est.predict(Xte, return_std=True)
            reduced = table_rmse(ytr, yte, mean) if table else None  # on the workers; no row comes here
            if table:
                save_predictions(args, ds, yte, mean=mean, sd=sd)
    except KeyboardInterrupt:
        print(f"\ndaskgp: interrupted; the server's state is in {ckpt.path} (every 10 updates); continue "
              "with the same command plus --resume", file=sys.stderr)
        return 130
    res = attach_heldout(est.to_dataset(), ckpt)  # the held-out curve outlives the checkpoint
    rmse, rmse_mean = write_results(res, args.out, ds, args, ytr, yte, mean, sd, reduced)
    ckpt.remove()
    lost = (f"; {est.lost_partitions_} partition(s) placed again after lost workers" if est.lost_partitions_
            else "")
    refined = ("" if est.refine_seconds_ is None else
               f"; q(w) then re-made from every row at the final kernel ({est.refine_seconds_:.1f} s)")
    print(f"-ELBO {est.objective_:.1f} nats after {est.n_iter_} updates ({est.records_[-1].seconds:.1f} s, "
          f"largest staleness {max(max(r.staleness) for r in est.records_)}){lost}{refined}")
    print(f"test RMSE {rmse:.3f} {ds.target_name} (mean predictor {rmse_mean:.3f}); results in {args.out}")
    return 0


def add_parser(sub) -> None:
    """``daskgp advgp``'s flags, on the subcommands ``sub`` of the command line."""
    ad = sub.add_parser("advgp", help="asynchronous distributed variational GP regression (ADVGP)")
    data_arguments(ad, "flights")
    inducing_arguments(ad)
    ad.add_argument("--tau", type=int, default=0, help="staleness bound (0: synchronous)")
    ad.add_argument("--max-iter", type=int, default=5000,
                    help="the most server updates (the fit stops earlier once converged, see --tol)")
    ad.add_argument("--tol", type=float, default=1e-4,
                    help="stopping rule: nats per training row a window of updates must gain (0: never stop "
                         "early)")
    updates = ADVGP_UPDATES.methods()
    ad.add_argument("--optimizer", choices=[u.name for u in updates], default=updates[0].name,
                    help="the server's update: " + "; ".join(f"{u.name}: {u.label}" for u in updates))
    ad.add_argument("--init", choices=("subset", "kmeans"), default="subset",
                    help="where the kernel starts: subset (the collapsed bound of a 20,000-row sample, "
                         "maximised first) or kmeans (the paper's start); a --resume continues from its "
                         "checkpoint, which was made with the same --init")
    ad.add_argument("--partitions", type=int, default=None,
                    help="row partitions (default: 2 per worker; a table's own files)")
    ad.add_argument("--batch", default="auto",
                    help="rows per gradient task, a minibatch of its partition: a count, 'auto' (default: "
                         "16,384 rows at 100 inducing inputs, scaled as 1/m², divided among the partitions "
                         "beyond 2 a worker, all of a smaller partition) "
                         "or 'all' (the whole partition: exact gradients, however large)")
    method_setting_arguments(ad, ADVGP_UPDATES, "the update's own settings (each applies to the updates it "
                                                "names)")
    split_arguments(ad)
    output_arguments(ad, "advgp.nc", "netCDF results file",
                     "continue from the checkpoint folder OUT.checkpoint")
    cluster_arguments(ad)
    ad.set_defaults(func=advgp_command)
