"""The one writer rule on the surfaces issue 56 found outside it: ``--predictions`` (a Parquet folder) is
checked like every other output — not inside an input table, a run or a checkpoint, not onto ``--out`` —;
a CSV is never replaced (a user's table whose header ended in the prediction columns was); a saved zarr
model is replaced only when every node in it is one the model wrote (a user's sub-group was deleted); a
run is never written inside a run. Each case is refused in one line before any work, and nothing changes
on disk. (Each failed on 5e0e80b, the code before the fix.)"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import daskgp
from daskgp.interface.cli import main


def _one_line(capsys, code):
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and err[0].startswith("daskgp: error:"), err
    return err[0]


def _tree(path) -> dict:
    """Every file under ``path`` with its bytes: what must not change."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = fh.read()
    return out


@pytest.fixture
def table(tmp_path):
    """250 concrete rows as a Parquet folder of two files."""
    ds = daskgp.load("concrete")
    df = pd.DataFrame(np.column_stack([ds.X[:250], ds.y[:250]]), columns=[*ds.feature_names, "y"])
    folder = tmp_path / "concrete.parquet"
    folder.mkdir()
    df.iloc[:125].to_parquet(folder / "a.parquet", index=False)
    df.iloc[125:].to_parquet(folder / "b.parquet", index=False)
    return folder


@pytest.mark.parametrize("command", ["sgpr", "advgp", "gpc"])
@pytest.mark.parametrize("case", ["in-table", "onto-out", "onto-checkpoint", "in-run", "in-checkpoint"])
def test_predictions_folder_follows_the_writer_rule(command, case, table, tmp_path, capsys):
    """The five places issue 56 found ``--predictions`` writing (the table's folder, ``--out``, the fit's
    checkpoint, a run, an interrupted fit's checkpoint folder): each refused in one line, before any work,
    and the folder tree unchanged."""
    out = tmp_path / "m.nc"
    run = tmp_path / "run.zarr"
    run.mkdir()
    (run / "zarr.json").write_text("{}")
    held = tmp_path / "held.nc.checkpoint"  # an interrupted fit's checkpoint folder of another --out
    held.mkdir()
    (held / "daskgp-checkpoint.json").write_text("{}")
    preds = {"in-table": table / "preds", "onto-out": out, "onto-checkpoint": f"{out}.checkpoint",
             "in-run": run / "preds", "in-checkpoint": held / "preds"}[case]
    want = {"in-table": "is inside the input", "onto-out": "is the same path as --predictions",
            "onto-checkpoint": "is the same path as the checkpoint", "in-run": "is inside the store",
            "in-checkpoint": "is inside the store"}[case]
    before = _tree(tmp_path)
    argv = [command, "--data", str(table), "--target", "y", "--inducing", "5", "--out", str(out),
            "--predictions", str(preds)]
    msg = _one_line(capsys, main(argv))
    assert want in msg, msg
    assert _tree(tmp_path) == before and sorted(os.listdir(tmp_path)) == sorted(
        ["concrete.parquet", "run.zarr", "held.nc.checkpoint"])


def test_predict_never_replaces_a_csv_even_one_with_the_prediction_columns(tmp_path, capsys):
    """A user's CSV whose header happens to end in ``mean,sd,lower,upper`` was replaced by ``predict
    --overwrite`` (the header was the only marker): now no CSV is ever replaced, in one line."""
    (tmp_path / "run.zarr").mkdir()
    x = tmp_path / "x.csv"
    x.write_text("a,b\n1,2\n")
    theirs = tmp_path / "results.csv"
    theirs.write_text("site,year,mean,sd,lower,upper\nA,2020,1.5,0.2,1.1,1.9\n")
    before = theirs.read_bytes()
    msg = _one_line(capsys, main(["predict", str(tmp_path / "run.zarr"), "--x", str(x), "--out", str(theirs),
                                  "--overwrite"]))
    assert "never replaces a CSV" in msg and theirs.read_bytes() == before


@pytest.fixture(scope="module")
def fitted():
    ds = daskgp.load("concrete")
    est = daskgp.SparseGPRegressor(n_inducing=5, max_iter=3, learn_inducing=False)
    return est.fit(ds.X[:200], ds.y[:200])


def test_a_saved_zarr_model_holding_a_users_sub_group_is_not_replaced(fitted, tmp_path):
    """``save(path.zarr, overwrite=True)`` replaces a store only when every node in it, recursively, is one
    the model wrote (the manifest in its attributes): a user's group stored inside an old model, or a
    file inside one of its arrays, makes it foreign; the pristine store is replaced as before."""
    path = tmp_path / "m.zarr"
    fitted.save(path)
    fitted.save(path, overwrite=True)  # ours: replaced
    xr.Dataset({"notes": ("k", np.arange(4.0))}).to_zarr(path, group="mine", mode="w")
    before = _tree(path)
    with pytest.raises(ValueError, match="it holds 'mine', which daskgp did not write there"):
        fitted.save(path, overwrite=True)
    assert _tree(path) == before
    np.testing.assert_array_equal(xr.open_zarr(path, group="mine")["notes"].values, np.arange(4.0))
    other = tmp_path / "n.zarr"
    fitted.save(other)
    node = next(e for e in os.listdir(other) if e != "zarr.json")
    (other / node / "c" / "README").write_text("mine")  # a user's file inside an array's chunk tree
    with pytest.raises(ValueError, match=f"holds files in its node '{node}' that daskgp did not write"):
        fitted.save(other, overwrite=True)
    assert (other / node / "c" / "README").read_text() == "mine"


def test_a_run_is_never_written_inside_a_run(tmp_path, capsys):
    """``sample --out run1.zarr/sub.zarr`` wrote a run inside a run: refused like every other writer's
    path inside a store, before any work."""
    run = tmp_path / "run1.zarr"
    run.mkdir()
    (run / "zarr.json").write_text("{}")
    before = _tree(run)
    msg = _one_line(capsys, main(["sample", "--data", "concrete", "--out", str(run / "sub.zarr")]))
    assert "inside the store" in msg and _tree(run) == before and os.listdir(run) == ["zarr.json"]


@pytest.mark.parametrize("change,what", [
    (lambda ds: ds.attrs.pop("digests"), "has no digests"),
    (lambda ds: ds.attrs.update(y_scale=ds.attrs["y_scale"] * 1000), "the attributes"),
    (lambda ds: ds.attrs.update(noise_std=ds.attrs["noise_std"] * 2), "the attributes"),
    (lambda ds: ds.attrs.update(y_mean=ds.attrs["y_mean"] + 1), "the attributes"),
    (lambda ds: ds.assign_coords(feature=[f"f{j}" for j in range(ds.sizes["feature"])]), "feature"),
])
def test_a_saved_model_is_refused_without_its_digests_or_with_an_altered_value(fitted, change, what,
                                                                               tmp_path):
    """Issue 56, item 7: a model whose ``digests`` attribute was removed loaded unchecked (a lost chunk
    then predicted sd = NaN), and ``y_scale``, ``y_mean``, the noise and the feature names were not covered
    (a ×1000 ``y_scale`` was accepted). Each is refused, naming what differs; the untouched copy loads."""
    path = tmp_path / "m.nc"
    fitted.save(path)
    ds = xr.load_dataset(path)
    daskgp.SparseGPRegressor.load(path)  # the saved copy itself is fine
    out = change(ds)
    ds = out if isinstance(out, xr.Dataset) else ds
    ds.to_netcdf(bad := tmp_path / "altered.nc")
    with pytest.raises(ValueError, match=what):
        daskgp.SparseGPRegressor.load(bad)
