"""``daskgp gpc``: a results file with the model and held-out predictions, progress with the evidence and the
held-out error, and bad input refused in one line."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from daskgp.interface.cli import main


@pytest.mark.cluster
def test_results_file_and_progress(tmp_path):
    out = tmp_path / "g.nc"
    r = subprocess.run([sys.executable, "-m", "daskgp", "gpc", "--data", "breast_cancer", "--inducing", "10",
                        "--max-iter", "30", "--method", "ep", "--out", str(out)],
                       capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert "EP |" in r.stderr and "30/30 [" in r.stderr and "held-out error" in r.stderr
    assert "EP on every row an iteration" in r.stdout  # --batch 'auto' (the default) for EP: batch mode
    assert "test error" in r.stdout
    with xr.open_dataset(out) as res:
        assert res.attrs["test_nll"] < res.attrs["prior_nll"] / 2 and res.attrs["test_error"] < 0.15
        assert res.sizes["iteration"] == 30 and res.sizes["test"] == 57
        assert res.attrs["positive_class"] == "malignant" and res.attrs["method"] == "ep"
        assert list(res["feature"].values)[:2] == ["mean radius", "mean texture"]
        p = res["test_proba"].values
        assert np.all((0 < p) & (p < 1))


@pytest.mark.cluster
def test_a_minibatch_fit_says_its_factor_was_re_made(tmp_path):
    """SEP on minibatches ends by re-making its factor from every training row: the command says so, once."""
    out = tmp_path / "g.nc"
    r = subprocess.run([sys.executable, "-m", "daskgp", "gpc", "--data", "breast_cancer", "--inducing", "10",
                        "--max-iter", "10", "--method", "sep", "--batch", "100", "--out", str(out)],
                       capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert "SEP on minibatches of 100 rows" in r.stdout
    said = "SEP's factor re-made from every training row at the final hyperparameters (2 passes"
    assert r.stdout.count(said) == 1


def _csv(tmp_path, name, labels, nan_label=False):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(len(labels), 3)), columns=["a", "b", "c"])
    df["label"] = labels
    if nan_label:
        df.loc[2, "label"] = None
    path = tmp_path / f"{name}.csv"
    df.to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("case,msg", [
    ("three", "3 classes; daskgp gpc is a binary classifier"),
    ("nan_label", "missing labels"),
    ("inducing", "--inducing must be >= 1"),
    ("unknown", "unknown classification data set"),
    ("out", "ending in .nc"),
    ("too_many", "more than the"),
    ("batch_zero", "--batch must be >= 1"),
    ("batch_word", "--batch must be a positive integer or 'auto' or 'all'"),
    ("chunk_rows", "--chunk-rows must be a positive integer or 'auto'"),
])
def test_bad_input_one_line(case, msg, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = {"three": ["--csv", _csv(tmp_path, "three", ["x", "y", "z"] * 10)],
            "nan_label": ["--csv", _csv(tmp_path, "nan", ["x", "y"] * 10, nan_label=True)],
            "inducing": ["--inducing", "0"], "unknown": ["--data", "iris"], "out": ["--out", "g.zarr"],
            "too_many": ["--csv", _csv(tmp_path, "two", ["x", "y"] * 10), "--inducing", "50"],
            "batch_zero": ["--batch", "0"], "batch_word": ["--batch", "lots"],
            "chunk_rows": ["--chunk-rows", "many"]}[case]
    assert main(["gpc", *argv]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("daskgp: error:") and msg in err[0], err


@pytest.mark.cluster
@pytest.mark.parametrize("sig", [pytest.param("SIGINT", marks=pytest.mark.slow), "SIGKILL"])
def test_an_interrupted_gpc_resumes_and_ends_bit_identical(sig, tmp_path):
    """Issue 29: ``daskgp gpc`` checkpoints every iteration; Ctrl-C (exit 130, a hint) or SIGKILL mid-fit,
    then the same command with --resume, ends with the undisturbed fit's results file: the same evidence
    trace and held-out probabilities, bit for bit (SEP, 120 iterations of breast cancer)."""
    import signal
    import time

    argv = ["gpc", "--data", "breast_cancer", "--inducing", "15", "--max-iter", "120", "--workers", "1"]

    def cli(*extra, **kw):
        return subprocess.run([sys.executable, "-m", "daskgp", *argv, *extra], capture_output=True, text=True,
                              timeout=300, env=os.environ.copy(), **kw)

    ref = tmp_path / "ref.nc"
    assert cli("--out", str(ref)).returncode == 0
    out = tmp_path / "g.nc"
    ckpt = tmp_path / "g.nc.checkpoint"
    proc = subprocess.Popen([sys.executable, "-m", "daskgp", *argv, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    from daskgp.gpc.fit import GPCCheckpoint

    deadline = time.time() + 240
    while GPCCheckpoint(ckpt).iterations() < 20 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=120)
    done = GPCCheckpoint(ckpt).iterations()
    assert 20 <= done < 120 and not out.exists()
    if sig == "SIGINT":
        assert proc.returncode == 130 and "--resume" in err.strip().splitlines()[-1], err
        assert "Traceback" not in err
    again = cli("--out", str(out))  # refuses to restart over the checkpoint
    assert again.returncode == 1 and "--resume" in again.stderr.strip().splitlines()[-1]
    r = cli("--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr
    assert f"resuming from {ckpt} after {done} iterations" in r.stdout
    with xr.open_dataset(ref) as a, xr.open_dataset(out) as b:
        for v in ("evidence", "train_error", "test_proba", "inducing_points", "factor_T"):
            np.testing.assert_array_equal(a[v].values, b[v].values)
    assert not ckpt.exists()
