import os
import subprocess
import sys

import pytest

from daskgp.interface.cli import main


def _run(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "daskgp", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


@pytest.mark.cluster
def test_demo_prints_ulisse_next_to_exact(concrete):
    """The demo's exact column is the dense Cholesky gradient (to its printed 3 decimals); its ULISSE column
    (64 probes, seed 7) is one draw of the unbiased estimator, so it must lie within 4 sd of the exact
    gradient, the sd taken at its 99.9 % upper confidence bound from 40 in-process draws at the same θ
    (false alarm ≤ 3·6e-5 + 1e-3). Power: that bound is below |exact| for every parameter, so a zero (or
    sign-flipped) gradient fails."""
    import numpy as np
    from scipy.stats import chi2

    from daskgp import KernelOperator, exact_log_marginal, log_marginal_gradient, make_kernel

    r = _run("demo", "--data", "concrete", "--workers", "2", "--probes", "64", "--seed", "7")
    assert r.returncode == 0, r.stderr
    assert "2 workers" in r.stdout and "relative error" in r.stdout
    lines = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines() if ln.strip()}
    names = ("variance", "lengthscale", "noise")
    printed = np.array([[float(lines[name][2]), float(lines[name][3])] for name in names])
    kernel = make_kernel("rbf", variance=1.0, lengthscale=2.0)  # the demo's defaults, noise 0.3
    exact = exact_log_marginal(concrete.X_std, concrete.y_std, kernel, 0.3)[1]
    np.testing.assert_allclose(printed[:, 1], exact, atol=6e-4)
    op = KernelOperator(concrete.X_std, kernel, 0.3, mode="local")
    draws = np.array([log_marginal_gradient(op, concrete.y_std, n_probes=64, rng=100 + s).grad
                      for s in range(40)])
    sd_upper = draws.std(axis=0, ddof=1) * np.sqrt(39 / chi2.ppf(1e-3, 39))
    bound = 4 * sd_upper
    assert np.all(bound < np.abs(exact)), (bound, exact)  # the check has power against a zero gradient
    assert np.all(np.abs(printed[:, 0] - exact) < bound), (printed[:, 0], exact, bound)


@pytest.mark.parametrize("argv,msg", [
    ([], "required"),
    (["demo", "--probes", "x"], "invalid int"),
    (["demo", "--data", "boston"], "unknown dataset"),
    (["demo", "--noise", "0"], "noise must be"),
    (["demo", "--lengthscale", "-2"], "lengthscale must be"),
    (["demo", "--data-dir", "/nonexistent", "--data", "concrete"], "data folder /nonexistent does not exist"),
    (["demo", "--data-dir", "/nonexistent", "--data", "flights"], "data folder /nonexistent does not exist"),
    (["demo", "--data", "nope"], None),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments_give_one_line_and_nonzero_exit(argv, msg, capsys, monkeypatch, tmp_path):
    if msg is None:  # a file nowhere and no network: the loader's message, one line
        monkeypatch.setenv("DASKGP_DATA", str(tmp_path))
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        import urllib.error

        import daskgp.datasets.loaders as dsm

        def offline(*a, **k):
            raise urllib.error.URLError("offline")

        monkeypatch.setattr(dsm.urllib.request, "urlopen", offline)
        msg = "concrete.csv"
        argv = ["demo", "--data", "concrete"]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert err[-1].startswith("daskgp: error:") and msg in err[-1]
    assert not any("Traceback" in ln for ln in err)


def test_unreachable_scheduler():
    r = _run("demo", "--scheduler", "tcp://127.0.0.1:9", "--timeout", "2")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].startswith("daskgp: error: cannot reach the dask scheduler")
    assert "Traceback" not in r.stderr
