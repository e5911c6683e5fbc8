"""The ``daskgp`` command line. Errors end with one line on stderr and a non-zero exit, no traceback."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from . import __version__

EXIT_USAGE, EXIT_ERROR = 2, 1


def _demo(args) -> int:
    from ._validation import check_positive
    from .cluster import get_client
    from .datasets import load
    from .kernels import make_kernel
    from .linalg import KernelOperator
    from .marginal import exact_log_marginal, log_marginal_gradient

    for name in ("variance", "lengthscale", "noise", "probes", "workers"):
        check_positive(name, getattr(args, name))
    ds = load(args.data, data_dir=args.data_dir)
    kernel = make_kernel(args.kernel, variance=args.variance, lengthscale=args.lengthscale, ard=args.ard,
                         n_dims=ds.X.shape[1])
    print(f"daskgp {__version__}: {ds.name}, n={ds.n}, d={ds.X.shape[1]}, kernel={kernel.name}"
          f"{' (ARD)' if kernel.ard else ''}, noise={args.noise}")
    client = get_client(args.scheduler, n_workers=args.workers, timeout=args.timeout)
    try:
        print(f"dask cluster: {len(client.scheduler_info()['workers'])} workers at "
              f"{client.scheduler.address}")
        with KernelOperator(ds.X, kernel, args.noise, client=client, mode="distributed") as op:
            t0 = time.perf_counter()
            est = log_marginal_gradient(op, ds.y, n_probes=args.probes, rng=args.seed)
            t_sto = time.perf_counter() - t0
        t0 = time.perf_counter()
        exact = exact_log_marginal(ds.X, ds.y, kernel, args.noise)[1] if ds.n <= args.exact_max_n else None
        t_ex = time.perf_counter() - t0
    finally:
        if args.scheduler is None:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
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


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        print(f"daskgp: error: {message} (see 'daskgp --help')", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="daskgp", description="Scalable Bayesian Gaussian processes on Dask.")
    p.add_argument("--version", action="version", version=f"daskgp {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    d = sub.add_parser("demo", help="one unbiased gradient on a Dask cluster next to the exact one")
    d.add_argument("--data", default="concrete", help="concrete | house_8L | power_plant")
    d.add_argument("--data-dir", default=None, help="folder with <name>.csv (else $DASKGP_DATA, user cache)")
    d.add_argument("--kernel", default="rbf", choices=["rbf", "matern32", "matern52"])
    d.add_argument("--ard", action="store_true", help="one lengthscale per input dimension")
    d.add_argument("--variance", type=float, default=1.0)
    d.add_argument("--lengthscale", type=float, default=2.0)
    d.add_argument("--noise", type=float, default=0.3)
    d.add_argument("--probes", type=int, default=4, help="Hutchinson probe vectors N_r")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--scheduler", default=None, help="tcp://host:8786 (default: start a local cluster)")
    d.add_argument("--workers", type=int, default=2, help="workers of the local cluster")
    d.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler")
    d.add_argument("--exact-max-n", type=int, default=12_000, help="skip the exact gradient above this n")
    d.set_defaults(func=_demo)
    return p


def main(argv=None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse printed its one-line usage error
        return int(e.code or 0) and EXIT_USAGE
    try:
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
