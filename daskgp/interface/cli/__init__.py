"""The ``daskgp`` command line. Errors end with one line on stderr and a non-zero exit, no traceback."""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from ..._version import __version__
from ...mcmc.config import EXACT_WARMUP_MAX_N, WARMUPS, SamplerConfig
from ...mcmc.samplers import AUTO, get_sampler, sampler_names
from ...model.kernels import KERNELS
from ..doctor import doctor_command
from . import advgp, gpc, sgpr
from .args import cluster_arguments, data_arguments
from .common import cluster_from_args, ignore_further_interrupts, interrupt_once
from .runs import (
    FIXED_ON_RESUME,
    methods_by_size,
    predict_command,
    repair_command,
    sample_command,
    sampler_setting_arguments,
    summary_command,
)

EXIT_USAGE, EXIT_ERROR = 2, 1


def _demo(args) -> int:
    from ...compute.operator import KernelOperator
    from ...core.validation import check_positive
    from ...datasets import load
    from ...exact.marginal import exact_log_marginal, log_marginal_gradient
    from ...model.kernels import make_kernel

    for name in ("variance", "lengthscale", "noise", "probes", "workers"):
        check_positive(name, getattr(args, name))
    ds = load(args.data, data_dir=args.data_dir)
    kernel = make_kernel(args.kernel, variance=args.variance, lengthscale=args.lengthscale, ard=args.ard,
                         n_dims=ds.X_std.shape[1])
    print(f"daskgp {__version__}: {ds.name}, n={ds.n}, d={ds.X.shape[1]}, kernel={kernel.name}"
          f"{' (ARD)' if kernel.ard else ''}, noise={args.noise}")
    with cluster_from_args(args) as client:
        with KernelOperator(ds.X_std, kernel, args.noise, client=client, mode="distributed") as op:
            t0 = time.perf_counter()
            est = log_marginal_gradient(op, ds.y_std, n_probes=args.probes, rng=args.seed)
            t_sto = time.perf_counter() - t0
    t0 = time.perf_counter()
    exact = (exact_log_marginal(ds.X_std, ds.y_std, kernel, args.noise)[1] if ds.n <= args.exact_max_n
             else None)
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


def _dashboard(args) -> int:

    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    if args.max_runs < 1 or args.max_upload_mb <= 0:
        raise ValueError("--max-runs must be >= 1 and --max-upload-mb > 0")
    for folder in args.runs:
        if not os.path.isdir(folder):
            raise ValueError(f"--runs {folder}: no such folder")
    import panel as pn

    from ..app import create_app

    for address in args.allow_scheduler:
        if not address.startswith(("tcp://", "tls://")):
            raise ValueError(f"--allow-scheduler takes tcp://host:port addresses, got {address!r}")
    origins = [f"{args.address}:{args.port}", f"localhost:{args.port}", f"127.0.0.1:{args.port}"]
    auth = {}
    if args.address in LOOPBACK:
        print(f"daskgp dashboard on http://{args.address}:{args.port}/sgld", flush=True)
        print("only this machine can reach it; to expose it deliberately: --address 0.0.0.0 "
              "--allow-origin yourhost:PORT (it then asks for a password)", flush=True)
    else:  # the Origin check stops browsers only: off this machine, every request must log in first
        import secrets

        token = _dashboard_token(args.token_file)
        auth = dict(basic_auth=token, cookie_secret=secrets.token_urlsafe(32))
        shown = f"the password in {args.token_file}" if args.token_file else f"the password {token}"
        print(f"daskgp dashboard on http://{args.address}:{args.port}/sgld — exposed beyond this machine: "
              f"log in with any user name and {shown}", flush=True)

    def app():  # a plain function: pn.serve renders a functools.partial as text instead of calling it
        return create_app(max_runs=args.max_runs, max_upload_mb=args.max_upload_mb,
                          schedulers=tuple(args.allow_scheduler), runs=tuple(args.runs))

    pn.serve({"sgld": app}, address=args.address, port=args.port, show=False,
             websocket_origin=origins + list(args.allow_origin), title="daskgp — SGLD dashboard",
             websocket_max_message_size=int(args.max_upload_mb * 2**20 * 1.5) + 2**20, **auth)
    return 0


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _dashboard_token(path: str | None) -> str:
    """The dashboard's password off this machine: the first line of ``path`` (so it stays out of the
    process list and the shell history; at least 16 characters), or a new random one, printed once as
    Jupyter prints its token."""
    import secrets

    if path is None:
        return secrets.token_urlsafe(24)
    try:
        with open(path, encoding="utf-8") as f:
            token = f.readline().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--token-file {path}: cannot be read ({e})") from None
    if len(token) < 16:
        raise ValueError(f"--token-file {path}: its first line must be a password of 16 characters or more")
    return token


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


def build_parser() -> argparse.ArgumentParser:
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
    cluster_arguments(d)
    d.add_argument("--exact-max-n", type=int, default=12_000, help="skip the exact gradient above this n")
    d.set_defaults(func=_demo)

    sm = sub.add_parser("sample", help="sample the GP hyperparameter posterior with chains on a Dask cluster")
    data_arguments(sm, "concrete")
    sm.add_argument("--method", default=SamplerConfig.method, choices=[AUTO, *sampler_names()],
                    help="the sampler: " + "; ".join(f"{nm}: {get_sampler(nm).label}"
                                                     for nm in sampler_names())
                         + f"; {AUTO} (the default): the one the data's size calls for ({methods_by_size()})")
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
                    help="Hutchinson probe vectors N_r per gradient (default: the sampler's, "
                         + ", ".join(f"{get_sampler(nm).default_probes} for {nm}" for nm in sampler_names())
                         + ")")
    sm.add_argument("--checkpoint-every", type=int, default=None,
                    help="iterations per checkpoint (default 100; HMC to a target ESS: 25)")
    sm.add_argument("--warmup", choices=WARMUPS, default="map",
                    help="where the chains start: 'map' (default) takes them to the full-data posterior "
                         f"mode and its Laplace covariance first (by Cholesky up to {EXACT_WARMUP_MAX_N:,} "
                         "rows, beyond by stochastic ascent, checkpointed and resumable); 'ascent' the "
                         "stochastic way whatever the size; 'subset' starts them at once from the subset "
                         "MAP, the paper's start")
    sm.add_argument("--seed", type=int, default=0)
    sm.add_argument("--out", default=None, help="zarr store for the run, e.g. run.zarr")
    sm.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    sm.add_argument("--resume", default=None, metavar="RUN", help="continue an interrupted run")
    sm.add_argument("--workers-per-chain", type=int, default=None, metavar="K",
                    help="workers that compute each chain's kernel products, each caching its row blocks' "
                         "kernel rows (default: workers / chains from 16,384 rows, else 1); the draws do not "
                         "depend on it, so a resumed run may take another")
    sm.add_argument("--device", default="cpu", choices=["auto", "cpu", "gpu"],
                    help="where the chains compute: cpu, gpu (a dask-cuda cluster, cupy on every worker) or "
                         "auto (the GPU when the stack is complete); a resumed run keeps its own")
    sampler_setting_arguments(sm)
    cluster_arguments(sm)
    sm.set_defaults(func=sample_command, resume_defaults={n: sm.get_default(n) for n in FIXED_ON_RESUME})

    su = sub.add_parser("summary", help="ArviZ summary, time per effective sample, PSRF of a run")
    su.add_argument("run", help="a run written by 'daskgp sample' (run.zarr)")
    su.add_argument("--psrf", action="store_true", help="also print the PSRF evolution")
    su.set_defaults(func=summary_command)

    rp = sub.add_parser("repair", help="mend a run or a fit's checkpoint after a crash (stale lock, torn "
                                       "append, bad checkpoint)")
    rp.add_argument("run", help="a run written by 'daskgp sample' (run.zarr), or a fit's checkpoint folder "
                                "(OUT.checkpoint of 'daskgp sgpr | advgp | gpc', or a GPLVM's checkpoint=)")
    rp.add_argument("--salvage", action="store_true",
                    help="cut a run with damaged draws back to its intact blocks (no resume after that)")
    rp.add_argument("--force", action="store_true",
                    help="clear a lock from another host or an unreadable one (if nothing writes the run)")
    rp.set_defaults(func=repair_command)

    pr = sub.add_parser("predict", help="posterior predictive of a run at new inputs, or its checks")
    pr.add_argument("run", help="a run written by 'daskgp sample' (run.zarr)")
    pr.add_argument("--x", default=None, help="CSV of new inputs (the training feature columns)")
    pr.add_argument("--out", required=True,
                    help="pred.csv: the input columns, then mean, sd, lower, upper (units of the target); "
                         "or pred.nc: ArviZ groups - predictions at --x, or without --x posterior_predictive "
                         "and log_likelihood at the training data (az.plot_ppc_dist, az.loo)")
    pr.add_argument("--seed", type=int, default=0, help="seed of the replicated y (.nc output)")
    pr.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    pr.add_argument("--draws", type=int, default=50, help="posterior draws to mix over")
    pr.add_argument("--level", type=float, default=0.95, help="central interval probability")
    pr.set_defaults(func=predict_command)

    for family in (sgpr, advgp, gpc):  # each family's command, its flags declared in its own module
        family.add_parser(sub)

    dr = sub.add_parser("doctor", help="the machine's CPU/GPU stack, and one CMVP, gradient and 20-iteration "
                                       "chain per device against the CPU (JSON report)")
    data_arguments(dr, "concrete")
    dr.add_argument("--rows", type=int, default=2000, help="rows of the data set to use")
    dr.add_argument("--iterations", type=int, default=20, help="SGLD iterations of the chain check")
    dr.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"],
                    help="gpu: also run on the GPU (an error without one); auto: when there is one")
    dr.add_argument("--json", default=None, metavar="PATH",
                    help="also write the report to this new JSON file (nothing is written without it)")
    dr.add_argument("--overwrite", action="store_true", help="replace a report an earlier doctor wrote")
    dr.add_argument("--scheduler", default=None, help="tcp://host:8786 (default: start a local cluster)")
    dr.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler")
    dr.set_defaults(func=doctor_command)

    db = sub.add_parser("dashboard", help="serve the live SGLD dashboard (Panel)")
    db.add_argument("--address", default="127.0.0.1", help="interface to bind (default: this machine only)")
    db.add_argument("--port", type=int, default=5006)
    db.add_argument("--token-file", default=None, metavar="FILE",
                    help="off this machine (--address beyond 127.0.0.1) the page asks for a password: the "
                         "first line of FILE (default: a new random one, printed at start)")
    db.add_argument("--allow-origin", action="append", default=[], metavar="HOST:PORT",
                    help="extra websocket origin allowed (when exposing the dashboard deliberately)")
    db.add_argument("--max-runs", type=int, default=2, help="concurrent runs across all sessions")
    db.add_argument("--max-upload-mb", type=float, default=50, help="largest CSV upload accepted")
    db.add_argument("--allow-scheduler", action="append", default=[], metavar="tcp://HOST:PORT",
                    help="a dask-scheduler the page may choose instead of the local cluster (repeatable; "
                         "without it the page cannot point the server at any scheduler)")
    db.add_argument("--runs", action="append", default=[], metavar="DIR",
                    help="a folder whose runs the page lists and opens read-only, including runs other "
                         "processes are writing (repeatable; nothing outside these folders is read); runs "
                         "started from the page are written to the first and kept")
    db.set_defaults(func=_dashboard)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse printed its one-line usage error
        return int(e.code or 0) and EXIT_USAGE
    restore = interrupt_once()
    try:
        _check_common(args)
        return args.func(args)
    except KeyboardInterrupt:
        ignore_further_interrupts()
        print("daskgp: interrupted", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, ConnectionError, MemoryError, OSError, FloatingPointError,
            TimeoutError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"daskgp: error: {msg}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        restore()


if __name__ == "__main__":
    sys.exit(main())
