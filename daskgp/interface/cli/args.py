"""The argument groups several ``daskgp`` commands share: the cluster to compute on, the data to read, a
table's held-out predictions, and the flags of a family's methods' own settings, generated from their
declarations (:mod:`daskgp.inference.settings`)."""

from __future__ import annotations

import argparse
import warnings

from ...inference.settings import flag_name, setting_type, settings_fields

__all__ = ["cluster_arguments", "data_arguments", "predictions_argument", "inducing_arguments",
           "split_arguments", "output_arguments", "check_counts", "method_setting_arguments",
           "method_options", "settings_given"]

_SETTING_DEST = "setting_"  # the argparse destination of a method's setting: setting_<name>


def cluster_arguments(parser) -> None:
    """--scheduler, --workers, --timeout: what :func:`daskgp.interface.cli.common.cluster_from_args` connects
    to, for every subcommand that computes on a cluster."""
    parser.add_argument("--scheduler", default=None, help="tcp://host:8786 (default: start a local cluster)")
    parser.add_argument("--workers", type=int, default=2, help="workers of the local cluster")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler")


def data_arguments(parser, default: str) -> None:
    """--data NAME | --csv FILE [--target COL], and --data-dir: what :func:`dataset_from_args` reads."""
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--data", default=default,
                     help="concrete | house_8L | power_plant | flights (sgpr also: a table, PATH of Parquet "
                          "files, a zarr store or a CSV glob, read on the workers)")
    src.add_argument("--csv", default=None, help="your own numeric CSV with a header row")
    parser.add_argument("--target", default=None,
                        help="target column of --csv or a table (default: the last)")
    parser.add_argument("--features", default=None,
                        help="a table's feature columns, comma-separated (default: all but the target)")
    parser.add_argument("--data-dir", default=None,
                        help="folder with <name>.csv (else $DASKGP_DATA, user cache)")


def predictions_argument(parser) -> None:
    parser.add_argument("--predictions", default=None, metavar="FOLDER",
                        help="with a --data table: its held-out rows' predictions as a new Parquet folder, "
                             "one file per chunk, written by the workers")


def inducing_arguments(parser) -> None:
    """--inducing, --kernel: every sparse family's model."""
    from ...model.kernels import KERNELS

    parser.add_argument("--inducing", type=int, default=100, help="inducing points m")
    parser.add_argument("--kernel", default="rbf", choices=sorted(KERNELS),
                        help="stationary ARD kernel (one lengthscale per feature)")


def split_arguments(parser, split: str = "fixed random split", seed: str = "split and k-means seed") -> None:
    """--train-size, --test-fraction, --seed: the held-out split every fitting command makes."""
    parser.add_argument("--train-size", default="all", help="training rows (from the non-test rows) or all")
    parser.add_argument("--test-fraction", type=float, default=0.1, help=f"held-out fraction ({split})")
    parser.add_argument("--seed", type=int, default=0, help=seed)


def output_arguments(parser, out: str, out_help: str, resume_help: str) -> None:
    """--out, --overwrite, --predictions, --resume: a fitting command's results file, a table's held-out
    predictions and the checkpoint it continues from."""
    parser.add_argument("--out", default=out, help=out_help)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    predictions_argument(parser)
    parser.add_argument("--resume", action="store_true", help=resume_help)


def check_counts(args, names, optional=()) -> None:
    """Refuse, in one line naming the flag, a count below 1: ``names`` always, ``optional`` when given (set
    and not None)."""
    for name in (*names, *(n for n in optional if getattr(args, n, None) is not None)):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")


def _setting_owners(registry) -> dict:
    """{setting name: [(method name, field)]} over ``registry``'s methods, in its order."""
    owners: dict = {}
    for method in registry.methods():
        for f in settings_fields(method.settings):
            owners.setdefault(f.name, []).append((method.name, f))
    return owners


def method_setting_arguments(parser, registry, title: str) -> None:
    """One flag per setting of every method of ``registry`` (a :class:`daskgp.inference.Registry`), generated
    from the settings declarations (:func:`daskgp.inference.settings.setting`): its help, type and default
    are the declaration's; a name two methods share is one flag. Left out: the method's default. ``title``:
    the help's group title."""
    owners = _setting_owners(registry)
    if not owners:
        return
    group = parser.add_argument_group(title)
    for name, fs in owners.items():
        parts = []
        for nm, f in fs:
            default = "set by the run" if f.default is None else f"{f.default:g}"
            unit = f" [{f.metadata['unit']}]" if f.metadata.get("unit") else ""
            parts.append(f"{nm}: {f.metadata.get('help', '')}{unit} (default {default})")
        try:
            group.add_argument(flag_name(name), dest=_SETTING_DEST + name, type=setting_type(fs[0][1]),
                               default=None, metavar=setting_type(fs[0][1]).__name__.upper(),
                               help="; ".join(parts).replace("%", "%%"))
        except argparse.ArgumentError:  # a registered method's setting named like one of the command's flags
            warnings.warn(f"the setting {name!r} of {', '.join(nm for nm, _ in fs)} has no flag: "
                          f"{flag_name(name)} is the command's own", stacklevel=2)


def settings_given(args) -> dict:
    """{setting name: value} of the method-setting flags given (left out: None)."""
    return {k[len(_SETTING_DEST):]: v for k, v in vars(args).items()
            if k.startswith(_SETTING_DEST) and v is not None}


def method_options(args, registry, method: str, flag: str = "--method") -> dict:
    """{setting: value} of the setting flags given on the command line (:func:`method_setting_arguments`),
    for ``method`` of ``registry`` (chosen by ``flag``): a flag of a setting the method does not have is
    refused in one line, naming whose it is."""
    given = settings_given(args)
    own = {f.name for f in settings_fields(registry.get(method).settings)}
    owners = _setting_owners(registry)
    foreign = sorted(set(given) - own)
    if foreign:
        whose = ", ".join(f"{flag_name(k)} ({' and '.join(nm for nm, _ in owners.get(k, []))}'s)"
                          for k in foreign)
        raise ValueError(f"{whose} cannot apply to {flag} {method}, which has "
                         + (f"the settings {', '.join(flag_name(k) for k in sorted(own))}" if own
                            else "no settings of its own"))
    return given
