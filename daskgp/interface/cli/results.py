"""A fitting command's results (``daskgp sgpr``, ``advgp``, ``gpc``): the results file with the held-out
metrics and the held-out log beside the checkpoint, a table's held-out predictions written by the workers,
and the checks that settle every output before a cluster starts (the writer rule: nothing written outside
the paths the user gave)."""

from __future__ import annotations

import contextlib
import os

import numpy as np

from .common import table_in_args

HELDOUT_EVERY = 10  # steps between the held-out measurements a fit command logs beside its checkpoint


def gaussian_nlpd(y, mean, sd) -> float:
    """Mean negative log predictive density (nats) of ``y`` under N(mean, sd²), all (n,) in y units."""
    return float(np.mean(0.5 * np.log(2 * np.pi * sd**2) + 0.5 * ((y - mean) / sd) ** 2))


def attach_heldout(res, ckpt):
    """The fitted model's Dataset ``res`` with the held-out log the command wrote beside its checkpoint
    ``ckpt`` (:meth:`daskgp.runs.fits.FitStore.log_heldout`): each record's step, wall seconds and numeric
    metrics as variables ``heldout_<name>`` along ``heldout``, so the results file keeps the curve once the
    checkpoint is removed (lists, such as calibration bins, stay in the log). A later record of a step
    supersedes an earlier one in its place: ADVGP's refined model at its last update (q(w) re-made from every
    row after the updates), so the curve ends at the model the file holds."""
    recs = list({r["step"]: r for r in ckpt.read_heldout() if isinstance(r.get("step"), int)}.values())
    if not recs:
        return res
    names = [k for k, v in recs[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    for k in names:
        vals = [r.get(k) for r in recs]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals):
            res[f"heldout_{k}"] = ("heldout", np.asarray(vals, float if k != "step" else int),
                                   {"units": "s"} if k == "seconds" else {})
    return res


def write_test_results(res, out: str, ds, args, ytr, yte, mean, sd) -> tuple[float, float]:
    """Add the test predictions, their RMSE (and the mean predictor's) and NLPD (nats) to a fitted model's
    Dataset ``res`` and write it to the netCDF ``out`` atomically (a finished file or none): the results file
    of ``daskgp sgpr`` and ``daskgp advgp``. Returns (test RMSE, mean-predictor RMSE), y units."""
    from ..._version import __version__
    from ...core.files import MARK, replaced_atomically

    rmse = float(np.sqrt(np.mean((mean - yte) ** 2)))
    rmse_mean = float(np.sqrt(np.mean((ytr.mean() - yte) ** 2)))
    nlpd = gaussian_nlpd(np.asarray(yte, float), np.asarray(mean, float), np.asarray(sd, float))
    res["test_mean"] = ("test", mean)
    res["test_sd"] = ("test", sd)
    res["test_y"] = ("test", yte)
    res.attrs.update(dataset=ds.name, target=ds.target_name, test_rmse=rmse, mean_predictor_rmse=rmse_mean,
                     test_nlpd=nlpd, n_test=len(yte), seed=args.seed, test_fraction=args.test_fraction,
                     daskgp_version=__version__)
    res.attrs[MARK] = res.attrs["model"]
    with replaced_atomically(out) as tmp:
        res.to_netcdf(tmp)
    return rmse, rmse_mean


def table_rmse(ytr, yte, mean) -> tuple[float, float]:
    """(test RMSE, the training mean's RMSE) of dask arrays, reduced on the workers in one computation."""
    import dask
    import dask.array as da

    rmse, rmse_mean = dask.compute(da.sqrt(da.mean((mean - yte) ** 2)),
                                   da.sqrt(da.mean((ytr.mean() - yte) ** 2)))
    return float(rmse), float(rmse_mean)


def write_results(res, out: str, ds, args, ytr, yte, mean, sd, reduced) -> tuple[float, float]:
    """The results file of ``daskgp sgpr|advgp``: :func:`write_test_results` for data in memory, or for a
    table :func:`write_table_results` with ``reduced``, its (test RMSE, mean predictor's RMSE) reduced on
    the workers while the cluster was up (:func:`table_rmse`). Returns those two."""
    from ...datasets import Table

    if isinstance(ds, Table):
        write_table_results(res, out, ds, args, int(yte.shape[0]), test_rmse=reduced[0],
                            mean_predictor_rmse=reduced[1])
        return reduced
    return write_test_results(res, out, ds, args, ytr, yte, mean, sd)


def write_table_results(res, out: str, table, args, n_test: int, **metrics: float) -> None:
    """A fitted model's Dataset ``res`` with the test ``metrics`` of a table (computed on the workers; the
    test rows' predictions are not gathered into the file) written to the netCDF ``out`` atomically."""
    from ..._version import __version__
    from ...core.files import MARK, replaced_atomically

    res.attrs.update(dataset=table.name, table=os.path.abspath(table.source), target=table.target_name,
                     **metrics, n_test=n_test, seed=args.seed,
                     test_fraction=args.test_fraction, split="row-index hash (daskgp.datasets.split_table)",
                     daskgp_version=__version__)
    res.attrs[MARK] = res.attrs["model"]
    with replaced_atomically(out) as tmp:
        res.to_netcdf(tmp)


@contextlib.contextmanager
def naming_table_files(ds):
    """Around a fit of a table's training split: a NaN or inf that the estimator finds is named by its
    chunk of the split; a table's error names the file and its row instead (one more pass over the table on
    the workers, only then)."""
    from ...core.validation import NonFiniteError
    from ...datasets import Table

    try:
        yield
    except NonFiniteError:
        if isinstance(ds, Table):
            ds.check_finite()  # raises, naming the file
        raise


def inputs_of(args) -> list[str]:
    """The paths a fit command reads (``--csv``, a ``--data`` table's folder, store or the files its glob
    matches): what none of its outputs may be, lie in or hold."""
    import glob

    paths = [args.csv] if getattr(args, "csv", None) else []
    if not paths and table_in_args(args):
        paths += [args.data] if os.path.exists(args.data) else sorted(glob.glob(args.data))
    return paths


def predictions_output(args):
    """``--predictions FOLDER`` as an :class:`daskgp.core.files.Output` (a new Parquet folder), or None;
    only with a table (data in memory keep their test predictions in ``--out``)."""
    from ...core.files import Output

    path = getattr(args, "predictions", None)
    if path is None:
        return None
    if not table_in_args(args):
        raise ValueError("--predictions is for a --data table; with data in memory the test predictions are "
                         f"in {args.out}")
    return Output(path, "predictions", flag="--predictions", folder=True)


def write_table_predictions(path: str, columns: dict) -> int:
    """Write the dask arrays ``columns`` (name → (n,), one row chunking) as the Parquet folder ``path``, one
    file per chunk, each written by the worker that computes it (no row comes to this process). A failed
    write removes the folder it made (it did not exist: :func:`predictions_output`). Returns the files
    written."""
    import shutil

    import dask.array as da
    import dask.dataframe as dd

    names = list(columns)
    arr = da.stack([columns[k].astype(float) for k in names], axis=1)
    try:
        dd.from_dask_array(arr, columns=names).to_parquet(path, write_index=False)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return len(arr.chunks[0])


def save_predictions(args, table, y_test, **columns) -> None:
    """With ``--predictions FOLDER``: the table's test target ``y_test`` and the prediction ``columns`` (dask
    arrays (n_test,)) written there from the workers (:func:`write_table_predictions`), and one line."""
    path = getattr(args, "predictions", None)
    if path is None:
        return
    files = write_table_predictions(path, {table.target_name: y_test, **columns})
    print(f"predictions of the {int(y_test.shape[0])} test rows in {path} ({files} Parquet files: "
          f"{', '.join([table.target_name, *columns])})", flush=True)


def check_fit_outputs(args, ckpt, kind: str) -> None:
    """Before any work, every output of a fit command by the one rule
    (:func:`daskgp.core.files.check_outputs`): ``--out`` a netCDF path daskgp may write a ``kind`` model to
    (new, or one it wrote with ``--overwrite``), ``--predictions`` a new folder, the checkpoint ``ckpt`` (an
    object with ``path``, ``kind`` and ``exists()``), none inside another or an input; and the checkpoint's
    state consistent with ``--resume`` — a foreign file at the checkpoint's name is never removed or read."""
    from ...core.files import Output, check_outputs, written_kind

    if os.path.isdir(args.out) and not os.path.islink(args.out):
        raise IsADirectoryError(f"--out {args.out} is a folder")
    outs = [Output(args.out, kind, overwrite=args.overwrite, suffixes=(".nc", ".nc4", ".netcdf")),
            predictions_output(args)]
    reads = inputs_of(args)
    check_outputs(outs, reads=reads)  # first: its lines name what the user typed
    if ckpt.exists() and not (args.resume or args.overwrite):
        raise FileExistsError(f"{ckpt.path} holds an interrupted fit: add --resume to continue it or "
                              "--overwrite to start afresh")
    if args.resume and not ckpt.exists():
        ckpt.check_legacy()  # one line for a checkpoint of daskgp <= 0.3 beside it
        raise FileNotFoundError(f"no checkpoint to resume at {ckpt.path}")
    if args.resume and written_kind(ckpt.path) != ckpt.kind:
        raise ValueError(f"{ckpt.path} is damaged or not a daskgp checkpoint, so nothing in it can be "
                         "resumed: delete it (or move it away) and run without --resume to start afresh")
    check_outputs([*outs, Output(ckpt.path, ckpt.kind, flag="the checkpoint",
                                 overwrite=args.overwrite or args.resume)], reads=reads)
