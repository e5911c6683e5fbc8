"""``daskgp sample``, ``summary``, ``repair`` and ``predict``: the MCMC runs of the GP hyperparameters on the
command line."""

from __future__ import annotations

import os
import signal
import sys
import threading
import warnings

import numpy as np

from ...mcmc.config import SamplerConfig
from ...mcmc.samplers import AUTO, default_method
from ...mcmc.samplers.registry import SAMPLERS
from ..progress import chain_progress, keepalive, warmup_progress
from .args import check_counts, method_options, method_setting_arguments, settings_given
from .common import check_out_path, cluster_from_args, dataset_from_args, print_summary, quiet_teardown


def sample_command(args) -> int:
    from ...mcmc.chains import check_no_warmup_beside, check_resumable, resume, sample, warmup_to_resume
    from ...mcmc.control import RunControl, RunStopped
    from ...runs.draws import check_new_run_path, remove_dead_staging

    ds = spec = None
    replaced = None  # the folder a new run replaces once its first block is committed (by inode)
    check_counts(args, (), optional=("chains", "iterations", "probes", "checkpoint_every", "workers",
                                     "target_ess", "workers_per_chain"))
    extend = dict(n_iter=args.iterations, target_ess=args.target_ess)
    if args.resume:
        _refuse_fixed_on_resume(args)
        out = args.resume
        warm = warmup_to_resume(out)  # a run interrupted in its warmup: that first
        if warm is not None:
            from ...runs.lock import RunLocked, lock_info

            info = lock_info(warm[0].path)
            if info is not None and info.state != "stale":
                raise RunLocked(f"{warm[0].path} cannot be resumed: {info.describe()}")
            cfg, finished = warm[2]["config"], False
            print(f"daskgp: {out} was interrupted in its warmup: continuing it from gradient {warm[1]}",
                  file=sys.stderr)
        elif not os.path.isdir(out):
            raise FileNotFoundError(f"no run to resume at {out}")
        else:  # before starting a cluster: intact, free, states well formed, a valid extension
            run, cfg, finished = check_resumable(out, **extend)
        if finished:
            from ...mcmc.diagnostics import open_run

            what = "meets its target" if run.checkpoint["n_draws"] < cfg.n_iter else "is complete"
            print(f"daskgp: {out} {what} ({run.checkpoint['n_draws']} draws per chain)", file=sys.stderr)
            print_summary(open_run(out), path=out)
            return 0
        if warm is None and run.lock is not None:
            print(f"daskgp: note: {run.lock.describe()}; taking over its lock", file=sys.stderr)
    else:
        if args.out is None:
            raise ValueError("--out run.zarr is required (or --resume run.zarr)")
        out = args.out
        if os.path.lexists(out) and not args.overwrite:
            raise FileExistsError(f"{out} exists: resume it with --resume {out}, or pass --overwrite")
        check_new_run_path(out, args.overwrite)  # only a daskgp run is ever overwritten
        check_no_warmup_beside(out, args.overwrite)
        for line in remove_dead_staging(out):  # an earlier attempt's, whose writer stopped before a block
            print(f"daskgp: {line}", file=sys.stderr)
        replaced = os.stat(out).st_ino if os.path.lexists(out) else None
        ds, spec = dataset_from_args(args)
        opts = dict(method=args.method, n_chains=args.chains, n_iter=args.iterations,
                    target_ess=args.target_ess, seed=args.seed, kernel=args.kernel, ard=args.ard,
                    n_probes=args.probes, checkpoint_every=args.checkpoint_every, warmup=args.warmup,
                    device=args.device, workers_per_chain=args.workers_per_chain)
        if opts["method"] == AUTO:  # chosen by the data's size; the progress lines name it
            opts["method"] = default_method(ds.n)
        opts["options"] = sampler_options(args, opts["method"])
        _check_run_fits(opts, ds)  # before a cluster starts: a refusal costs nothing
    control = RunControl()
    previous = signal.signal(signal.SIGINT, _stop_on_first_sigint(control))
    dt = None
    try:
        with cluster_from_args(args, stream=sys.stderr) as client, keepalive(sys.stderr):
            try:
                if args.resume:
                    dt = resume(out, client=client, progress=chain_progress(cfg.method), control=control,
                                workers_per_chain=args.workers_per_chain, on_warmup=warmup_progress(),
                                **extend)
                else:
                    dt = sample(ds.X_std, ds.y_std, out=out, client=client, data_spec=spec,
                                data_meta=ds.meta(), overwrite=args.overwrite,
                                progress=chain_progress(opts["method"]), control=control,
                                on_warmup=warmup_progress(), **opts)
            except (KeyboardInterrupt, RunStopped):
                quiet_teardown(client)  # the cluster closes next: its comms break loudly
    except KeyboardInterrupt:  # a second Ctrl-C while the cluster closes
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
    if dt is None:
        from ...runs.draws import RunError, read_checkpoint

        try:  # a new run that never committed left the folder it was to replace as it was
            n = read_checkpoint(out)["n_draws"] if os.stat(out).st_ino != replaced else 0
        except (OSError, RunError):
            n = 0
        from ...mcmc.warmup import WarmupStore, warmup_path

        warmed = WarmupStore(warmup_path(out)).iterations() if not n else 0
        if n:
            print(f"\ndaskgp: interrupted; {n} draws per chain are saved in {out}; continue with "
                  f"'daskgp sample --resume {out}'", file=sys.stderr)
        elif warmed:
            print(f"\ndaskgp: interrupted in the warmup; its first {warmed} gradients are saved in "
                  f"{warmup_path(out)}; continue with 'daskgp sample --resume {out}'", file=sys.stderr)
        else:
            kept = f"; the run that was at {out} is unchanged" if replaced is not None else ""
            print(f"\ndaskgp: interrupted before the first block was committed: nothing was saved{kept}",
                  file=sys.stderr)
        return 130
    print_summary(dt, path=out)
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


def summary_command(args) -> int:
    from ...mcmc.diagnostics import open_run

    if not os.path.isdir(args.run):
        from ...mcmc.warmup import WarmupStore, warmup_path

        done = WarmupStore(warmup_path(args.run)).iterations()
        if done:
            raise FileNotFoundError(f"no draws at {args.run} yet: its warmup ({done} gradients) is "
                                    f"checkpointed in {warmup_path(args.run)}; continue it with 'daskgp "
                                    f"sample --resume {args.run}'")
        raise FileNotFoundError(f"no run at {args.run}")
    print_summary(open_run(args.run), psrf=args.psrf, path=args.run)
    return 0


def repair_command(args) -> int:
    from ...runs.draws import remove_dead_staging, repair
    from ...runs.fits import is_fit_store, repair_fit

    staged = remove_dead_staging(args.run)  # a new run's folder left by a writer that stopped before a block
    for line in staged:
        print(line)
    if staged and not os.path.exists(args.run):
        return 0
    if is_fit_store(args.run):  # a fit's checkpoint (sgpr, advgp, gpc, gplvm): the same commits and lock
        if args.salvage:
            raise ValueError(f"{args.run} is a fit's checkpoint: --salvage applies to a run's draws only")
        lines = repair_fit(args.run, force=args.force)
    else:
        lines = repair(args.run, salvage=args.salvage, force=args.force)
    for line in lines:
        print(line)
    return 0


def predict_command(args) -> int:
    from ...core.files import MARK, replaced_atomically, write_atomically
    from ...mcmc.estimator import BayesianGPRegressor

    if not os.path.isdir(args.run):
        raise FileNotFoundError(f"no run at {args.run}")
    if args.draws < 1:
        raise ValueError(f"--draws must be >= 1, got {args.draws}")
    if not 0 < args.level < 1:
        raise ValueError(f"--level must be in (0, 1), got {args.level}")
    netcdf = args.out.lower().endswith(".nc")
    check_out_path(args.out, CHECKS_KIND if netcdf else "predictions", args.overwrite, (".csv", ".nc"),
                   reads=(args.x, args.run))  # before any work
    if not netcdf and args.x is None:
        raise ValueError("--x new.csv is needed for a CSV of predictions (without --x, --out checks.nc holds "
                         "the posterior predictive checks at the training data)")
    est = BayesianGPRegressor.from_run(args.run, n_predict_draws=args.draws, level=args.level)
    inputs = _read_features(args.x, est) if args.x is not None else None
    if netcdf:
        from ...mcmc.checks import predictive_tree
        from ...runs.draws import stored_dataset

        ds = stored_dataset(est.run_)
        if ds is None:
            raise ValueError(f"{args.run} holds no copy of its training data (a run of daskgp <= 0.2)")
        tree = predictive_tree(est.run_, ds, X_new=None if inputs is None else inputs.to_numpy(np.float64),
                               n_draws=args.draws, seed=args.seed,
                               feature_names=None if inputs is None else list(inputs.columns))
        tree.attrs[MARK] = CHECKS_KIND
        with replaced_atomically(args.out) as tmp:
            tree.to_netcdf(tmp)
        what = ("posterior_predictive and log_likelihood at the training data" if inputs is None
                else f"predictions at {len(inputs)} new inputs")
        print(f"{what} from {tree.attrs['n_draws']} posterior draws written to {args.out} "
              "(arviz.from_netcdf; az.plot_ppc_dist, az.loo)")
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


CHECKS_KIND = "daskgp.predictive-checks"  # the marker of `predict --out F.nc` (an ArviZ DataTree)


# What a resumed run keeps from its own configuration and data: a flag for any of these cannot be honoured.
# (and every sampler's own settings, :func:`sampler_setting_arguments`)
FIXED_ON_RESUME = ("method", "chains", "kernel", "ard", "probes", "checkpoint_every", "seed", "data", "csv",
                   "target", "data_dir", "warmup", "out", "overwrite")


def methods_by_size() -> str:
    """Which sampler method 'auto' picks, from the registry: 'sghmc at every size', or e.g. 'hmc up to
    2,000 rows, sghmc beyond'."""
    samplers = SAMPLERS.methods()
    limits = sorted((s.default_max_n, s.name) for s in samplers if s.default_max_n is not None)
    if len(limits) == 1:
        return f"{limits[0][1]} at every size"
    return ", ".join(f"{nm} up to {lim:,} rows" if np.isfinite(lim) else f"{nm} beyond" for lim, nm in limits)


def sampler_setting_arguments(parser) -> None:
    """One flag per setting of every registered sampler (``--step-start``, ``--friction``, …), generated from
    the samplers' settings declarations (:func:`method_setting_arguments`). Left out: the sampler's
    default."""
    method_setting_arguments(parser, SAMPLERS,
                             "the sampler's own settings (each applies to the samplers it names)")


def sampler_options(args, method: str) -> dict:
    """The sampler settings given on the command line, for a run of ``method``: a flag of a setting the method
    does not have is refused in one line, naming whose it is."""
    return method_options(args, SAMPLERS, method)


def _refuse_fixed_on_resume(args) -> None:
    """``args.resume_defaults``: the parser's defaults of :data:`FIXED_ON_RESUME` (set by the parser)."""
    given = [n for n in FIXED_ON_RESUME if getattr(args, n) != args.resume_defaults[n]]
    given += list(settings_given(args))
    if given:
        flags = ", ".join("--" + n.replace("_", "-") for n in given)
        raise ValueError(f"{flags} cannot change a run being resumed (it continues with its own settings and "
                         "data); --iterations and --target-ess extend it")


def _check_run_fits(opts: dict, ds) -> None:
    """The sampler's options checked against the data (sizes, memory) without any cluster."""
    from ...mcmc.config import check_method_fits
    from ...model.kernels import make_kernel

    cfg = SamplerConfig.from_dict(opts)
    kernel = make_kernel(cfg.kernel, ard=cfg.ard, n_dims=ds.X.shape[1])
    check_method_fits(cfg, ds.n, n_params=kernel.n_params + 1)


def _read_features(path, est):
    """The new inputs from a CSV as a DataFrame, numeric, no missing values. When the run knows its
    features' names, the CSV's columns are taken by name (any order; the training target's column may be
    there and is left out) and a missing, extra or renamed column is refused, naming it — taking renamed
    columns by position would predict from the wrong inputs. A run fitted on bare arrays (names x0, x1, …)
    takes the columns in order, as many as it has features."""

    from ...datasets import check_numeric_frame, load_spec, read_csv_frame

    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    df = read_csv_frame(path, path)
    if len(df) == 0:
        raise ValueError(f"{path} has no rows")
    meta = est.run_.attrs.get("data_meta") or {}
    names = list(meta.get("feature_names") or [])
    if not names:  # a run of daskgp <= 0.2: the names come from its data spec
        try:
            names = list(load_spec(est.run_.attrs["data"]).feature_names)
        except (ValueError, FileNotFoundError):
            names = []
    if names and names != [f"x{j}" for j in range(len(names))]:
        cols = [str(c) for c in df.columns]
        missing = [n for n in names if n not in cols]
        extra = [c for c in cols if c not in names and c != meta.get("target_name")]
        if missing or extra:
            said = [f"lacks the column(s) {', '.join(map(repr, missing))}"] if missing else []
            if extra:
                said.append(f"has the column(s) {', '.join(map(repr, extra))} the model was not fitted on")
            raise ValueError(f"{path} {' and '.join(said)}: the model takes the columns "
                             f"{', '.join(names)} by name, in any order")
        df = df[names]
    elif df.shape[1] != est.n_features_in_:
        raise ValueError(f"{path} has {df.shape[1]} columns; the model needs {est.n_features_in_} features"
                         + (f" named {names}" if names else ""))
    return check_numeric_frame(df, path)
