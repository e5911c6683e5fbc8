"""What the ``daskgp`` commands share: the cluster they compute on (and its quiet teardown after an
interruption), the data set named by the data arguments and its held-out split, output-path checks and the
run summary. A fitting command's results — the file, a table's predictions, the held-out log — are
:mod:`.results`."""

from __future__ import annotations

import contextlib
import os
import sys


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


def positive_int(text, name: str, words: tuple[str, ...] = ("all",)) -> int:
    """``text`` as a count ≥ 1, refused in one line naming the flag and the ``words`` it also takes (the
    caller handles those)."""
    try:
        v = int(text)
    except ValueError:
        named = " or ".join(repr(w) for w in words)
        raise ValueError(f"{name} must be a positive integer or {named}, got {text!r}") from None
    if v < 1:
        raise ValueError(f"{name} must be >= 1, got {v}")
    return v


def batch_rows(text: str) -> int | str | None:
    """--batch: a count of rows (≥ 1), 'auto' (the estimator chooses from the data) or 'all' (None: every
    row, or the whole partition); refused in one line."""
    if text == "all":
        return None
    return text if text == "auto" else positive_int(text, "--batch", ("auto", "all"))


@contextlib.contextmanager
def cluster_from_args(args, stream=None):
    """``with cluster_from_args(args) as client:`` the cluster named by the cluster arguments of
    :mod:`daskgp.interface.cli` (a new local one by default, closed on exit whatever happens; a scheduler's
    cluster is left running), announced on ``stream`` (stdout by default)."""
    from ...compute.cluster import borrowed_client, cluster_workers, quiet_data_errors
    from ...core.validation import DataError

    with borrowed_client(None, args.scheduler, n_workers=args.workers, timeout=args.timeout,
                         device=getattr(args, "device", "cpu")) as client:
        n_workers = len(cluster_workers(client))
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
