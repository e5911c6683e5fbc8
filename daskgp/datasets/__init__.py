"""Data sets: the built-in regression and classification sets (looked up in ``data_dir``, ``$DASKGP_DATA``,
the user cache, downloaded on demand), CSV files, the one train/test split, and a run's stored data
(:mod:`.loaders`); the classification sets and digit images (:mod:`.classification`); tables — Parquet,
zarr and CSV globs — read on the workers as dask arrays (:mod:`.tables`). Moved out of ``daskgp.core``
(issue 32): downloads, file formats and their messages are not what the rest of the library is built on;
the data fingerprint stayed there (:mod:`daskgp.core.fingerprint`)."""

from .classification import CLASSIFICATION, Labelled, images, load_classification, load_classification_csv
from .loaders import (
    DATASETS,
    FLIGHT_FEATURES,
    Dataset,
    check_numeric_frame,
    data_dirs,
    fitted_scaler,
    load,
    load_csv,
    load_spec,
    names_table,
    read_csv_frame,
    scaler_meta,
)
from .splits import split_indices, split_table, train_test
from .tables import Table, is_table_path, read_table

__all__ = ["CLASSIFICATION", "DATASETS", "FLIGHT_FEATURES", "Dataset", "Labelled", "check_numeric_frame",
           "data_dirs", "fitted_scaler", "images", "load", "load_classification", "load_classification_csv",
           "load_csv", "load_spec", "names_table", "read_csv_frame", "read_table", "scaler_meta",
           "split_indices", "Table", "is_table_path", "split_table", "train_test"]
