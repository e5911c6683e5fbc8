"""``daskgp gpc``: sparse GP classification by EP, stochastic EP or ADF (Hernández-Lobato et al. 2015) on the
command line: a named data set or a CSV with a label column (a fixed stratified split; the results file
holds the held-out predictions), or a table read on the workers (``--data PATH``: the row-index hash split
of :func:`daskgp.datasets.split_table`, the test metrics reduced on the workers), progress, and a netCDF
results file with the model."""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from ...gpc import methods as gpc_methods
from ..progress import fit_progress
from .args import check_counts, cluster_arguments, inducing_arguments, output_arguments, split_arguments
from .common import (
    batch_rows,
    cluster_from_args,
    positive_int,
    refuse_features_without_table,
    split_before_cluster,
    split_from_args,
    table_in_args,
)
from .results import (
    attach_heldout,
    check_fit_outputs,
    naming_table_files,
    save_predictions,
    write_table_results,
)

KIND = "daskgp.SparseGPClassifier"  # the marker of the results file: a model SparseGPClassifier reads


def _split_table(args):
    """(table, X_train, X_test, y_train, y_test) as dask arrays: the row-index hash split (not stratified:
    the labels are on the workers); the two classes are checked there by the fit."""
    ds, Xtr, ytr, Xte, yte = split_from_args(args, tables=True)
    return ds, Xtr, Xte, ytr, yte


def _table_metrics(est, ytr, p1, yte) -> dict:
    """Test error, test NLL and the class prior's NLL of a fit on a table from the test rows' p(classes_[1])
    ``p1``, reduced on the workers in one computation (no test row comes to this process)."""
    import dask
    import dask.array as da

    pos = yte == est.classes_[1]
    p_true = da.clip(da.where(pos, p1, 1 - p1), 1e-300, 1)
    prior = da.mean(ytr == est.classes_[1])
    err, nll, nll_prior = dask.compute(da.mean((p1 > 0.5) != pos), -da.mean(da.log(p_true)),
                                       -da.mean(da.where(pos, da.log(prior), da.log(1 - prior))))
    return {"test_error": float(err), "test_nll": float(nll), "prior_nll": float(nll_prior)}


def _data(args):
    from ...datasets import load_classification, load_classification_csv

    if args.csv:
        return load_classification_csv(args.csv, args.target if args.target is not None else -1)
    return load_classification(args.data)


def gpc_command(args) -> int:

    from sklearn.model_selection import train_test_split

    from ..._version import __version__
    from ...core.files import MARK, replaced_atomically
    from ...gpc.classifier import SparseGPClassifier
    from ...gpc.fit import GPCCheckpoint

    check_counts(args, ("inducing", "max_iter", "workers"))
    batch = batch_rows(args.batch)
    chunk_rows = ("auto" if args.chunk_rows == "auto"
                  else positive_int(args.chunk_rows, "--chunk-rows", ("auto",)))
    ckpt = GPCCheckpoint(f"{args.out}.checkpoint")
    check_fit_outputs(args, ckpt, KIND)  # settled before a cluster starts: refusing costs nothing
    if args.overwrite and not args.resume:
        ckpt.remove()
    if not 0 < args.test_fraction < 1:
        raise ValueError(f"--test-fraction must be in (0, 1), got {args.test_fraction}")
    table, early = table_in_args(args), split_before_cluster(args)
    if table:
        if early:  # from the files' metadata: refused before a cluster starts
            data, Xtr, Xte, ytr, yte = _split_table(args)
    else:
        refuse_features_without_table(args)
        data = _data(args)
        classes = np.unique(data.y)
        if len(classes) != 2:
            raise ValueError(f"{data.name}: the target {data.target_name!r} has {len(classes)} classes; "
                             "daskgp gpc is a binary classifier")
        Xtr, Xte, ytr, yte = train_test_split(data.X, data.y, test_size=args.test_fraction,
                                              random_state=args.seed, stratify=data.y)
        if args.train_size not in ("all", "full"):
            k = positive_int(args.train_size, "--train-size")
            if k < len(ytr):
                Xtr, _, ytr, _ = train_test_split(Xtr, ytr, train_size=k, random_state=args.seed,
                                                  stratify=ytr)
        if args.inducing > len(Xtr):
            raise ValueError(f"--inducing {args.inducing} is more than the {len(Xtr)} training rows")
    est = SparseGPClassifier(n_inducing=args.inducing, method=args.method, max_iter=args.max_iter,
                             chunk_rows=chunk_rows, batch_size=batch, damping=args.damping,
                             learning_rate=args.learning_rate, random_state=args.seed,
                             kernel=args.kernel)

    last_p1 = {}
    t_fit = time.perf_counter()

    def test_error(event):
        from ...gpc.ep import Posterior
        from ...model.likelihoods import Probit

        Xs = (Xte - est.x_mean_) / est.x_scale_
        # the q of the iteration's evidence, which a fit stopped here returns (EPState.judged)
        p1 = Probit.predict_proba(*Posterior(*event.model.judged()).predict_latent(Xs))
        last_p1["p1"] = p1
        return float(np.mean(np.where(p1 > 0.5, classes[1], classes[0]) != yte))

    def log_error(event, err):  # beside the checkpoint, for the dashboard: the error, NLL and calibration
        p1, positive = last_p1["p1"], yte == classes[1]
        ckpt.log_heldout({"step": int(event.step), "seconds": time.perf_counter() - t_fit,
                          "test_error": float(err), "test_nll": log_loss(p1, positive),
                          "calibration": calibration_bins(p1, positive)})

    def announce():
        where = f" ({data.kind}, {len(data.chunk_names)} chunks read on the workers)" if table else ""
        rows = est._resolve_batch(Xtr.shape[0])  # what --batch (by default 'auto') comes to for these rows
        per = "every row an iteration" if rows is None else f"minibatches of {rows:,} rows"
        print(f"daskgp gpc: {data.name}{where}, {Xtr.shape[0]} training / {Xte.shape[0]} test rows, "
              f"d={Xtr.shape[1]}, m={args.inducing}, {args.method.upper()} on {per}, kernel={args.kernel}",
              flush=True)
        if args.resume:
            print(f"resuming from {ckpt.path} after {ckpt.iterations()} iterations", flush=True)

    if not table or early:
        est._check_params(Xtr.shape[0])  # damping, learning rate, chunk rows: refused before a cluster starts
        announce()
    # a table's test rows stay on the workers: its held-out error comes once, at the end
    printer = fit_progress(args.max_iter, args.method.upper(), None if table else test_error,
                           "held-out error", on_metric=log_error)
    try:
        with cluster_from_args(args, stream=sys.stderr) as client:
            if table and not early:  # a CSV glob: its rows counted where they are read
                data, Xtr, Xte, ytr, yte = _split_table(args)
                est._check_params(Xtr.shape[0])
                announce()
            from sklearn.exceptions import ConvergenceWarning  # here: scikit-learn costs seconds to import

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                with naming_table_files(data):
                    est.fit(Xtr, ytr, client=client, callback=printer, checkpoint=ckpt, resume=args.resume,
                            keep_checkpoint=True)
            printer.done()
            if table:
                p1 = est.predict_proba(Xte)[:, 1]
                metrics = _table_metrics(est, ytr, p1, yte)
                save_predictions(args, data, yte, **{f"p_{est.classes_[1]:g}": p1})
    except KeyboardInterrupt:
        print(f"\ndaskgp: interrupted; the fit after its last finished iteration is in {ckpt.path}; continue "
              "with the same command plus --resume", file=sys.stderr)
        return 130
    if table:
        write_table_results(attach_heldout(est.to_dataset(list(data.feature_names)), ckpt), args.out, data,
                            args, int(yte.shape[0]), **metrics)
        ckpt.remove()
        _report(est, caught, metrics, args.out)
        return 0
    proba = est.predict_proba(Xte)
    err = float(np.mean(est.predict(Xte) != yte))
    idx = np.searchsorted(est.classes_, yte)
    nll = log_loss(proba[:, 1], idx == 1)
    prior = np.mean(ytr == est.classes_[1])
    nll_prior = float(-np.mean(np.where(idx == 1, np.log(prior), np.log(1 - prior))))
    res = attach_heldout(est.to_dataset(list(data.feature_names)), ckpt)
    res["test_proba"] = ("test", proba[:, 1], {"long_name": f"p({data.target_name} = {est.classes_[1]})"})
    res["test_label"] = ("test", np.asarray(yte).astype(str))
    res.attrs.update(dataset=data.name, target=data.target_name, test_error=err, test_nll=nll,
                     prior_nll=nll_prior, n_test=len(yte), seed=args.seed, test_fraction=args.test_fraction,
                     daskgp_version=__version__)
    res.attrs[MARK] = KIND
    with replaced_atomically(args.out) as tmp:
        res.to_netcdf(tmp)
    ckpt.remove()  # only once the results are safe
    _report(est, caught, {"test_error": err, "test_nll": nll, "prior_nll": nll_prior}, args.out)
    return 0


def _report(est, caught, m: dict, out: str) -> None:
    for w in caught:  # the fit's own warnings, one line each, after the progress line
        print(f"daskgp: warning: {w.message}", file=sys.stderr)
    if est.refine_seconds_ is not None:  # a fit on minibatches whose tied factor was re-made from every row
        print(f"daskgp: {est.method.upper()}'s factor re-made from every training row at the final "
              f"hyperparameters ({est.refine_passes} pass{'' if est.refine_passes == 1 else 'es'}, "
              f"{est.refine_seconds_:.1f} s)")
    if getattr(est, "finish_iter_", 0):  # a minibatch fit that ended on batch iterations (daskgp.gpc.finish)
        print(f"daskgp: {est.method.upper()}'s last {est.finish_iter_} iteration"
              f"{'' if est.finish_iter_ == 1 else 's'} went over every training row (batch iterations after "
              f"{est.n_iter_ - est.finish_iter_} minibatches)")
    kept = f" (the model is iteration {est.best_iteration_}'s)" if est.best_iteration_ != est.n_iter_ else ""
    print(f"log Z {est.evidence_:.2f} nats after {est.n_iter_} iterations{kept}; test error "
          f"{m['test_error']:.4f}, test NLL {m['test_nll']:.4f} (class prior {m['prior_nll']:.4f}); results "
          f"in {out}")


def log_loss(p1, positive) -> float:
    """Mean negative log probability (nats) of the held-out classes, from p(second class) ``p1`` (n,) and
    whether each row is of that class ``positive`` (n,); probabilities clipped at 1e-300."""
    return float(-np.mean(np.log(np.clip(np.where(positive, p1, 1 - p1), 1e-300, 1))))


def calibration_bins(p1, positive, bins: int = 10) -> list:
    """[[mean predicted probability, observed frequency, rows], …] of the held-out rows in ``bins`` equal
    bins of the predicted probability of the second class (empty bins left out): a reliability diagram."""
    p1, positive = np.asarray(p1, float), np.asarray(positive, bool)
    which = np.minimum((p1 * bins).astype(int), bins - 1)
    return [[float(p1[which == b].mean()), float(positive[which == b].mean()), int((which == b).sum())]
            for b in range(bins) if (which == b).any()]


def add_parser(sub) -> None:
    """``daskgp gpc``'s flags, on the subcommands ``sub`` of the command line."""
    gc = sub.add_parser("gpc", help="sparse GP classification by EP, stochastic EP or ADF")
    src = gc.add_mutually_exclusive_group()
    src.add_argument("--data", default="breast_cancer",
                     help="breast_cancer | mnist_parity | flights_delayed, or a table: PATH of Parquet "
                          "files, a zarr store or a CSV glob, read on the workers")
    src.add_argument("--csv", default=None, help="your CSV, header row: numeric features, a label column")
    gc.add_argument("--target", default=None, help="label column of --csv or a table (default: the last)")
    gc.add_argument("--features", default=None,
                    help="a table's feature columns, comma-separated (default: all but the target)")
    names = gpc_methods.method_names()  # every registered update, its label from the method itself
    gc.add_argument("--method", choices=names, default="sep",
                    help="; ".join(f"{nm}: {gpc_methods.get_method(nm).label}" for nm in names))
    inducing_arguments(gc)
    gc.add_argument("--max-iter", type=int, default=250,
                    help="iterations (passes over the data, or minibatches)")
    gc.add_argument("--batch", default="auto",
                    help="rows per iteration: a count, 'auto' (default: the method's choice — SEP: every row "
                         "up to 20,000 training rows, minibatches of 2,000 beyond; EP and ADF: every row) or "
                         "'all' (batch mode)")
    gc.add_argument("--chunk-rows", default="auto",
                    help="rows per chunk (task): a count, or 'auto' (default: 20,000, in at most 16 chunks)")
    gc.add_argument("--damping", type=float, default=None,
                    help="EP damping, SEP step, ADF weight, in (0, 1] (default: 0.5 EP, 1 SEP and ADF)")
    gc.add_argument("--learning-rate", type=float, default=0.01, help="Adam step on the hyperparameters")
    split_arguments(gc, "stratified split", "split, k-means and minibatch seed")
    output_arguments(gc, "gpc.nc", "netCDF results file",
                     "continue the interrupted fit in OUT.checkpoint (the same command otherwise)")
    cluster_arguments(gc)
    gc.set_defaults(func=gpc_command)
