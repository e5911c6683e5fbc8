"""Real processes around a run: a reader looping beside the writer, SIGKILL of the CLI (SIGKILL of a worker,
on a real dask-scheduler, is in tests/test_fault_injection.py).
Each disturbed run must end bit-identical to an undisturbed run of the same seed: 0 draws lost, 0 duplicated.

The runs are the issue's reproduction: SGLD on concrete (n = 1,030), 2 chains × 200 iterations, a checkpoint
every 10 iterations, on a two-worker local cluster."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import daskgp as dg
from daskgp.runs.draws import RunError, read_checkpoint
from daskgp.runs.lock import lock_info

from ..run_checks import assert_runs_identical

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

N_ITER, EVERY = 200, 10
# the paper's start: these tests are about the run's blocks, not the 'map' warmup (whose own fault
# tests are beside WARM in tests/test_fault_injection.py), which costs each run ~15 s here
ARGV = ["sample", "--data", "concrete", "--method", "sgld", "--chains", "2", "--iterations", str(N_ITER),
        "--checkpoint-every", str(EVERY), "--seed", "0", "--warmup", "subset"]


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "daskgp", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def _popen(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "daskgp", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ.copy(), **kw)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The undisturbed run."""
    out = str(tmp_path_factory.mktemp("ref") / "ref.zarr")
    r = _cli(*ARGV, "--out", out)
    assert r.returncode == 0, r.stderr
    return dg.open_run(out)


def _assert_identical(dt, ref):
    assert_runs_identical(dt, ref, N_ITER)


def _committed(run) -> int:
    try:
        return read_checkpoint(run)["n_draws"]
    except (FileNotFoundError, RunError):
        return 0


READER = textwrap.dedent("""
    import contextlib, io, json, os, sys, time
    import numpy as np
    from daskgp.interface.cli import main
    from daskgp.mcmc.diagnostics import open_run, run_summary, save_netcdf, whole_chains

    run, stop, report, scratch = sys.argv[1:5]
    seen, errors, reads = set(), [], 0
    while not os.path.exists(stop):
        try:
            dt = open_run(run)
        except FileNotFoundError:  # before the first block is committed
            time.sleep(0.02)
            continue
        except Exception as e:
            errors.append(f"open_run: {type(e).__name__}: {e}")
            continue
        reads += 1
        seen.add(dt.attrs["n_draws"])
        whole = whole_chains(dt)["posterior"]
        if any(np.isnan(whole[v].values).any() for v in whole.data_vars):
            errors.append(f"NaN among the {dt.attrs['n_draws']} committed draws")
        try:
            run_summary(dt)
        except ValueError as e:
            if "run longer" not in str(e):
                errors.append(f"run_summary: {e}")
        save_netcdf(dt, os.path.join(scratch, "download.nc"), overwrite=True)  # the dashboard's download
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(["summary", run])
        if rc and "run longer" not in err.getvalue():
            errors.append(f"daskgp summary: {err.getvalue().strip()}")
    with open(report, "w") as f:
        json.dump({"reads": reads, "seen": sorted(seen), "errors": errors}, f)
""")


def test_a_reader_looping_beside_the_writer_changes_nothing(reference, tmp_path):
    """The reproduction of the issue: repeated summaries and downloads while the run is written. The run
    ends bit-identical to the undisturbed one, and every read showed only committed, finite draws."""
    run, stop, report = str(tmp_path / "r.zarr"), tmp_path / "stop", tmp_path / "report.json"
    script = tmp_path / "reader.py"
    script.write_text(READER)
    reader = subprocess.Popen([sys.executable, str(script), run, str(stop), str(report), str(tmp_path)],
                              env=os.environ.copy())
    try:
        r = _cli(*ARGV, "--out", run)
    finally:
        stop.touch()
        reader.wait(timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads(report.read_text())
    assert not rep["errors"], rep["errors"][:5]
    # the reader really read while the run grew: several different committed lengths, all whole blocks
    assert rep["reads"] >= 5 and len(rep["seen"]) >= 3, rep
    assert all(n % EVERY == 0 and 0 < n <= N_ITER for n in rep["seen"]), rep
    _assert_identical(dg.open_run(run), reference)
    assert lock_info(run) is None


# SIGKILL of the CLI (no clean-up, a stale lock taken over on resume) is in tests/test_fault_injection.py,
# on a real dask-scheduler; the parameter stays so either can be run here
@pytest.mark.parametrize("sig", [signal.SIGINT], ids=["SIGINT"])
def test_an_interrupted_cli_then_resume_is_bit_identical(sig, reference, tmp_path):
    """Ctrl-C (the CLI stops cleanly, exit 130) or SIGKILL (no clean-up at all: the lock is left stale, and
    resume reports and takes it over) after some blocks: the resumed run equals the undisturbed one."""
    run = str(tmp_path / "k.zarr")
    proc = _popen(*ARGV, "--out", run)
    deadline = time.time() + 240
    while _committed(run) < 60 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    n = _committed(run)
    assert 60 <= n < N_ITER and n % EVERY == 0
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "Traceback" not in err
        assert f"{n} draws per chain are saved" in err.strip().splitlines()[-1]
        assert lock_info(run) is None
    else:
        assert lock_info(run).state == "stale"
    assert dg.open_run(run).attrs["n_draws"] == n  # readers still read the committed draws
    r = _cli("sample", "--resume", run)
    assert r.returncode == 0, r.stderr
    assert ("is no longer running; taking over its lock" in r.stderr) == (sig == signal.SIGKILL)
    _assert_identical(dg.open_run(run), reference)
    assert lock_info(run) is None

