"""Comparisons of runs shared by the tests: bit-identical runs (interruption and fault-injection tests) and
posteriors that agree within Monte Carlo error (samplers against MH, the notebooks' claims)."""

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


def paired(a, b) -> tuple[float, float]:
    """(mean, standard error) of the per-row difference a − b of two fits' losses on the same rows: the
    paired comparison (the fits err on the same hard rows, so the difference is far less noisy than
    either loss)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))


def row_log_loss(y, proba) -> np.ndarray:
    """(n,) per-row negative log predictive probability of the true class y (n,) (nats) from proba (n, K),
    its columns the classes 0 … K − 1."""
    return -np.log(np.clip(proba[np.arange(len(y)), y], 1e-300, None))


# Two runs' posteriors agree when every mean difference and every log sd ratio is within Z_AGREE combined
# Monte Carlo standard errors, each from the runs' own effective sample sizes: se(mean) = sd/√ESS_bulk and
# se(log sd) = 1/√(2·ESS) with ESS the smaller of bulk and tail (a normal posterior's sd from ESS
# independent draws). 4 standard errors over 6 comparisons: a family-wise false alarm of 4e-4.
Z_AGREE = 4.0


def posterior_agreement(a, b, sd_allowance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(z of the mean differences, z of the log sd ratios) (p,) of two runs' summaries ``a``, ``b``: tables
    or dicts with 'mean', 'sd', 'ess_bulk', 'ess_tail' per parameter. ``sd_allowance``: a known systematic
    relative inflation of a's sd that is not a failure (SGLD's freeze rule allows up to 10 % in variance)."""
    cols = ("mean", "sd", "ess_bulk", "ess_tail")
    a, b = ({k: np.asarray(t[k], dtype=float) for k in cols} for t in (a, b))
    ess_a, ess_b = np.minimum(a["ess_bulk"], a["ess_tail"]), np.minimum(b["ess_bulk"], b["ess_tail"])
    z_mean = np.abs(a["mean"] - b["mean"]) / np.sqrt(a["sd"] ** 2 / a["ess_bulk"]
                                                      + b["sd"] ** 2 / b["ess_bulk"])
    z_sd = (np.clip(np.abs(np.log(a["sd"] / b["sd"])) - np.log1p(sd_allowance), 0, None)
            / np.sqrt(1 / (2 * ess_a) + 1 / (2 * ess_b)))
    return z_mean, z_sd


def assert_posteriors_agree(a, b, sd_allowance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    z_mean, z_sd = posterior_agreement(a, b, sd_allowance)
    assert (z_mean < Z_AGREE).all() and (z_sd < Z_AGREE).all(), (z_mean, z_sd, a, b)
    return z_mean, z_sd
