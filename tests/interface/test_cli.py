import os
import subprocess
import sys

import pytest

from daskgp.interface.cli import main


def _run(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "daskgp", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


@pytest.mark.cluster
def test_demo_prints_ulisse_next_to_exact():
    r = _run("demo", "--data", "concrete", "--workers", "2")
    assert r.returncode == 0, r.stderr
    assert "2 workers" in r.stdout
    lines = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines() if ln.strip()}
    for name in ("variance", "lengthscale", "noise"):
        ulisse_g, exact_g = float(lines[name][2]), float(lines[name][3])
        assert abs(ulisse_g - exact_g) < 0.5 * abs(exact_g) + 40
    assert "relative error" in r.stdout


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

        import daskgp.core.datasets as dsm

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
