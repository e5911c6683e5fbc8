"""``daskgp advgp``: asynchronous distributed variational GP regression (Peng, Zhe & Qi 2017) on the command
line, with the split, outputs and checkpointing of ``daskgp sgpr``."""

from __future__ import annotations

import os
import sys

import numpy as np

from .._version import __version__
from .cli_common import cluster_from_args, dataset_from_args, positive_int
from .progress import advgp_progress


def advgp_command(args) -> int:
    import pandas as pd

    from ..advgp.estimator import ADVGPRegressor
    from ..advgp.server import ServerCheckpoint
    from ..core.datasets import train_test
    from ..core.files import replaced_atomically

    for name in ("inducing", "max_iter", "workers"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.tau < 0:
        raise ValueError(f"--tau must be >= 0, got {args.tau}")
    if not str(args.out).endswith((".nc", ".nc4", ".netcdf")):
        raise ValueError(f"--out must be a netCDF file ending in .nc, got {args.out}")
    if os.path.exists(args.out) and not args.overwrite:
        raise FileExistsError(f"{args.out} exists; pass --overwrite to replace it")
    ckpt = ServerCheckpoint(f"{args.out}.checkpoint.json")
    if ckpt.exists() and not (args.resume or args.overwrite):
        raise FileExistsError(f"{ckpt.path} holds an interrupted fit: add --resume to continue it or "
                              "--overwrite to start afresh")
    if args.resume and not ckpt.exists():
        raise FileNotFoundError(f"no checkpoint to resume at {ckpt.path}")
    ds, _ = dataset_from_args(args)
    train_size = (None if args.train_size in ("all", "full")
                  else positive_int(args.train_size, "--train-size"))
    Xtr, ytr, Xte, yte = train_test(ds, args.test_fraction, train_size, args.seed)
    if args.inducing > len(Xtr):
        raise ValueError(f"--inducing {args.inducing} is more than the {len(Xtr)} training rows")
    if args.overwrite and not args.resume:
        ckpt.remove()
    print(f"daskgp advgp: {ds.name}, {len(Xtr)} training / {len(Xte)} test rows, d={Xtr.shape[1]}, "
          f"m={args.inducing}, tau={args.tau}", flush=True)
    est = ADVGPRegressor(n_inducing=args.inducing, max_iter=args.max_iter, tau=args.tau,
                         n_partitions=args.partitions, random_state=args.seed)
    names = list(ds.feature_names)
    Xtr, Xte = pd.DataFrame(Xtr, columns=names), pd.DataFrame(Xte, columns=names)
    X_test = Xte.to_numpy(np.float64)

    def test_rmse(params):
        mean = est._predict_block(X_test, params=params)[:, 0]
        return float(np.sqrt(np.mean((mean - yte) ** 2)))

    printer = advgp_progress(args.max_iter, test_rmse)
    try:
        with cluster_from_args(args, stream=sys.stderr) as client:
            est.fit(Xtr, ytr, client=client, callback=printer, checkpoint=ckpt.path, resume=args.resume,
                    keep_checkpoint=True)
            printer.done()
            mean, sd = est.predict(Xte, return_std=True)
    except KeyboardInterrupt:
        print(f"\ndaskgp: interrupted; the server's state is in {ckpt.path} (every 10 updates); continue "
              "with the same command plus --resume", file=sys.stderr)
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
    lost = (f"; {est.lost_partitions_} partition(s) placed again after lost workers" if est.lost_partitions_
            else "")
    print(f"-ELBO {est.objective_:.1f} nats after {est.n_iter_} updates ({est.records_[-1].seconds:.1f} s, "
          f"largest staleness {max(max(r.staleness) for r in est.records_)}){lost}")
    print(f"test RMSE {rmse:.3f} {ds.target_name} (mean predictor {rmse_mean:.3f}); results in {args.out}")
    return 0
