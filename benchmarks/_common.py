"""Set-up shared by the benchmark scripts: data and a cluster, and the resumable results JSON."""

from __future__ import annotations

import json
import os
import platform
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


def load_results(path: Path, benchmark: str, redo: bool) -> dict:
    """A resumable benchmark's results: what ``path`` holds (nothing with ``redo``), with its name, a
    'cases' dict and this machine's description."""
    results = {} if redo or not path.exists() else json.loads(path.read_text())
    results.setdefault("benchmark", benchmark)
    results.setdefault("cases", {})
    results["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform()}
    return results


def write_results(path: Path, results: dict) -> None:
    """Write the results JSON whole or not at all (a killed run never leaves half a file)."""
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, path)
