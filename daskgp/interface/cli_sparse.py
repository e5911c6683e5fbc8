"""``daskgp sgpr``: distributed sparse variational GP regression on the command line."""

from __future__ import annotations

import os
import sys

import numpy as np

from .._version import __version__
from .cli_common import cluster_from_args, dataset_from_args, positive_int
from .progress import bound_progress


def sgpr_command(args) -> int:
    import pandas as pd

    from ..core.datasets import train_test
    from ..core.files import replaced_atomically
    from ..sparse.fit import FitCheckpoint
    from ..sparse.sgpr import SparseGPRegressor

    for name in ("inducing", "max_iter", "chunk_rows", "workers"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if os.path.exists(args.out) and not args.overwrite:
        raise FileExistsError(f"{args.out} exists; pass --overwrite to replace it")
    if not str(args.out).endswith((".nc", ".nc4", ".netcdf")):
        raise ValueError(f"--out must be a netCDF file ending in .nc, got {args.out}")
    ds, _ = dataset_from_args(args)
    train_size = (None if args.train_size in ("all", "full")
                  else positive_int(args.train_size, "--train-size"))
    Xtr, ytr, Xte, yte = train_test(ds, args.test_fraction, train_size, args.seed)
    if args.inducing > len(Xtr):
        raise ValueError(f"--inducing {args.inducing} is more than the {len(Xtr)} training rows")
    # the checkpoint's state is settled before a cluster starts: refusing costs nothing
    ckpt = FitCheckpoint(f"{args.out}.checkpoint.npz")
    if ckpt.exists() and not (args.resume or args.overwrite):
        raise FileExistsError(f"{ckpt.path} holds an interrupted fit: add --resume to continue it or "
                              "--overwrite to start afresh")
    if args.resume and not ckpt.exists():
        raise FileNotFoundError(f"no checkpoint to resume at {ckpt.path}")
    if args.overwrite and not args.resume:
        ckpt.remove()
    print(f"daskgp sgpr: {ds.name}, {len(Xtr)} training / {len(Xte)} test rows, d={Xtr.shape[1]}, "
          f"m={args.inducing}", flush=True)
    if args.resume:
        print(f"resuming from {ckpt.path} after {ckpt.iterations()} iterations", flush=True)
    est = SparseGPRegressor(n_inducing=args.inducing, max_iter=args.max_iter, chunk_rows=args.chunk_rows,
                            random_state=args.seed)
    names = list(ds.feature_names)  # the model keeps the column names (feature_names_in_)
    Xtr, Xte = pd.DataFrame(Xtr, columns=names), pd.DataFrame(Xte, columns=names)
    printer = bound_progress(args.max_iter)
    try:
        with cluster_from_args(args, stream=sys.stderr) as client:
            # the checkpoint stays until the results file is written
            est.fit(Xtr, ytr, callback=printer, client=client, checkpoint=ckpt, resume=args.resume,
                    keep_checkpoint=True)
            printer.done()
            mean, sd = est.predict(Xte, return_std=True)
    except KeyboardInterrupt:
        print(f"\ndaskgp: interrupted; the parameters after the last finished iteration are in {ckpt.path}; "
              f"continue with the same command plus --resume", file=sys.stderr)
        return 130
    rmse = float(np.sqrt(np.mean((mean - yte) ** 2)))
    rmse_mean = float(np.sqrt(np.mean((ytr.mean() - yte) ** 2)))
    res = est.to_dataset()
    res["test_mean"] = ("test", mean)
    res["test_sd"] = ("test", sd)
    res["test_y"] = ("test", yte)
    res.attrs.update(dataset=ds.name, target=ds.target_name, test_rmse=rmse, mean_predictor_rmse=rmse_mean,
                     n_test=len(yte), seed=args.seed, test_fraction=args.test_fraction,
                     daskgp_version=__version__)
    with replaced_atomically(args.out) as tmp:  # a finished file or none
        res.to_netcdf(tmp)
    ckpt.remove()
    print(f"bound {est.bound_:.1f} nats after {est.fit_info_['n_iterations']} iterations "
          f"({est.fit_info_['n_evaluations']} evaluations, {est.fit_info_['seconds']:.1f} s)")
    print(f"test RMSE {rmse:.3f} {ds.target_name} (mean predictor {rmse_mean:.3f}); results in {args.out}")
    return 0
