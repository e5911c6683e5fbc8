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
    assert "test error" in r.stdout
    with xr.open_dataset(out) as res:
        assert res.attrs["test_nll"] < res.attrs["prior_nll"] / 2 and res.attrs["test_error"] < 0.15
        assert res.sizes["iteration"] == 30 and res.sizes["test"] == 57
        assert res.attrs["positive_class"] == "malignant" and res.attrs["method"] == "ep"
        assert list(res["feature"].values)[:2] == ["mean radius", "mean texture"]
        p = res["test_proba"].values
        assert np.all((0 < p) & (p < 1))


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
])
def test_bad_input_one_line(case, msg, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = {"three": ["--csv", _csv(tmp_path, "three", ["x", "y", "z"] * 10)],
            "nan_label": ["--csv", _csv(tmp_path, "nan", ["x", "y"] * 10, nan_label=True)],
            "inducing": ["--inducing", "0"], "unknown": ["--data", "iris"], "out": ["--out", "g.zarr"],
            "too_many": ["--csv", _csv(tmp_path, "two", ["x", "y"] * 10), "--inducing", "50"]}[case]
    assert main(["gpc", *argv]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("daskgp: error:") and msg in err[0], err
