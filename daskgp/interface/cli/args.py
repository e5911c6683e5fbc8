"""The argument groups several ``daskgp`` commands share: the cluster to compute on, the data to read, a
table's held-out predictions."""

from __future__ import annotations

__all__ = ["cluster_arguments", "data_arguments", "predictions_argument"]


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
