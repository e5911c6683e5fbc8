"""Comparisons of runs shared by the interruption and fault-injection tests."""

import numpy as np

from daskgp.mcmc.diagnostics import whole_chains


def assert_runs_identical(dt, ref, n_iter: int) -> None:
    """Same draws, bit for bit, and the same per-iteration records (wall seconds aside): 0 draws lost, 0
    duplicated."""
    np.testing.assert_array_equal(whole_chains(dt)["posterior"]["draw"].values, np.arange(n_iter))
    for group in ("posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"):
        for name in ref[group].data_vars:
            if name != "seconds":
                np.testing.assert_array_equal(dt[group][name].values, ref[group][name].values,
                                              err_msg=f"{group}/{name}")
    assert not np.isnan(dt["posterior"]["noise"].values).any()
