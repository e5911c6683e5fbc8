"""The ``daskgp`` command line. Errors end with one line on stderr and a non-zero exit, no traceback."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import warnings

import numpy as np

from .._version import __version__
from ..core.kernels import KERNELS
from ..mcmc.config import METHODS, SamplerConfig
from .progress import bound_progress, chain_progress

EXIT_USAGE, EXIT_ERROR = 2, 1


def _demo(args) -> int:
    from ..compute.operator import KernelOperator
    from ..core.datasets import load
    from ..core.kernels import make_kernel
    from ..core.validation import check_positive
    from ..exact.marginal import exact_log_marginal, log_marginal_gradient

    for name in ("variance", "lengthscale", "noise", "probes", "workers"):
        check_positive(name, getattr(args, name))
    ds = load(args.data, data_dir=args.data_dir)
    kernel = make_kernel(args.kernel, variance=args.variance, lengthscale=args.lengthscale, ard=args.ard,
                         n_dims=ds.X.shape[1])
    print(f"daskgp {__version__}: {ds.name}, n={ds.n}, d={ds.X.shape[1]}, kernel={kernel.name}"
          f"{' (ARD)' if kernel.ard else ''}, noise={args.noise}")
    with _cluster(args) as client:
        with KernelOperator(ds.X, kernel, args.noise, client=client, mode="distributed") as op:
            t0 = time.perf_counter()
            est = log_marginal_gradient(op, ds.y, n_probes=args.probes, rng=args.seed)
            t_sto = time.perf_counter() - t0
    t0 = time.perf_counter()
    exact = exact_log_marginal(ds.X, ds.y, kernel, args.noise)[1] if ds.n <= args.exact_max_n else None
    t_ex = time.perf_counter() - t0
    print(f"\n∂ log p(y|θ) / ∂ log θ  (ULISSE: N_r={args.probes} probes, seed {args.seed}, "
          f"CG iterations per column {est.cg_iterations.tolist()}, {t_sto:.2f} s)")
    print(f"{'parameter':>12} {'value':>9} {'ULISSE':>12} {'exact':>12}")
    values = np.exp(np.concatenate([kernel.log_params, [np.log(args.noise)]]))
    for j, name in enumerate(est.param_names):
        ex = f"{exact[j]:12.3f}" if exact is not None else f"{'(n too big)':>12}"
        print(f"{name:>12} {values[j]:9.3g} {est.grad[j]:12.3f} {ex}")
    if exact is not None:
        rel = np.linalg.norm(est.grad - exact) / np.linalg.norm(exact)
        print(f"relative error ‖g − g_exact‖/‖g_exact‖ = {rel:.3f}   (exact Cholesky: {t_ex:.2f} s)")
    return 0


def _print_summary(dt, psrf: bool = False) -> None:
    import pandas as pd

    from ..mcmc.diagnostics import DEFAULT_TARGET_ESS, post_warmup, psrf_evolution, run_summary

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
    if dt["posterior"].sizes["chain"] < 2:
        print(f"one chain: R-hat is undefined, so convergence cannot be judged; min bulk/tail ESS "
              f"{ess:.0f}{rate}")
    elif worst < rhat_max and ess >= target:
        print(f"converged: max R-hat {worst:.3f} < {rhat_max}, min bulk/tail ESS {ess:.0f} >= {target}{rate}")
    else:
        print(f"not converged yet: max R-hat {worst:.3f} (want < {rhat_max}), min bulk/tail ESS {ess:.0f} "
              f"(want >= {target}){rate}; continue with 'daskgp sample --resume RUN --target-ess {target}'")
    if psrf:
        sampled, _ = post_warmup(dt)
        ev = psrf_evolution(sampled, n_points=10)
        print("\nPSRF evolution (R-hat, classic Gelman–Rubin, over the first n post-warmup draws)")
        print(ev[["median", "q975"]].to_dataframe().round(4).to_string())


def _sample(args) -> int:
    from ..mcmc.chains import check_resumable, resume, sample
    from ..mcmc.control import RunControl, RunStopped
    from ..mcmc.runstore import check_new_run_path

    ds = spec = None
    replaced = None  # the folder a new run replaces once its first block is committed (by inode)
    for name in ("chains", "iterations", "probes", "checkpoint_every", "workers", "target_ess"):
        v = getattr(args, name, None)
        if v is not None and v < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    extend = dict(n_iter=args.iterations, target_ess=args.target_ess)
    if args.resume:
        _refuse_fixed_on_resume(args)
        out = args.resume
        if not os.path.isdir(out):
            raise FileNotFoundError(f"no run to resume at {out}")
        # before starting a cluster: intact, free, states well formed, a valid extension
        run, cfg, finished = check_resumable(out, **extend)
        if finished:
            from ..mcmc.diagnostics import open_run

            what = "meets its target" if run.checkpoint["n_draws"] < cfg.n_iter else "is complete"
            print(f"daskgp: {out} {what} ({run.checkpoint['n_draws']} draws per chain)", file=sys.stderr)
            _print_summary(open_run(out))
            return 0
        if run.lock is not None:
            print(f"daskgp: note: {run.lock.describe()}; taking over its lock", file=sys.stderr)
    else:
        if args.out is None:
            raise ValueError("--out run.zarr is required (or --resume run.zarr)")
        out = args.out
        if os.path.lexists(out) and not args.overwrite:
            raise FileExistsError(f"{out} exists: resume it with --resume {out}, or pass --overwrite")
        check_new_run_path(out, args.overwrite)  # only a daskgp run is ever overwritten
        replaced = os.stat(out).st_ino if os.path.lexists(out) else None
        ds, spec = _dataset(args)
        opts = dict(method=args.method, n_chains=args.chains, n_iter=args.iterations,
                    target_ess=args.target_ess, seed=args.seed, kernel=args.kernel, ard=args.ard,
                    n_probes=args.probes, checkpoint_every=args.checkpoint_every,
                    step_start=args.step_start, step_end=args.step_end,
                    freeze_threshold=args.freeze_threshold)
        _check_run_fits(opts, ds)  # before a cluster starts: a refusal costs nothing
    control = RunControl()
    previous = signal.signal(signal.SIGINT, _stop_on_first_sigint(control))
    dt = None
    try:
        with _cluster(args, stream=sys.stderr) as client:
            try:
                if args.resume:
                    dt = resume(out, client=client, progress=chain_progress(cfg.method), control=control,
                                **extend)
                else:
                    dt = sample(ds.X, ds.y, out=out, client=client, data_spec=spec, data_meta=ds.meta(),
                                overwrite=args.overwrite,
                                progress=chain_progress(args.method), control=control, **opts)
            except (KeyboardInterrupt, RunStopped):
                _quiet_teardown(client)  # the cluster closes next: its comms break loudly
    except KeyboardInterrupt:  # a second Ctrl-C while the cluster closes
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
    if dt is None:
        from ..mcmc.runstore import RunError, read_checkpoint

        try:  # a new run that never committed left the folder it was to replace as it was
            n = read_checkpoint(out)["n_draws"] if os.stat(out).st_ino != replaced else 0
        except (OSError, RunError):
            n = 0
        if n:
            print(f"\ndaskgp: interrupted; {n} draws per chain are saved in {out}; continue with "
                  f"'daskgp sample --resume {out}'", file=sys.stderr)
        else:
            kept = f"; the run that was at {out} is unchanged" if replaced is not None else ""
            print(f"\ndaskgp: interrupted before the first block was committed: nothing was saved{kept}",
                  file=sys.stderr)
        return 130
    _print_summary(dt)
    print(f"\nrun saved in {out} (daskgp summary {out}; daskgp predict {out} --x new.csv --out pred.csv)")
    return 0


def _stop_on_first_sigint(control):
    """A SIGINT handler: the first Ctrl-C stops the run as the dashboard's Stop does (the segments in flight
    are cancelled, the committed draws kept, the driver ends with RunStopped); a second one interrupts at
    once. A KeyboardInterrupt raised wherever the main thread happens to be can be swallowed (inside a
    garbage-collection callback of distributed, for one), so the first Ctrl-C does not rely on it."""
    def handler(signum, frame):
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Thread(target=control.stop, name="daskgp-sigint", daemon=True).start()

    return handler


def _dataset(args):
    from ..core.datasets import load, load_csv

    if args.csv:
        ds = load_csv(args.csv, args.target if args.target is not None else -1)
        return ds, {"csv": os.path.abspath(args.csv), "target": ds.target_name}
    ds = load(args.data, data_dir=args.data_dir)
    spec = {"dataset": args.data}
    if args.data_dir:
        spec["data_dir"] = os.path.abspath(args.data_dir)
    return ds, spec


def _summary(args) -> int:
    from ..mcmc.diagnostics import open_run

    if not os.path.isdir(args.run):
        raise FileNotFoundError(f"no run at {args.run}")
    _print_summary(open_run(args.run), psrf=args.psrf)
    return 0


def _repair(args) -> int:
    from ..mcmc.runstore import repair

    for line in repair(args.run, salvage=args.salvage, force=args.force):
        print(line)
    return 0


def _predict(args) -> int:
    from ..core.files import replaced_atomically, write_atomically
    from ..mcmc.estimator import BayesianGPRegressor

    if not os.path.isdir(args.run):
        raise FileNotFoundError(f"no run at {args.run}")
    if args.draws < 1:
        raise ValueError(f"--draws must be >= 1, got {args.draws}")
    if not 0 < args.level < 1:
        raise ValueError(f"--level must be in (0, 1), got {args.level}")
    _check_out(args.out, args.overwrite, (".csv", ".nc"))  # before any work
    netcdf = args.out.lower().endswith(".nc")
    if not netcdf and args.x is None:
        raise ValueError("--x new.csv is needed for a CSV of predictions (without --x, --out checks.nc holds "
                         "the posterior predictive checks at the training data)")
    est = BayesianGPRegressor.from_run(args.run, n_predict_draws=args.draws, level=args.level)
    inputs = _read_features(args.x, est) if args.x is not None else None
    if netcdf:
        from ..mcmc.checks import predictive_tree
        from ..mcmc.runstore import stored_dataset

        ds = stored_dataset(est.run_)
        if ds is None:
            raise ValueError(f"{args.run} holds no copy of its training data (a run of daskgp <= 0.2)")
        tree = predictive_tree(est.run_, ds, X_new=None if inputs is None else inputs.to_numpy(np.float64),
                               n_draws=args.draws, seed=args.seed,
                               feature_names=None if inputs is None else list(inputs.columns))
        with replaced_atomically(args.out) as tmp:
            tree.to_netcdf(tmp)
        what = ("posterior_predictive and log_likelihood at the training data" if inputs is None
                else f"predictions at {len(inputs)} new inputs")
        print(f"{what} from {tree.attrs['n_draws']} posterior draws written to {args.out} "
              "(arviz.from_netcdf; az.plot_ppc, az.loo)")
        return 0
    named = list(inputs.columns) == list(getattr(est, "feature_names_in_", []))
    with warnings.catch_warnings():  # unnamed columns are taken in order, as _read_features checked
        warnings.filterwarnings("ignore", "X does not have valid feature names")
        pred = est.predictive(inputs if named else inputs.to_numpy(np.float64))
    df = inputs.assign(mean=pred["mean"].values, sd=pred["sd"].values, lower=pred["lower"].values,
                       upper=pred["upper"].values)
    write_atomically(args.out, df.to_csv(index=False).encode("utf-8"))
    print(f"{len(df)} predictions ({len(est.log_draws_)} posterior draws, {args.level:.0%} intervals, "
          f"units of the target) written to {args.out}")
    return 0


# What a resumed run keeps from its own configuration and data: a flag for any of these cannot be honoured.
_FIXED_ON_RESUME = ("method", "chains", "kernel", "ard", "probes", "step_start", "step_end",
                    "freeze_threshold", "checkpoint_every", "seed", "data", "csv", "target", "data_dir",
                    "out", "overwrite")


def _refuse_fixed_on_resume(args) -> None:
    defaults = vars(_parser().parse_args(["sample"]))
    given = [n for n in _FIXED_ON_RESUME if getattr(args, n) != defaults[n]]
    if given:
        flags = ", ".join("--" + n.replace("_", "-") for n in given)
        raise ValueError(f"{flags} cannot change a run being resumed (it continues with its own settings and "
                         "data); --iterations and --target-ess extend it")


def _check_run_fits(opts: dict, ds) -> None:
    """The sampler's options checked against the data (sizes, memory) without any cluster."""
    from ..core.kernels import make_kernel
    from ..mcmc.config import check_method_fits

    cfg = SamplerConfig.from_dict(opts)
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=ds.X.shape[1])
    check_method_fits(cfg, ds.n, n_params=kernel.n_params + 1)


def _check_out(path: str, overwrite: bool, suffixes=(".csv",)) -> None:
    """An output file path, checked before any work: one of ``suffixes``, its folder present, not an existing
    file unless ``overwrite`` (never a folder)."""
    if not path.lower().endswith(suffixes):
        raise ValueError(f"--out {path}: give a path ending in {' or '.join(suffixes)}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"--out {path} is a folder")
    if os.path.lexists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"the output folder {parent} does not exist")


def _read_features(path, est):
    """The new inputs from a CSV as a DataFrame: the training feature columns by name (when the run knows
    them), else all columns; numeric, no missing values."""

    from ..core.datasets import check_numeric_frame, load_spec, read_csv_frame

    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    df = read_csv_frame(path, path)
    if len(df) == 0:
        raise ValueError(f"{path} has no rows")
    names = list((est.run_.attrs.get("data_meta") or {}).get("feature_names") or [])
    if not names:  # a run of daskgp <= 0.2: the names come from its data spec
        try:
            names = list(load_spec(est.run_.attrs["data"]).feature_names)
        except (ValueError, FileNotFoundError):
            names = []
    if names and set(names) <= set(df.columns):
        df = df[names]
    elif df.shape[1] != est.n_features_in_:
        raise ValueError(f"{path} has {df.shape[1]} columns; the model needs {est.n_features_in_} features"
                         + (f" named {names}" if names else ""))
    return check_numeric_frame(df, path)


def _sgpr(args) -> int:
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
    ds, _ = _dataset(args)
    train_size = (None if args.train_size in ("all", "full")
                  else _positive_int(args.train_size, "--train-size"))
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
        with _cluster(args, stream=sys.stderr) as client:
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


def _positive_int(text, name: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer or 'all', got {text!r}") from None
    if v < 1:
        raise ValueError(f"{name} must be >= 1, got {v}")
    return v


def _dashboard(args) -> int:

    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    if args.max_runs < 1 or args.max_upload_mb <= 0:
        raise ValueError("--max-runs must be >= 1 and --max-upload-mb > 0")
    import panel as pn

    from .app import create_app

    origins = [f"{args.address}:{args.port}", f"localhost:{args.port}", f"127.0.0.1:{args.port}"]
    print(f"daskgp dashboard on http://{args.address}:{args.port}/sgld"
          + ("" if args.address in ("127.0.0.1", "localhost") else
             "  (exposed beyond this machine: anyone who can reach it can start runs)"), flush=True)
    if args.address in ("127.0.0.1", "localhost"):
        print("only this machine can reach it; to expose it deliberately: --address 0.0.0.0 "
              "--allow-origin yourhost:PORT (and put it behind authentication)", flush=True)
    for address in args.allow_scheduler:
        if not address.startswith(("tcp://", "tls://")):
            raise ValueError(f"--allow-scheduler takes tcp://host:port addresses, got {address!r}")

    def app():  # a plain function: pn.serve renders a functools.partial as text instead of calling it
        return create_app(max_runs=args.max_runs, max_upload_mb=args.max_upload_mb,
                          schedulers=tuple(args.allow_scheduler))

    pn.serve({"sgld": app}, address=args.address, port=args.port, show=False,
             websocket_origin=origins + list(args.allow_origin), title="daskgp — SGLD dashboard",
             websocket_max_message_size=int(args.max_upload_mb * 2**20 * 1.5) + 2**20)
    return 0


def _check_common(args) -> None:
    """The arguments several commands share, checked before any data are read or a cluster starts."""
    timeout = getattr(args, "timeout", None)
    if timeout is not None and not (timeout > 0 and np.isfinite(timeout)):
        raise ValueError(f"--timeout must be a positive number of seconds, got {timeout}")
    seed = getattr(args, "seed", None)
    if seed is not None and seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {seed}")
    workers = getattr(args, "workers", None)
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        print(f"daskgp: error: {message} (see 'daskgp --help')", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _cluster_arguments(parser) -> None:
    """--scheduler, --workers, --timeout: what :func:`_cluster` connects to, for every subcommand that
    computes on a cluster."""
    parser.add_argument("--scheduler", default=None, help="tcp://host:8786 (default: start a local cluster)")
    parser.add_argument("--workers", type=int, default=2, help="workers of the local cluster")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler")


@contextlib.contextmanager
def _cluster(args, stream=None):
    """``with _cluster(args) as client:`` the cluster named by :func:`_cluster_arguments` (a new local one
    by default, closed on exit whatever happens; a scheduler's cluster is left running), announced on
    ``stream`` (stdout by default)."""
    from ..compute.cluster import borrowed_client

    with borrowed_client(None, args.scheduler, n_workers=args.workers, timeout=args.timeout) as client:
        n_workers = len(client.scheduler_info()["workers"])
        print(f"dask cluster: {n_workers} workers at {client.scheduler.address}", file=stream or sys.stdout,
              flush=True)
        try:
            yield client
        except KeyboardInterrupt:
            _quiet_teardown(client)  # before the cluster closes with tasks still running
            raise


def _quiet_teardown(client=None) -> None:
    """Silence the loggers that report a cluster torn down mid-computation (broken comms, cancelled tasks),
    here and on the workers: after an interruption that is expected, and the one line the command prints says
    what happened."""
    from ..compute.cluster import quiet_logs

    quiet_logs()
    if client is not None:
        with contextlib.suppress(Exception):  # workers already gone have nothing left to print
            client.run(quiet_logs)


def _data_arguments(parser, default: str) -> None:
    """--data NAME | --csv FILE [--target COL], and --data-dir: what :func:`_dataset` reads."""
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--data", default=default, help="concrete | house_8L | power_plant | flights")
    src.add_argument("--csv", default=None, help="your own numeric CSV with a header row")
    parser.add_argument("--target", default=None, help="target column of --csv (default: the last)")
    parser.add_argument("--data-dir", default=None,
                        help="folder with <name>.csv (else $DASKGP_DATA, user cache)")


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="daskgp", description="Scalable Bayesian Gaussian processes on Dask.")
    p.add_argument("--version", action="version", version=f"daskgp {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    d = sub.add_parser("demo", help="one unbiased gradient on a Dask cluster next to the exact one")
    d.add_argument("--data", default="concrete", help="concrete | house_8L | power_plant")
    d.add_argument("--data-dir", default=None, help="folder with <name>.csv (else $DASKGP_DATA, user cache)")
    d.add_argument("--kernel", default="rbf", choices=sorted(KERNELS))
    d.add_argument("--ard", action="store_true", help="one lengthscale per input dimension")
    d.add_argument("--variance", type=float, default=1.0)
    d.add_argument("--lengthscale", type=float, default=2.0)
    d.add_argument("--noise", type=float, default=0.3)
    d.add_argument("--probes", type=int, default=4, help="Hutchinson probe vectors N_r")
    d.add_argument("--seed", type=int, default=0)
    _cluster_arguments(d)
    d.add_argument("--exact-max-n", type=int, default=12_000, help="skip the exact gradient above this n")
    d.set_defaults(func=_demo)

    sm = sub.add_parser("sample", help="sample the GP hyperparameter posterior with chains on a Dask cluster")
    _data_arguments(sm, "concrete")
    sm.add_argument("--method", default=SamplerConfig.method, choices=list(METHODS),
                    help="sghmc (default: momentum on the noise-corrected stochastic gradients), sgld (the "
                         "paper's algorithm) or mh (exact Cholesky posterior: small n only)")
    sm.add_argument("--chains", type=int, default=4)
    sm.add_argument("--iterations", type=int, default=None,
                    help="iterations per chain (default 2,000; with --target-ess a cap, default 50,000); "
                         "with --resume, extend the run to this length")
    sm.add_argument("--target-ess", type=int, default=None, metavar="ESS",
                    help="run until every parameter's bulk and tail ESS reach ESS and every R-hat < 1.01; "
                         "with --resume, extend the run to this target")
    sm.add_argument("--kernel", default="rbf", choices=sorted(KERNELS))
    sm.add_argument("--ard", action="store_true", help="one lengthscale per input dimension")
    sm.add_argument("--probes", type=int, default=None,
                    help="Hutchinson probe vectors N_r per gradient (default 32 for sghmc, 4 otherwise)")
    sm.add_argument("--step-start", type=float, default=0.1, help="SGLD: first step size")
    sm.add_argument("--step-end", type=float, default=1e-3, help="SGLD: last step size (if never frozen)")
    sm.add_argument("--freeze-threshold", type=float, default=0.01, help="SGLD: freeze rule threshold")
    sm.add_argument("--checkpoint-every", type=int, default=100, help="iterations per checkpoint")
    sm.add_argument("--seed", type=int, default=0)
    sm.add_argument("--out", default=None, help="zarr store for the run, e.g. run.zarr")
    sm.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    sm.add_argument("--resume", default=None, metavar="RUN", help="continue an interrupted run")
    _cluster_arguments(sm)
    sm.set_defaults(func=_sample)

    su = sub.add_parser("summary", help="ArviZ summary, time per effective sample, PSRF of a run")
    su.add_argument("run", help="a run written by 'daskgp sample' (run.zarr)")
    su.add_argument("--psrf", action="store_true", help="also print the PSRF evolution")
    su.set_defaults(func=_summary)

    rp = sub.add_parser("repair", help="mend a run after a crash (stale lock, torn append, bad checkpoint)")
    rp.add_argument("run", help="a run written by 'daskgp sample' (run.zarr)")
    rp.add_argument("--salvage", action="store_true",
                    help="cut a run with damaged draws back to its intact blocks (no resume after that)")
    rp.add_argument("--force", action="store_true",
                    help="clear a lock from another host or an unreadable one (if nothing writes the run)")
    rp.set_defaults(func=_repair)

    pr = sub.add_parser("predict", help="posterior predictive of a run at new inputs, or its checks")
    pr.add_argument("run", help="a run written by 'daskgp sample' (run.zarr)")
    pr.add_argument("--x", default=None, help="CSV of new inputs (the training feature columns)")
    pr.add_argument("--out", required=True,
                    help="pred.csv: the input columns, then mean, sd, lower, upper (units of the target); "
                         "or pred.nc: ArviZ groups - predictions at --x, or without --x posterior_predictive "
                         "and log_likelihood at the training data (az.plot_ppc, az.loo)")
    pr.add_argument("--seed", type=int, default=0, help="seed of the replicated y (.nc output)")
    pr.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    pr.add_argument("--draws", type=int, default=50, help="posterior draws to mix over")
    pr.add_argument("--level", type=float, default=0.95, help="central interval probability")
    pr.set_defaults(func=_predict)

    sg = sub.add_parser("sgpr", help="distributed sparse variational GP regression (map-reduce bound)")
    _data_arguments(sg, "flights")
    sg.add_argument("--inducing", type=int, default=100, help="inducing points m")
    sg.add_argument("--train-size", default="all", help="training rows (from the non-test rows) or all")
    sg.add_argument("--test-fraction", type=float, default=0.1, help="held-out fraction (fixed random split)")
    sg.add_argument("--max-iter", type=int, default=200, help="L-BFGS-B iterations")
    sg.add_argument("--chunk-rows", type=int, default=20_000, help="rows per chunk (one task each)")
    sg.add_argument("--seed", type=int, default=0, help="split and k-means seed")
    sg.add_argument("--out", default="sgpr.nc", help="netCDF file for parameters, bound trace, predictions")
    sg.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    sg.add_argument("--resume", action="store_true",
                    help="continue from OUT.checkpoint.npz (written every iteration) after an interruption")
    _cluster_arguments(sg)
    sg.set_defaults(func=_sgpr)

    db = sub.add_parser("dashboard", help="serve the live SGLD dashboard (Panel)")
    db.add_argument("--address", default="127.0.0.1", help="interface to bind (default: this machine only)")
    db.add_argument("--port", type=int, default=5006)
    db.add_argument("--allow-origin", action="append", default=[], metavar="HOST:PORT",
                    help="extra websocket origin allowed (when exposing the dashboard deliberately)")
    db.add_argument("--max-runs", type=int, default=2, help="concurrent runs across all sessions")
    db.add_argument("--max-upload-mb", type=float, default=50, help="largest CSV upload accepted")
    db.add_argument("--allow-scheduler", action="append", default=[], metavar="tcp://HOST:PORT",
                    help="a dask-scheduler the page may choose instead of the local cluster (repeatable; "
                         "without it the page cannot point the server at any scheduler)")
    db.set_defaults(func=_dashboard)
    return p


def main(argv=None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse printed its one-line usage error
        return int(e.code or 0) and EXIT_USAGE
    try:
        _check_common(args)
        return args.func(args)
    except KeyboardInterrupt:
        print("daskgp: interrupted", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, ConnectionError, MemoryError, OSError, FloatingPointError,
            TimeoutError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"daskgp: error: {msg}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
