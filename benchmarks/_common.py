"""Set-up shared by the SGLD benchmark scripts."""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent


def start(dataset: str, n_workers: int):
    """(data set, benchmarks/runs/ folder, client of a new local cluster), with $DASKGP_DATA defaulting to
    the ../shared/data folder beside the project."""
    os.environ.setdefault("DASKGP_DATA", str(HERE.parents[0].parent / "shared" / "data"))
    import daskgp
    from daskgp.compute.cluster import get_client

    ds = daskgp.load(dataset)
    runs = HERE / "runs"
    runs.mkdir(exist_ok=True)
    return ds, runs, get_client(n_workers=n_workers)
