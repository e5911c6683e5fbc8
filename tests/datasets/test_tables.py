"""Tables read on the workers (daskgp.datasets.tables, issue 34 item 1): Parquet folders and globs, CSV
globs and zarr stores of real data give the same rows as the CSV they were written from, chunk per file;
a sparse fit from a Parquet folder equals the fit from numpy arrays; bad input is refused in one line."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest

import daskgp
from daskgp.datasets import Table, is_table_path, read_table

N_FILES = 4
T = "energy_output_mw"
F = ["temperature", "exhaust_vacuum", "ambient_pressure", "relative_humidity"]


@pytest.fixture(scope="module")
def plant():
    """power_plant (9,568 rows, 4 features, target energy_output_mw) as a DataFrame in the data's units."""
    ds = daskgp.load("power_plant")
    return pd.DataFrame(np.column_stack([ds.X, ds.y]), columns=[*ds.feature_names, ds.target_name])


def _split(df: pd.DataFrame, k: int = N_FILES) -> list[pd.DataFrame]:
    cuts = np.linspace(0, len(df), k + 1).astype(int)
    return [df.iloc[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


@pytest.fixture
def parquet_folder(tmp_path, plant):
    folder = tmp_path / "plant.parquet"
    folder.mkdir()
    for i, part in enumerate(_split(plant)):
        part.to_parquet(folder / f"part.{i}.parquet", index=False)
    return folder


def _same_rows(t: Table, df: pd.DataFrame, target: str, features=None):
    feats = [c for c in df.columns if c != target] if features is None else features
    assert t.feature_names == tuple(feats) and t.target_name == target
    assert t.n == len(df)
    np.testing.assert_array_equal(t.X.compute(), df[feats].to_numpy(np.float64))
    np.testing.assert_array_equal(t.y.compute(), df[target].to_numpy(np.float64))


def test_a_parquet_folder_is_read_file_by_file_from_its_footers(parquet_folder, plant):
    t = read_table(parquet_folder)
    assert t.kind == "parquet" and len(t.chunk_names) == N_FILES
    assert t.X.chunks[0] == tuple(len(p) for p in _split(plant))  # row counts from the footers
    _same_rows(t, plant, T)
    # a glob of the same files, with the target and features named
    t2 = read_table(f"{parquet_folder}/part.*.parquet", target=F[0], features=f"{F[1]},{F[3]}")
    _same_rows(t2, plant, F[0], [F[1], F[3]])
    assert isinstance(daskgp.load(str(parquet_folder)), Table)  # dg.load(PATH)


def test_a_csv_glob_and_zarr_stores_give_the_same_rows(tmp_path, plant):
    import zarr

    for i, part in enumerate(_split(plant)):
        part.to_csv(tmp_path / f"plant-{i}.csv", index=False)
    t = read_table(str(tmp_path / "plant-*.csv"))
    assert t.kind == "csv" and len(t.chunk_names) == N_FILES
    _same_rows(t, plant, T)
    a = zarr.create_array(str(tmp_path / "a.zarr"), shape=plant.shape, chunks=(3000, 5), dtype="f8")
    a[:] = plant.to_numpy()
    a.attrs["columns"] = list(plant.columns)
    t = read_table(str(tmp_path / "a.zarr"))
    assert t.X.chunks[0] == (3000, 3000, 3000, 568)
    _same_rows(t, plant, T)
    g = zarr.open_group(str(tmp_path / "cols.zarr"), mode="w")
    for c in plant.columns:
        g.create_array(c, shape=(len(plant),), chunks=(4000,), dtype="f8")[:] = plant[c].to_numpy()
    _same_rows(read_table(str(tmp_path / "cols.zarr"), target=T, features=F), plant, T, F)
    with pytest.raises(ValueError, match="name the target"):
        read_table(str(tmp_path / "cols.zarr"))


@pytest.mark.cluster
def test_a_sparse_fit_from_a_parquet_folder_equals_the_fit_from_numpy(parquet_folder, plant, client):
    t = read_table(parquet_folder).check_finite()
    kw = dict(n_inducing=20, max_iter=15, chunk_rows=2392, random_state=0)
    a = daskgp.SparseGPRegressor(**kw).fit(t.X, t.y, client=client)
    b = daskgp.SparseGPRegressor(**kw).fit(plant[F].to_numpy(), plant[T].to_numpy(), client=client)
    assert a.fit_info_["n_iterations"] == b.fit_info_["n_iterations"]
    np.testing.assert_allclose(a.bound_, b.bound_, rtol=1e-10)
    Xq = plant[F].to_numpy()[:500]
    np.testing.assert_allclose(a.predict(Xq), b.predict(Xq), rtol=1e-10)


@pytest.mark.cluster
def test_a_gplvm_fit_from_a_parquet_folder_equals_the_fit_from_numpy(parquet_folder, plant, client):
    """The Bayesian GPLVM on the table's rows (all five columns: Y (n, 5)) read from four files on the
    workers, and on the same rows as one numpy array: the same bound, embedding and parameters, bit for bit
    (chunk_rows sets the row chunks, not the files; every sum is taken in chunk order). The table's rows
    never come to this process; its latent state does (n × q, the restart copy)."""
    t = read_table(parquet_folder, target=T)
    Y_table = da.concatenate([t.X, t.y[:, None]], axis=1)
    Y = plant[F + [T]].to_numpy()
    kw = dict(n_components=2, n_inducing=10, n_outer=2, global_iter=5, local_iter=3, chunk_rows=1500)
    a = daskgp.BayesianGPLVM(**kw).fit(Y_table, client=client)
    b = daskgp.BayesianGPLVM(**kw).fit(Y, client=client)
    # bit for bit: every chunk's arrays are 64-byte aligned where they are placed (an unaligned chunk gave
    # Gram matrices that differed in the last bit, which the fit amplified to 2e-4 in the bound)
    assert a.bound_trace_ == b.bound_trace_ and len(a.bound_trace_) >= 4
    np.testing.assert_array_equal(a.embedding_, b.embedding_)
    np.testing.assert_array_equal(a.params_.to_vector(), b.params_.to_vector())
    # the start is PCA's: the embedding's first axis follows the rows' leading principal component
    Ys = (Y - Y.mean(0)) / Y.std()
    pc1 = Ys @ np.linalg.eigh(Ys.T @ Ys)[1][:, -1]
    assert abs(np.corrcoef(a.embedding_[:, np.argmin(a.lengthscales_)], pc1)[0, 1]) > 0.9


def test_a_gplvm_refuses_unknown_chunks_and_names_the_file_with_nan(tmp_path, plant):
    import dask.dataframe as dd

    ddf = dd.from_pandas(plant, npartitions=3)
    with pytest.raises(ValueError, match="Y has unknown chunk sizes"):
        daskgp.BayesianGPLVM().fit(ddf.to_dask_array())
    with pytest.raises(ValueError, match='client="in-process" fits numpy rows'):
        daskgp.BayesianGPLVM().fit(da.from_array(plant.to_numpy()), client="in-process")
    nan = tmp_path / "nan"
    nan.mkdir()
    parts = _split(plant, 2)
    parts[0].to_parquet(nan / "a.parquet", index=False)
    bad = np.where(np.arange(len(parts[1])) == 7, np.nan, parts[1].temperature)
    parts[1].assign(temperature=bad).to_parquet(nan / "b.parquet", index=False)
    t = read_table(nan, target=T)
    with pytest.raises(ValueError, match=r"row chunk 1 \(rows 4,784–9,567\), row 4,791, X column 0: 1 "
                                         r"non-finite value"):
        daskgp.BayesianGPLVM().fit(t.X)


def test_bad_tables_are_refused_in_one_line(tmp_path, parquet_folder, plant):
    def refused(exc, match, *args, **kw):
        with pytest.raises(exc, match=match) as e:
            read_table(*args, **kw)
        assert "\n" not in str(e.value)

    refused(FileNotFoundError, "no file matches", str(tmp_path / "nothing-*.parquet"))
    refused(ValueError, f"no target column 'price'; its columns: {', '.join(F + [T])}", parquet_folder,
            target="price")
    refused(ValueError, "no column 'wind'", parquet_folder, features=[F[0], "wind"])
    # mixed schemas: one file with a column renamed
    odd = tmp_path / "odd"
    odd.mkdir()
    parts = _split(plant)
    parts[0].to_parquet(odd / "a.parquet", index=False)
    parts[1].rename(columns={"relative_humidity": "humidity"}).to_parquet(odd / "b.parquet", index=False)
    refused(ValueError, r"b.parquet has other columns than .*a.parquet \(humidity: double, "
            r"relative_humidity: double\)", odd)
    # a non-numeric feature column
    txt = tmp_path / "txt.parquet"
    plant.assign(site=["north"] * len(plant)).to_parquet(txt, index=False)
    refused(ValueError, r"non-numeric column\(s\) site \(string|non-numeric column\(s\) site \(large_string",
            txt, target=T)
    # a CSV glob whose values are text where the header looked numeric fails where its rows are counted (on
    # the workers, before any fit), naming the file, the row and the column
    plant.iloc[:50].to_csv(tmp_path / "c-0.csv", index=False)
    plant.iloc[50:100].assign(relative_humidity="dry").to_csv(tmp_path / "c-1.csv", index=False)
    refused(ValueError, r"c-1.csv, its row 0, column relative_humidity: the value 'dry' is not a number",
            str(tmp_path / "c-*.csv"))
    # NaN in one partition: the error names its file
    nan = tmp_path / "nan"
    nan.mkdir()
    for i, part in enumerate(parts):
        part = part.copy()
        if i == 2:
            part.iloc[7, 1] = np.nan
        part.to_parquet(nan / f"p{i}.parquet", index=False)
    with pytest.raises(ValueError, match=r"p2.parquet, its row 7, X column 1 \(exhaust_vacuum\): 1 "
                                         r"non-finite value\(s\) \(NaN or inf\) in X"):
        read_table(nan).check_finite()
    with pytest.raises(ValueError, match="built-in data set 'concrete'"):
        daskgp.load("concrete", target="strength")


def test_unknown_chunk_sizes_are_refused_by_the_estimator(plant):
    import dask.dataframe as dd

    ddf = dd.from_pandas(plant, npartitions=3)
    with pytest.raises(ValueError, match="X has unknown chunk sizes"):
        daskgp.SparseGPRegressor(n_inducing=5).fit(ddf[F[:2]].to_dask_array(),
                                                   ddf[T].to_dask_array())


def test_which_strings_name_tables(tmp_path):
    assert is_table_path("data/*.parquet") and is_table_path("x.parquet") and is_table_path("store.zarr/")
    assert is_table_path(str(tmp_path)) and not is_table_path("concrete") and not is_table_path("my.csv")


@pytest.mark.cluster
def test_advgp_fits_a_parquet_folder_file_by_file_as_it_fits_the_same_partitions_of_numpy(parquet_folder,
                                                                                           plant, client):
    """τ = 0 (synchronous updates): the fit from the four files, each a partition read on the workers,
    equals the numpy fit with four partitions of the same rows."""
    t = read_table(parquet_folder)
    kw = dict(n_inducing=16, max_iter=12, tau=0, random_state=0)
    a = daskgp.ADVGPRegressor(**kw).fit(t.X, t.y, client=client)
    b = daskgp.ADVGPRegressor(n_partitions=N_FILES, **kw).fit(plant[F].to_numpy(), plant[T].to_numpy(),
                                                              client=client)
    assert a.gradients_per_partition_ == b.gradients_per_partition_ and len(a.gradients_per_partition_) == 4
    np.testing.assert_allclose(a.objective_, b.objective_, rtol=1e-10)
    np.testing.assert_allclose(a.predict(plant[F].to_numpy()[:300]), b.predict(plant[F].to_numpy()[:300]),
                               rtol=1e-10)


def test_cli_sgpr_fits_a_parquet_folder_and_reduces_the_test_metrics_on_the_workers(parquet_folder, plant,
                                                                                     tmp_path):
    """`daskgp sgpr --data FOLDER --target T --predictions P`: the split by row-index hash (the rows
    split_table holds out), the metrics reduced on the workers, the results file a fitted model whose
    predictions on those test rows give the stored RMSE; the workers wrote those rows' target, mean and sd
    as a Parquet folder, one file per input file, equal to the loaded model's predictions."""
    import os
    import subprocess
    import sys

    import xarray as xr

    from daskgp.datasets.splits import is_test_row as _is_test

    out, preds = tmp_path / "table.nc", tmp_path / "preds.parquet"
    argv = ["sgpr", "--data", str(parquet_folder), "--target", T, "--features", ",".join(F[:3]),
            "--inducing", "20", "--max-iter", "10", "--out", str(out), "--predictions", str(preds)]
    r = subprocess.run([sys.executable, "-m", "daskgp", *argv], capture_output=True, text=True, timeout=300,
                       env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert "parquet, 4 chunks read on the workers" in r.stdout and "test RMSE" in r.stdout
    test = _is_test(0, len(plant), 0, 0.1)
    with xr.open_dataset(out) as res:
        assert res.attrs["n_test"] == test.sum() and res.attrs["target"] == T
        assert res.attrs["test_rmse"] < 0.5 * res.attrs["mean_predictor_rmse"]
        rmse = res.attrs["test_rmse"]
    est = daskgp.SparseGPRegressor.load(out)
    pred, sd = est.predict(plant[F[:3]].to_numpy()[test], return_std=True)
    assert np.sqrt(np.mean((pred - plant[T].to_numpy()[test]) ** 2)) == pytest.approx(rmse, rel=1e-9)
    assert len(list(preds.glob("*.parquet"))) == N_FILES
    written = pd.read_parquet(preds)
    assert list(written.columns) == [T, "mean", "sd"] and len(written) == test.sum()
    np.testing.assert_array_equal(written[T].to_numpy(), plant[T].to_numpy()[test])
    np.testing.assert_allclose(written["mean"].to_numpy(), pred, rtol=1e-10)
    np.testing.assert_allclose(written["sd"].to_numpy(), sd, rtol=1e-10)


def test_cli_advgp_fits_a_parquet_folder_one_partition_per_file(parquet_folder, plant, tmp_path):
    """`daskgp advgp --data FOLDER`: the files' training rows are its partitions, the test RMSE reduced on
    the workers equals the loaded model's on the hashed test rows."""
    import os
    import subprocess
    import sys

    import xarray as xr

    from daskgp.datasets.splits import is_test_row as _is_test

    out = tmp_path / "advgp.nc"
    argv = ["advgp", "--data", str(parquet_folder), "--inducing", "16", "--max-iter", "20", "--tau", "0",
            "--out", str(out)]
    r = subprocess.run([sys.executable, "-m", "daskgp", *argv], capture_output=True, text=True, timeout=300,
                       env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert "parquet, 4 chunks read on the workers" in r.stdout
    test = _is_test(0, len(plant), 0, 0.1)
    with xr.open_dataset(out) as res:
        assert res.attrs["n_test"] == test.sum()
        assert len(res.attrs["gradients_per_partition"]) == N_FILES
        assert res.attrs["test_rmse"] < res.attrs["mean_predictor_rmse"]
        rmse = res.attrs["test_rmse"]
    assert "test RMSE" in r.stdout and f"{rmse:.3f}" in r.stdout


def test_the_table_split_holds_out_the_same_rows_however_the_files_cut_them(tmp_path, plant):
    from daskgp.datasets import split_table

    for k in (2, 5):
        folder = tmp_path / f"k{k}"
        folder.mkdir()
        for i, part in enumerate(_split(plant, k)):
            part.to_parquet(folder / f"{i}.parquet", index=False)
        _, ytr, _, yte = split_table(read_table(folder), 0.1, seed=3)
        if k == 2:
            first = (ytr.compute(), yte.compute())
        else:
            np.testing.assert_array_equal(ytr.compute(), first[0])
            np.testing.assert_array_equal(yte.compute(), first[1])
    assert 0.08 < len(first[1]) / len(plant) < 0.12


@pytest.mark.parametrize("argv,msg", [
    (["sample", "--data", "{folder}", "--out", "{folder}.run.zarr"], "'advgp' and 'gpc' read tables"),
    (["sgpr", "--data", "{folder}", "--train-size", "100"], "--train-size is for data in memory"),
    (["sgpr", "--features", "a,b"], "--features is for a --data table"),
    (["sgpr", "--data", "{folder}", "--target", "price"], "no target column 'price'"),
    (["gpc", "--data", "{folder}", "--train-size", "100"], "--train-size is for data in memory"),
    (["gpc", "--features", "a,b"], "--features is for a --data table"),
    (["gpc", "--data", "{folder}", "--inducing", "9000"], "--inducing 9000 is more than the"),
    (["sgpr", "--data", "concrete", "--predictions", "{folder}.p"], "--predictions is for a --data table"),
    (["advgp", "--data", "{folder}", "--predictions", "{folder}"], "is the input"),
    (["advgp", "--data", "{folder}", "--predictions", "{folder}.nc", "--out", "{folder}.nc"],
     "is the same path as"),
])
def test_cli_table_arguments_refused_in_one_line(argv, msg, capsys, parquet_folder):
    from daskgp.interface.cli import main

    assert main([a.format(folder=parquet_folder) for a in argv]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("daskgp: error:") and msg in err[0]


def test_a_tables_token_is_its_files_columns_and_their_state(parquet_folder):
    """What ties a fit's checkpoint to a table (dask's token of its graph) is the same for the same files
    and columns — in any process, so that --resume finds its checkpoint — and changes with a file."""
    import os

    from daskgp.core.fingerprint import data_token

    a, b = read_table(parquet_folder), read_table(parquet_folder)
    assert data_token(a.X, a.y) == data_token(b.X, b.y)
    assert data_token(a.X, a.y) != data_token(*(lambda t: (t.X, t.y))(read_table(parquet_folder,
                                                                               features=F[:2])))
    f = sorted(parquet_folder.iterdir())[0]
    st = os.stat(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    c = read_table(parquet_folder)
    assert data_token(c.X, c.y) != data_token(a.X, a.y)


@pytest.mark.cluster
def test_cli_gpc_fits_a_parquet_folder_as_the_estimator_fits_the_same_training_rows(tmp_path, client):
    """`daskgp gpc --data FOLDER`: breast cancer in three Parquet files, the row-index hash split, SEP; the
    test error and NLL reduced on the workers equal those of the estimator fitted in this process on the
    same training rows as one numpy array (SEP is deterministic; the CLI's chunks are the files' training
    rows, the numpy fit's one chunk, so the per-chunk sums are added in another order: 1e-8)."""
    import os
    import subprocess
    import sys

    import xarray as xr
    from sklearn.datasets import load_breast_cancer

    from daskgp.datasets.splits import is_test_row as _is_test

    frame = load_breast_cancer(as_frame=True).frame
    folder = tmp_path / "cancer.parquet"
    folder.mkdir()
    for i, (a, b) in enumerate([(0, 190), (190, 380), (380, len(frame))]):
        frame.iloc[a:b].to_parquet(folder / f"p{i}.parquet", index=False)
    out = tmp_path / "gpc.nc"
    r = subprocess.run([sys.executable, "-m", "daskgp", "gpc", "--data", str(folder), "--target", "target",
                        "--inducing", "10", "--max-iter", "15", "--out", str(out), "--predictions",
                        str(tmp_path / "p.parquet")], capture_output=True,
                       text=True, timeout=300, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert "parquet, 3 chunks read on the workers" in r.stdout and "test error" in r.stdout
    X, y = frame.drop(columns="target").to_numpy(float), frame["target"].to_numpy(float)
    test = _is_test(0, len(y), 0, 0.1)
    est = daskgp.SparseGPClassifier(n_inducing=10, method="sep", max_iter=15, random_state=0)
    est.fit(X[~test], y[~test], client=client)
    p1 = est.predict_proba(X[test])[:, 1]
    err = np.mean((p1 > 0.5) != (y[test] == 1))
    nll = -np.mean(np.log(np.where(y[test] == 1, p1, 1 - p1)))
    with xr.open_dataset(out) as res:
        assert res.attrs["n_test"] == test.sum() and res.attrs["test_error"] == pytest.approx(err, abs=1e-12)
        assert res.attrs["test_nll"] == pytest.approx(nll, rel=1e-8)
        assert res.attrs["test_nll"] < 0.5 * res.attrs["prior_nll"]
    written = pd.read_parquet(tmp_path / "p.parquet")  # the workers' Parquet files, one per input file
    assert list(written.columns) == ["target", "p_1"] and len(written) == test.sum()
    np.testing.assert_allclose(written["p_1"].to_numpy(), p1, rtol=1e-8)


def test_malformed_table_schemas_are_refused_in_one_line_naming_the_file(tmp_path, plant):
    """Issue 56, items 4 and 9: a zarr array whose ``columns`` attribute is shorter than its width was fitted
    with the wrong column as target (silently), a longer one raised IndexError, an X/y group's
    ``feature_names`` of the wrong length was accepted; Parquet with a repeated column name raised KeyError
    and a CSV's was renamed by pandas. Each is refused in one line before any row is read."""
    import zarr

    def refused(match, *args, **kw):
        with pytest.raises(ValueError, match=match) as e:
            read_table(*args, **kw)
        assert "\n" not in str(e.value)

    values = plant.to_numpy(np.float64)[:200]
    names = list(plant.columns)
    for k, attr in ((len(names) - 1, "short"), (len(names) + 1, "long")):
        arr = zarr.create_array(str(tmp_path / f"{attr}.zarr"), shape=values.shape, dtype="f8")
        arr[:] = values
        arr.attrs["columns"] = (names + ["extra"])[:k]
        refused(rf"{attr}.zarr: its attribute 'columns' names {k} columns; the array has 5", str(
            tmp_path / f"{attr}.zarr"), target=T)
    dup = zarr.create_array(str(tmp_path / "dup.zarr"), shape=values.shape, dtype="f8")
    dup[:] = values
    dup.attrs["columns"] = names[:3] + [names[0], T]
    refused(r"dup.zarr: the column name\(s\) 'temperature' appear more than once", str(tmp_path / "dup.zarr"))
    group = zarr.open_group(str(tmp_path / "xy.zarr"), mode="w")
    group.create_array("X", shape=(200, 4), dtype="f8")[:] = values[:, :4]
    group.create_array("y", shape=(200,), dtype="f8")[:] = values[:, 4]
    group.attrs["feature_names"] = names[:3]
    refused(r"xy.zarr: its attribute 'feature_names' names 3 columns; the array has 4",
            str(tmp_path / "xy.zarr"))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table([pa.array(values[:, j]) for j in (0, 1, 0, 4)], names=[F[0], F[1], F[0], T]),
                   tmp_path / "dup.parquet")
    refused(r"dup.parquet: the column name\(s\) 'temperature' appear more than once",
            tmp_path / "dup.parquet")
    (tmp_path / "dup.csv").write_text(f"{F[0]},{F[1]},{F[0]},{T}\n1,2,3,4\n5,6,7,8\n")
    refused(r"dup.csv: the column name\(s\) 'temperature' appear more than once", str(tmp_path / "dup*.csv"))


def test_a_nan_in_one_file_is_named_by_file_and_row_by_the_fit_commands(tmp_path, plant, capsys):
    """Issue 56, item 8: a NaN in one file of a table was reported by ``daskgp sgpr`` as "row chunk 2 (rows
    181–272)" of the training split; the line now names the file, its row and the column, and no worker
    traceback is printed before it."""
    from daskgp.interface.cli import main

    folder = tmp_path / "nan.parquet"
    folder.mkdir()
    for i, part in enumerate(_split(plant.iloc[:600], 3)):
        part = part.copy()
        if i == 1:
            part.iloc[11, 2] = np.nan  # ambient_pressure: X column 2
        part.to_parquet(folder / f"p{i}.parquet", index=False)
    code = main(["sgpr", "--data", str(folder), "--target", T, "--inducing", "5", "--max-iter", "2",
                 "--out", str(tmp_path / "m.nc")])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert code != 0 and "Traceback" not in err, err
    assert last.startswith("daskgp: error:"), last
    assert "p1.parquet, its row 11, X column 2 (ambient_pressure)" in last, last
    assert not (tmp_path / "m.nc").exists()


def test_text_in_one_file_of_a_csv_glob_is_one_line_without_a_worker_traceback(tmp_path, plant):
    """Issue 56, item 9: the worker that read the bad file logged distributed's "Compute Failed" with a
    traceback before the command's clean line; now the whole stderr (the workers' included: a real
    process) has no traceback and ends with the line naming the file. Another task failure would still be
    logged (the filter drops only daskgp's DataError)."""
    import subprocess
    import sys

    plant.iloc[:300].to_csv(tmp_path / "c-0.csv", index=False)
    plant.iloc[300:600].assign(relative_humidity="dry").to_csv(tmp_path / "c-1.csv", index=False)
    argv = ["sgpr", "--data", str(tmp_path / "c-*.csv"), "--target", T, "--inducing", "5", "--max-iter", "2",
            "--out", str(tmp_path / "m.nc")]
    r = subprocess.run([sys.executable, "-m", "daskgp", *argv], capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and "Traceback" not in r.stderr and "Compute Failed" not in r.stderr, r.stderr
    assert lines[-1] == (f"daskgp: error: {tmp_path / 'c-1.csv'}, its row 0, column relative_humidity: the "
                         "value 'dry' is not a number (rows counted from 0): daskgp needs numbers"), r.stderr


def test_each_csv_and_parquet_file_is_checked_before_any_fit_and_named_by_file_row_and_column(tmp_path,
                                                                                               plant):
    """Issue 56, item 3: every file of a table is checked at the boundary. Before: a zero-byte CSV was
    pandas' "No columns to parse from file" naming no file; text in one row was "non-numeric values in
    column(s) b" found only when the fit read the file; a line with more fields than the header lost its
    extra value silently (pandas drops it under ``usecols``); a non-UTF-8 file and a zero-byte or non-Parquet
    ``.parquet`` file were the library's messages naming no file. Each is now one line naming the file (and
    the row and column of a bad value), raised by ``read_table`` itself; a file holding only its header is
    an empty part and is read as such."""

    def table(name, files):
        folder = tmp_path / name
        folder.mkdir()
        for k, text in enumerate(files):
            (folder / f"p{k}.{'parquet' if isinstance(text, bytes) and name.startswith('pq') else 'csv'}") \
                .write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        return folder

    good = plant.iloc[:30].to_csv(index=False)
    head = good.splitlines()[0]
    rows = good.splitlines()[1:]
    ragged = "\n".join([head] + rows[:4] + [rows[4] + ",7.5"] + rows[5:]) + "\n"
    text_at_17 = rows[:17] + [rows[17].replace(rows[17].split(",")[3], "n/a ", 1)] + rows[18:]
    cases = [
        ("empty", [good, ""], r"p1.csv is empty \(no header line\)"),
        ("ragged", [good, ragged], r"p1.csv: line 6 has 6 fields where its header has 5"),
        ("text", [good, "\n".join([head] + text_at_17) + "\n"],
         r"p1.csv, its row 17, column relative_humidity: the value 'n/a ' is not a number "
         r"\(rows counted from 0\)"),
        ("latin1", [good, (head + "\n1,2,3,4,5\n").encode("utf-8") + "é,1,2,3,4\n".encode("latin-1")],
         r"p1.csv: not UTF-8 text"),
        ("pq-zero", [plant.iloc[:30].to_parquet(index=False), b""],
         r"p1.parquet: not a readable Parquet file"),
        ("pq-other", [plant.iloc[:30].to_parquet(index=False), b"PAR1 but not really"],
         r"p1.parquet: not a readable Parquet file"),
    ]
    for name, files, match in cases:
        folder = table(name, files)
        src = str(folder / "*.csv") if not name.startswith("pq") else folder
        with pytest.raises(ValueError, match=match) as e:
            read_table(src, target=T)
        assert "\n" not in str(e.value) and str(folder / "p1.") in str(e.value), (name, str(e.value))
    # a file with its header alone adds no rows and no error
    t = read_table(str(table("header-only", [good, head + "\n"]) / "*.csv"), target=T)
    assert t.n == 30 and t.chunk_names == (str(tmp_path / "header-only" / "p0.csv"),)
    np.testing.assert_array_equal(t.X.compute(), plant.iloc[:30][F].to_numpy(np.float64))
