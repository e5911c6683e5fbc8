"""A scheduler with no workers (issue 29): every command that computes waits up to ``--timeout`` for one,
then says so in one line — before, ``sample`` and ``doctor`` waited silently past 150 s. A real ``dask
scheduler`` process, started by the test, with no worker ever joining."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from daskgp.compute.cluster import worker_environ

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def lonely_scheduler(tmp_path_factory):
    from distributed import Client

    folder = tmp_path_factory.mktemp("lonely")
    sfile = str(folder / "scheduler.json")
    env = {**os.environ, **{k: str(v) for k, v in worker_environ().items()}}
    proc = subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
                             "--no-dashboard", "--scheduler-file", sfile],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + 60
        while not os.path.exists(sfile) and time.time() < deadline:
            time.sleep(0.1)
        with Client(scheduler_file=sfile, timeout=60, set_as_default=False) as c:
            address = c.scheduler.address
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("argv", [
    ["sample", "--data", "concrete", "--iterations", "20", "--out", "{tmp}/r.zarr"],
    ["doctor", "--rows", "60"],
    ["sgpr", "--data", "concrete", "--inducing", "10", "--max-iter", "3", "--out", "{tmp}/s.nc"],
])
def test_a_scheduler_without_workers_gives_one_line_within_the_timeout(argv, lonely_scheduler, tmp_path):
    timeout = 3
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "daskgp", *args, "--scheduler", lonely_scheduler, "--timeout",
                        str(timeout)], capture_output=True, text=True, timeout=120, env=os.environ.copy())
    wall = time.monotonic() - t0
    err = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("daskgp:")]
    assert r.returncode == 1, r.stderr
    assert len(err) == 1 and "has no workers (waited 3 s" in err[0], r.stderr
    assert "Traceback" not in r.stderr
    assert wall < timeout + 30  # the interpreter and imports, then at most the timeout of waiting
    assert not any(p.name.endswith((".zarr", ".nc")) for p in tmp_path.iterdir())


def test_an_inproc_address_is_refused_in_one_line(capsys):
    from daskgp.interface.cli import main

    assert main(["sample", "--data", "concrete", "--out", "r.zarr", "--scheduler", "inproc://x"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a scheduler address is tcp://host:port" in err[0]
