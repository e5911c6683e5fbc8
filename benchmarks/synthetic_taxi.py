"""A synthetic, taxi-like regression table as Parquet (issue 34, item 4). **Synthetic**: no row is a real
trip. It stands in for the NYC taxi data of Peng et al. (section 5), which this machine cannot download, at
sizes (10⁶–10⁸ rows) that no data set shipped with the project reaches.

Nine features, as in the paper's taxi table: pickup hour (0–24, fractional), day of week (0–6), pickup and
drop-off longitude and latitude (a city 0.3° × 0.3°), trip distance (km, from the two points with a detour
factor), passenger count (1–6) and a vendor flag; the target is the trip's duration in minutes:

    duration = distance · pace(hour, day) + 4 · exp(−(pickup − centre)² / 0.004) + 2 + ε,
    pace = 1.6 + 0.9·exp(−(hour − 8.5)²/2) + 1.1·exp(−(hour − 17.5)²/3) − 0.4·[day ≥ 5],
    ε ~ N(0, (1 + 0.25·distance)²)   (heteroscedastic: longer trips vary more)

a smooth nonlinear target (rush-hour paces, a congested centre) that a linear model cannot represent, and
noise that grows with distance. Each file of ``--rows-per-file`` rows is drawn from its own seed (the base
seed and the file's index), so files are written one at a time in bounded memory and the same arguments
give the same files.

    python benchmarks/synthetic_taxi.py OUT_FOLDER --rows 10000000 [--rows-per-file 1000000] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

COLUMNS = ["hour", "day", "pickup_lon", "pickup_lat", "dropoff_lon", "dropoff_lat", "distance_km",
           "passengers", "vendor", "duration_min"]
TARGET = "duration_min"


def mean_duration(rows: np.ndarray) -> np.ndarray:
    """The mean trip duration (minutes) at the table's input columns ``rows`` (n, ≥ 7; COLUMNS' order): the
    formula above without its noise — the Bayes predictor."""
    hour, day, pick, distance = rows[:, 0], rows[:, 1], rows[:, 2:4], rows[:, 6]
    pace = (1.6 + 0.9 * np.exp(-(hour - 8.5) ** 2 / 2) + 1.1 * np.exp(-(hour - 17.5) ** 2 / 3)
            - 0.4 * (day >= 5))
    congestion = 4.0 * np.exp(-np.sum((pick - 0.15) ** 2, axis=1) / 0.004)
    return distance * pace + congestion + 2.0


def draw(n: int, seed: int):
    """(n, 10) float64 rows of the table above, from ``seed``."""
    rng = np.random.default_rng(seed)
    hour = np.mod(rng.normal(14.0, 5.0, n), 24.0)
    day = rng.integers(0, 7, n).astype(float)
    centre = np.array([0.15, 0.15])
    pick = centre + rng.normal(0, 0.06, (n, 2))
    drop = pick + rng.normal(0, 0.03, (n, 2)) * rng.gamma(2.0, 1.0, (n, 1))
    distance = 111.0 * np.hypot(*(drop - pick).T) * 1.3 + 0.2
    passengers = rng.choice([1, 1, 1, 1, 2, 2, 3, 4, 5, 6], n).astype(float)
    vendor = rng.integers(0, 2, n).astype(float)
    X = np.column_stack([hour, day, pick, drop, distance, passengers, vendor])
    duration = mean_duration(X) + rng.normal(0, 1, n) * (1 + 0.25 * distance)
    return np.column_stack([X, duration])


FILE_TIME_NS = 1_767_225_600 * 10**9  # 2026-01-01 00:00 UTC


def write(folder: Path, rows: int, rows_per_file: int = 1_000_000, seed: int = 0) -> list[Path]:
    """Write the table to ``folder`` (created; existing files of the same name are kept if their row count
    matches: a stopped generation resumes). Returns the files."""
    import pandas as pd
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i, start in enumerate(range(0, rows, rows_per_file)):
        n = min(rows_per_file, rows - start)
        path = folder / f"part.{i:04d}.parquet"
        files.append(path)
        if path.exists() and pq.ParquetFile(path).metadata.num_rows == n:
            continue
        tmp = path.with_suffix(".tmp")
        pd.DataFrame(draw(n, seed * 100_003 + i), columns=COLUMNS).to_parquet(tmp, index=False)
        os.replace(tmp, path)
        # a fixed modification time: a table's token (what a fit checkpoint is tied to) includes its files'
        # times, so a table generated again in another session keeps its token and a carried checkpoint
        os.utime(path, ns=(FILE_TIME_NS, FILE_TIME_NS))
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--rows", type=float, required=True)
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.time()
    files = write(Path(a.out), int(a.rows), a.rows_per_file, a.seed)
    print(f"{len(files)} files, {int(a.rows)} rows in {a.out} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
