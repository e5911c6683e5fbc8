"""The saved-model file (daskgp.runs.models) without an estimator: arrays, plain values (non-finite floats
included), labelled groups with coordinates and attributes, and kernel objects among the parameters come back
as written, from netCDF and zarr; the writer rule and the digests hold for it as for every file."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from daskgp.model.kernels import Matern52
from daskgp.runs.models import Saved, params_from_plain, plain, plain_params, read_model, write_model


def _saved() -> Saved:
    group = xr.Dataset({"x": (("chain", "draw"), np.arange(6.0).reshape(2, 3))},
                       coords={"chain": [0, 1], "draw": [0, 1, 2]},
                       attrs={"config": {"method": "hmc", "n": np.int64(3)}, "elapsed": np.float64(1.5)})
    return Saved({"kernel": "rbf", "n": 3}, {"Z": np.eye(3), "ints": np.arange(4)},
                 {"noise": 0.1, "nan": math.nan, "names": ["a", "b"], "info": {"k": 1}}, {"posterior": group})


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_what_is_written_reads_back(tmp_path, suffix):
    path = tmp_path / f"m{suffix}"
    write_model(path, _saved(), "daskgp.saved.Toy")
    back = read_model(path, "daskgp.saved.Toy")
    assert back.params == {"kernel": "rbf", "n": 3}
    assert np.array_equal(back.arrays["Z"], np.eye(3)) and np.array_equal(back.arrays["ints"], np.arange(4))
    assert set(back.arrays) == {"Z", "ints"}  # the groups' variables are not the model's arrays
    assert back.values["noise"] == 0.1 and math.isnan(back.values["nan"])
    assert back.values["names"] == ["a", "b"] and back.values["info"] == {"k": 1}
    g = back.groups["posterior"]
    assert np.array_equal(g["x"].values, np.arange(6.0).reshape(2, 3)) and list(g["draw"].values) == [0, 1, 2]
    assert g.attrs == {"config": {"method": "hmc", "n": 3}, "elapsed": 1.5}
    with pytest.raises(ValueError, match="holds no daskgp.saved.Other"):
        read_model(path, "daskgp.saved.Other")


def test_kernel_objects_among_the_parameters_are_plain_data_and_come_back():
    k = Matern52(variance=2.0, lengthscale=[1.0, 3.0], ard=True)
    p = plain_params({"kernel": k, "nested": {"kernel": k}, "n": 1})
    assert p["kernel"] == {"__kernel__": "matern52", "variance": 2.0, "lengthscale": [1.0, 3.0], "ard": True}
    back = params_from_plain(p)
    assert isinstance(back["nested"]["kernel"], Matern52) and back["n"] == 1
    assert np.array_equal(back["kernel"].lengthscale, [1.0, 3.0])
    assert plain({"a": np.arange(2), "b": (np.float32(1.5),)}) == {"a": [0, 1], "b": [1.5]}


def test_a_foreign_file_is_never_replaced(tmp_path):
    mine = tmp_path / "yours.nc"
    xr.Dataset({"v": ("i", [1.0])}).to_netcdf(mine)
    with pytest.raises(ValueError, match="refusing to overwrite"):
        write_model(mine, _saved(), "daskgp.saved.Toy", overwrite=True)
    assert xr.load_dataset(mine)["v"].values.tolist() == [1.0]
