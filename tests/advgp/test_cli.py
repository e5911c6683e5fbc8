"""``daskgp advgp`` end to end: results file, Ctrl-C then --resume (τ = 0: the same run bit for bit), and bad
input in one line."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr

from daskgp.interface.cli import main

BASE = ["advgp", "--data", "flights", "--train-size", "2000", "--inducing", "20"]


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "daskgp", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


@pytest.mark.cluster
def test_results_file_and_progress(tmp_path):
    out = tmp_path / "a.nc"
    r = _cli(*BASE, "--max-iter", "60", "--tau", "2", "--batch", "300", "--init", "kmeans", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "ADVGP |" in r.stderr and "test RMSE" in r.stderr and "test RMSE" in r.stdout
    with xr.open_dataset(out) as res:
        assert res.attrs["test_rmse"] < res.attrs["mean_predictor_rmse"]
        assert res.sizes["update"] == 60 and int(res["max_staleness"].max()) <= 2
        assert list(res["feature"].values)[:2] == ["month", "day"]
        assert res.attrs["batch_size"] == 300 and int(res.attrs["gradients_per_partition"].sum()) >= 60
        assert res.attrs["init"] == "kmeans"
    assert not os.path.exists(f"{out}.checkpoint")


@pytest.mark.cluster
@pytest.mark.slow
def test_ctrl_c_then_resume_is_the_uninterrupted_run(tmp_path):
    """τ = 0: interrupted once the first checkpoint is written, resumed, the objective trace equals an
    uninterrupted run's bit for bit (the checkpoint holds θ, the version and ADADELTA's state exactly). The
    interrupted run asks for 100,000 updates, so the interruption always lands mid-run whatever the machine's
    speed; the resumed one stops at 150 (the update count is not part of the checkpoint's settings)."""
    argv = [*BASE, "--max-iter", "150", "--tau", "0"]
    endless = [*BASE, "--max-iter", "100000", "--tau", "0"]
    ref = tmp_path / "ref.nc"
    assert _cli(*argv, "--out", str(ref)).returncode == 0
    out = tmp_path / "run.nc"
    ckpt = os.path.join(f"{out}.checkpoint", "daskgp-checkpoint.json")
    proc = subprocess.Popen([sys.executable, "-m", "daskgp", *endless, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    deadline = time.time() + 120
    while not os.path.exists(ckpt) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "--resume" in err.strip().splitlines()[-1]
    done = json.loads(open(ckpt).read())["step"]  # the server's version
    assert 0 < done < 150
    r = _cli(*argv, "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr
    with xr.open_dataset(ref) as a, xr.open_dataset(out) as b:
        np.testing.assert_array_equal(a["objective"].values, b["objective"].values)
        np.testing.assert_array_equal(a["test_mean"].values, b["test_mean"].values)


@pytest.mark.parametrize("argv,msg", [
    (["advgp", "--tau", "-1"], "--tau must be >= 0"),
    (["advgp", "--inducing", "0"], "--inducing must be >= 1"),
    (["advgp", "--batch", "0"], "--batch must be >= 1"),
    (["advgp", "--batch", "lots"], "--batch must be a positive integer or 'auto' or 'all'"),
    (["advgp", "--out", "x.zarr"], "ending in .nc"),
    (["advgp", "--resume"], "no checkpoint to resume"),
    (["advgp", "--train-size", "10", "--inducing", "20"], "more than the 10 training rows"),
])
def test_bad_input_one_line(argv, msg, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("daskgp: error:") and msg in err[0], err
