"""What the ``daskgp`` commands share: the cluster they compute on (and its quiet teardown after an
interruption), the data set named by the data arguments, output-path checks and the run summary."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np


def continue_command(path: str, cfg: dict, n_draws: int, target: int) -> str:
    """The command that continues the unconverged run at ``path`` toward ``target`` ESS and is accepted on
    it (tested literally): a run that used its whole iteration cap is given twice the cap; a run with a
    target that stopped short of its cap (stopped from the dashboard) just resumes; a fixed-length run takes
    the target (its cap becomes the targets' default)."""
    import shlex

    q = shlex.quote(path)
    if cfg.get("target_ess") and n_draws >= cfg["n_iter"]:
        return f"daskgp sample --resume {q} --target-ess {target} --iterations {2 * int(cfg['n_iter'])}"
    if cfg.get("target_ess") == target:
        return f"daskgp sample --resume {q}"
    return f"daskgp sample --resume {q} --target-ess {target}"


def print_summary(dt, psrf: bool = False, path: str | None = None) -> None:
    """The run's table and its verdict; ``path`` (the run's folder) makes the advice to continue an
    unconverged run a command to copy (:func:`continue_command`)."""
    import pandas as pd

    from ...mcmc.diagnostics import DEFAULT_TARGET_ESS, post_warmup, psrf_evolution, run_fidelity, run_summary

    cfg = dt.attrs["config"]
    table, notes = run_summary(dt)
    cap = "at most " if cfg.get("target_ess") else ""
    with pd.option_context("display.width", 140, "display.max_columns", 20):
        print(f"\n{cfg['method'].upper()} on {dt.attrs.get('data', {}).get('dataset', 'data')} "
              f"(n={dt.attrs['n']}): {dt['posterior'].sizes['chain']} chains × {dt.attrs['n_draws']} draws "
              f"of {cap}{cfg['n_iter']}, {dt.attrs['elapsed']:.1f} s wall; summary of the "
              f"{dt.attrs['n_draws'] - post_warmup(dt)[0].attrs['warmup_draws']} post-warmup draws per chain")
        print(table.round(4).to_string())
    for c, msg in sorted(dt.attrs.get("messages", {}).items()):
        print(f"chain {c} stopped: {msg}")
    if dt.attrs.get("writer"):
        print(f"note: {dt.attrs['writer']}: this summary covers the {dt.attrs['n_draws']} draws per chain "
              "committed so far")
    if dt.attrs.get("salvaged"):
        sv = dt.attrs["salvaged"]
        print(f"note: 'daskgp repair --salvage' cut this run back from {sv['committed_draws']} to "
              f"{sv['kept_draws']} draws per chain (damage: {sv['damage'][0]}); it cannot be resumed")
    for note in notes:
        print(f"note: {note}")
    worst = float(table["r_hat"].max())
    ess = float(min(table["ess_bulk"].min(), table["ess_tail"].min()))
    target, rhat_max = cfg.get("target_ess") or DEFAULT_TARGET_ESS, cfg.get("target_rhat", 1.01)
    rate = f"; {dt.attrs['elapsed'] / ess:.2f} s per effective sample" if ess > 0 else ""
    fid = run_fidelity(dt)

    if dt["posterior"].sizes["chain"] < 2:
        print(f"one chain: R-hat is undefined, so convergence cannot be judged; min bulk/tail ESS "
              f"{ess:.0f}{rate}")
    elif worst < rhat_max and ess >= target and fid is not None and not fid.trustworthy:
        print(f"NOT TRUSTWORTHY although the chains agree (max R-hat {worst:.3f}, min bulk/tail ESS "
              f"{ess:.0f}): {'; '.join(fid.reasons)}")
    elif worst < rhat_max and ess >= target:
        print(f"converged: max R-hat {worst:.3f} < {rhat_max}, min bulk/tail ESS {ess:.0f} >= {target}{rate}")
    else:
        how = continue_command(path or "RUN", cfg, int(dt.attrs["n_draws"]), target)
        print(f"not converged yet: max R-hat {worst:.3f} (want < {rhat_max}), min bulk/tail ESS {ess:.0f} "
              f"(want >= {target}){rate}; continue with: {how}")
    if psrf:
        sampled, _ = post_warmup(dt)
        ev = psrf_evolution(sampled, n_points=10)
        print("\nPSRF evolution (R-hat, classic Gelman–Rubin, over the first n post-warmup draws)")
        print(ev[["median", "q975"]].to_dataframe().round(4).to_string())


def table_in_args(args) -> bool:
    """Whether the data arguments name a table (``--data PATH``: Parquet, zarr, a CSV glob), not a built-in
    set or ``--csv FILE``."""
    from ...datasets import names_table

    return not args.csv and names_table(args.data)


def split_before_cluster(args) -> bool:
    """Whether ``daskgp sgpr|advgp`` split their data before a cluster starts (refusing it then costs
    nothing): data in memory, and a table read from its metadata alone (Parquet footers, zarr headers). A CSV
    glob's rows are counted where they are read, so it is split on the cluster."""
    from ...datasets.tables import counts_rows_by_reading

    return not (table_in_args(args) and counts_rows_by_reading(args.data))


def announce_split(command: str, ds, Xtr, Xte, settings: str) -> None:
    """The first line of a fit on the command line: the data, where a table is read, rows, settings."""
    from ...datasets import Table

    where = f" ({ds.kind}, {len(ds.chunk_names)} chunks read on the workers)" if isinstance(ds, Table) else ""
    print(f"daskgp {command}: {ds.name}{where}, {Xtr.shape[0]} training / {Xte.shape[0]} test rows, "
          f"d={Xtr.shape[1]}, {settings}", flush=True)


def refuse_features_without_table(args) -> None:
    """``--features`` names a table's columns: refused with data in memory (a built-in name, ``--csv``)."""
    if getattr(args, "features", None):
        raise ValueError("--features is for a --data table (Parquet, zarr or a CSV glob)")


def dataset_from_args(args, tables: bool = False):
    """The data arguments' data set and its spec: a built-in name, ``--csv FILE``, or — where the command
    reads one (``tables``) — a table on shared storage (``--data PATH`` of Parquet, zarr or a CSV glob, with
    ``--target`` and ``--features``), read on the workers (:func:`daskgp.datasets.read_table`)."""
    from ...datasets import load, load_csv, read_table

    if args.csv:
        ds = load_csv(args.csv, args.target if args.target is not None else -1)
        return ds, {"csv": os.path.abspath(args.csv), "target": ds.target_name}
    if table_in_args(args):
        if not tables:
            raise ValueError(f"--data {args.data} is a table (Parquet, zarr or a CSV glob): 'daskgp sgpr', "
                             "'advgp' and 'gpc' read tables; give a built-in name or --csv FILE here")
        t = read_table(args.data, target=args.target, features=getattr(args, "features", None))
        return t, {"table": os.path.abspath(args.data), "target": t.target_name,
                   "features": list(t.feature_names)}
    refuse_features_without_table(args)
    ds = load(args.data, data_dir=args.data_dir)
    spec = {"dataset": args.data}
    if args.data_dir:
        spec["data_dir"] = os.path.abspath(args.data_dir)
    return ds, spec


def check_out_path(path: str, kind: str, overwrite: bool, suffixes=(".csv",), reads=(),
                   flag: str = "--out") -> None:
    """An output file path, checked before any work by the one rule of
    :func:`daskgp.core.files.check_destination` (suffix, folder, no symbolic link, not an input, and only a
    file daskgp wrote as ``kind`` replaced, with ``overwrite``); never a folder."""
    from ...core.files import check_destination

    if os.path.isdir(path) and not os.path.islink(path):
        raise IsADirectoryError(f"{flag} {path} is a folder")
    check_destination(path, kind, overwrite=overwrite, suffixes=suffixes, reads=reads, flag=flag)


def positive_int(text, name: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer or 'all', got {text!r}") from None
    if v < 1:
        raise ValueError(f"{name} must be >= 1, got {v}")
    return v


@contextlib.contextmanager
def cluster_from_args(args, stream=None):
    """``with cluster_from_args(args) as client:`` the cluster named by the cluster arguments of
    :mod:`daskgp.interface.cli` (a new local one by default, closed on exit whatever happens; a scheduler's
    cluster is left running), announced on ``stream`` (stdout by default)."""
    from ...compute.cluster import borrowed_client, quiet_data_errors
    from ...core.validation import DataError

    with borrowed_client(None, args.scheduler, n_workers=args.workers, timeout=args.timeout,
                         device=getattr(args, "device", "cpu")) as client:
        n_workers = len(client.scheduler_info()["workers"])
        print(f"dask cluster: {n_workers} workers at {client.scheduler.address}", file=stream or sys.stdout,
              flush=True)
        if args.scheduler is None:  # our own workers: a bad file is the command's one line, not a traceback
            client.run(quiet_data_errors)
        try:
            yield client
        except KeyboardInterrupt:
            ignore_further_interrupts()  # a second Ctrl-C would break the teardown into tracebacks
            quiet_teardown(client)  # before the cluster closes with tasks still running
            raise
        except DataError:
            quiet_teardown(client)  # the tasks left running are cancelled: expected, and said in one line
            raise


def interrupt_once():
    """A command's SIGINT handler: the first Ctrl-C raises KeyboardInterrupt (the command saves what it has
    and says how to resume), and from that instant further SIGINTs are ignored by the OS. With Python's own
    handler a second press arriving while the first unwinds raised again wherever the main thread was —
    inside threading's lock bookkeeping once, which then failed with "release unlocked lock" and a
    traceback. Left alone where SIGINT is ignored already (a background job) or off the main thread.
    Returns a function that puts the previous handler back unless an interrupt came (then the process is on
    its way out and keeps ignoring them): ``main()`` called from Python leaves the caller's handler as it was.
    """
    import signal
    import threading

    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        return lambda: None

    from ...compute.cluster import drop_sync_cancel_bug
    from ..progress import note_interrupt

    drop_sync_cancel_bug()
    previous_hook = sys.unraisablehook

    def handler(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        note_interrupt(True)  # re-raised by the next progress update should this one be swallowed
        raise KeyboardInterrupt

    def unraisable(info):
        # Raised inside a callback Python cannot raise from (a gc callback of distributed's, a __del__),
        # the KeyboardInterrupt is printed as "Exception ignored in ..." with a traceback and dropped; it is
        # still pending and the next progress update raises it where the command catches it, so the page
        # of traceback says nothing true. Anything else goes to the hook that was there.
        if not issubclass(info.exc_type, KeyboardInterrupt):
            previous_hook(info)

    signal.signal(signal.SIGINT, handler)
    sys.unraisablehook = unraisable

    def restore():
        note_interrupt(False)  # the command is over: nothing pending carries into a later main() call
        if signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if sys.unraisablehook is unraisable:
            sys.unraisablehook = previous_hook

    return restore


def ignore_further_interrupts() -> None:
    """After the first Ctrl-C the command is already on its way out (saving what it has, closing its
    cluster, a few seconds at most): further SIGINTs are ignored, so that a user's second press cannot turn
    that teardown into a page of tracebacks. Only the main thread can set a handler: elsewhere a no-op."""
    import signal
    import threading

    from ..progress import note_interrupt

    note_interrupt(False)  # called where the KeyboardInterrupt was caught: it arrived
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def quiet_teardown(client=None) -> None:
    """Silence the loggers that report a cluster torn down mid-computation (broken comms, cancelled tasks),
    here and on the workers: after an interruption that is expected, and the one line the command prints says
    what happened."""
    from ...compute.cluster import quiet_logs

    quiet_logs()
    if client is not None:
        with contextlib.suppress(Exception):  # workers already gone have nothing left to print
            client.run(quiet_logs)


HELDOUT_EVERY = 10  # steps between the held-out measurements a fit command logs beside its checkpoint


def gaussian_nlpd(y, mean, sd) -> float:
    """Mean negative log predictive density (nats) of ``y`` under N(mean, sd²), all (n,) in y units."""
    return float(np.mean(0.5 * np.log(2 * np.pi * sd**2) + 0.5 * ((y - mean) / sd) ** 2))


def attach_heldout(res, ckpt):
    """The fitted model's Dataset ``res`` with the held-out log the command wrote beside its checkpoint
    ``ckpt`` (:meth:`daskgp.runs.fits.FitStore.log_heldout`): each record's step, wall seconds and numeric
    metrics as variables ``heldout_<name>`` along ``heldout``, so the results file keeps the curve once the
    checkpoint is removed (lists, such as calibration bins, stay in the log)."""
    recs = [r for r in ckpt.read_heldout() if isinstance(r.get("step"), int)]
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


def split_from_args(args, tables: bool = False):
    """The data arguments' data set and its fixed split (``--test-fraction``, ``--train-size``, ``--seed``),
    checked against ``--inducing``: (ds, X_train, y_train, X_test, y_test) in original units."""
    from ...datasets import Table, split_table, train_test

    ds, _ = dataset_from_args(args, tables=tables)
    train_size = (None if args.train_size in ("all", "full")
                  else positive_int(args.train_size, "--train-size"))
    if isinstance(ds, Table):  # split where the rows are: dask arrays, the counts from the row indices
        if train_size is not None:
            raise ValueError("--train-size is for data in memory; a --data table trains on all its non-test "
                             "rows")
        Xtr, ytr, Xte, yte = split_table(ds, args.test_fraction, args.seed)
        if args.inducing > Xtr.shape[0]:
            raise ValueError(f"--inducing {args.inducing} is more than the {Xtr.shape[0]} training rows")
        return ds, Xtr, ytr, Xte, yte
    Xtr, ytr, Xte, yte = train_test(ds, args.test_fraction, train_size, args.seed)
    if args.inducing > len(Xtr):
        raise ValueError(f"--inducing {args.inducing} is more than the {len(Xtr)} training rows")
    return ds, Xtr, ytr, Xte, yte
