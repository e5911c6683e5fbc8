"""Issue 34: a fit from a table never brings its rows into the client. ``daskgp sgpr`` and ``daskgp advgp``
on 2·10⁶ rows of a Parquet folder (the 2013 flights, 8 features and the arrival delay, tiled eight times:
real rows, repeated only to reach the size; 40 files), run as a client of a separate cluster, against the
same commands on a 20,000-row folder of the same files' layout: the peak resident memory of the client
process may grow by at most 30 MB, a fifth of the 2·10⁶ rows' 144 MB in float64.

What the client legitimately holds grows with the number of files (the graph, one reader task each) and
not with rows, plus the k-means sample (at most 20,000 rows: 1.4 MB) and the model. A client that gathered
X even once would add ≥ 144 MB (the bound's power: the test's last check gathers the two tables' X in
a child process measured the same way, and must see the difference).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import daskgp as dg

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROWS, SMALL, FILES = 2_000_000, 20_000, 40
BOUND_MB = 30.0

# the peak resident set of this process's own address space (VmHWM). Not getrusage's ru_maxrss: Linux
# carries the parent's high-water mark into a child across fork and exec, so every child of this ~500 MB
# pytest process would report at least that
HWM = "int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"
PEAK = ("import sys\n"
        "from daskgp.interface.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        f"print('PEAK_KB', {HWM}, file=sys.stderr)\n"
        "sys.exit(rc)\n")

GATHER = ("import sys\n"
          "import numpy as np\n"
          "from distributed import Client\n"
          "import daskgp as dg\n"
          "c = Client(sys.argv[2])\n"
          "t = dg.read_table(sys.argv[1])\n"
          "X = np.asarray(t.X)\n"
          f"print('PEAK_KB', {HWM}, file=sys.stderr)\n")


def _folder(path, flights: pd.DataFrame, rows: int):
    path.mkdir()
    reps = -(-rows // len(flights))
    big = pd.concat([flights] * reps, ignore_index=True).iloc[:rows]
    cuts = np.linspace(0, rows, FILES + 1).astype(int)
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        big.iloc[a:b].to_parquet(path / f"part.{i:03d}.parquet", index=False)
    return path


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    ds = dg.load("flights")
    flights = pd.DataFrame(np.column_stack([ds.X, ds.y]), columns=[*ds.feature_names, ds.target_name])
    root = tmp_path_factory.mktemp("tables")
    return _folder(root / "small.parquet", flights, SMALL), _folder(root / "big.parquet", flights, ROWS)


def _peak_mb(code: str, args: list[str]) -> float:
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=900,
                       env=os.environ.copy())
    assert r.returncode == 0, r.stderr[-3000:]
    kb = [int(ln.split()[1]) for ln in r.stderr.splitlines() if ln.startswith("PEAK_KB")]
    return kb[-1] / 1024


@pytest.mark.parametrize("command", [["sgpr", "--inducing", "20", "--max-iter", "3"],
                                     ["advgp", "--inducing", "20", "--max-iter", "20", "--tau", "2"]])
def test_the_client_of_a_fit_on_two_million_rows_holds_no_rows(command, tables, client, tmp_path):
    small, big = tables
    address = client.scheduler.address

    def peak(folder, name):
        return _peak_mb(PEAK, [*command, "--data", str(folder), "--scheduler", address,
                               "--out", str(tmp_path / f"{name}.nc")])

    base, full = peak(small, "small"), peak(big, "big")
    assert full - base < BOUND_MB, (base, full)
    # the bound's power: the same measurement of a client that gathers the big table's X (2e6 × 8 float64)
    # (its own small table as its baseline): it must grow by about the 122 MB of X, far past the bound
    g_small, g_big = _peak_mb(GATHER, [str(small), address]), _peak_mb(GATHER, [str(big), address])
    print(f"{command[0]}: client peak {base:.1f} MB ({SMALL} rows), {full:.1f} MB ({ROWS} rows); gathering "
          f"X: {g_small:.1f} / {g_big:.1f} MB")
    assert g_big - g_small > 0.8 * ROWS * 8 * 8 / 2**20 > BOUND_MB, (g_small, g_big)
