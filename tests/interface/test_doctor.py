"""``daskgp doctor``: the environment report, the per-device checks on a real cluster, the JSON report and the
one-line error for a GPU that is not there."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from daskgp.compute.backend import gpu_available
from daskgp.interface.doctor import TOLERANCE, device_checks, environment_report


def _run(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "daskgp", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def test_environment_report_names_the_stack():
    env = environment_report()
    assert env["packages"]["numpy"] == np.__version__
    assert env["auto_device"] in ("cpu", "gpu") and env["auto_reason"]
    if not gpu_available():
        assert env["gpus"] == [] and env["auto_device"] == "cpu"


def test_device_checks_compute_what_they_report(concrete):
    """The CMVP the check returns is K V (against the dense kernel); its chain moved and is finite."""
    from daskgp import make_kernel

    X, y = concrete.X_std[:300], concrete.y_std[:300]
    r = device_checks(X, y, "cpu", n_iter=5)
    K = make_kernel("rbf", lengthscale=2.0)(X) + 0.3 * np.eye(300)
    V = np.random.default_rng(0).standard_normal((300, 8))
    np.testing.assert_allclose(r["cmvp"], K @ V, rtol=1e-10)
    assert r["array_type"] == "numpy.ndarray" and r["draws"].shape == (5, 3)
    assert np.isfinite(r["draws"]).all() and np.isfinite(r["gradient"]).all()
    assert all(r[f"{k}_seconds"] > 0 for k in ("cmvp", "cmvp_cached", "gradient", "sampler"))


@pytest.mark.cluster
def test_doctor_runs_on_a_cluster_and_writes_its_report(tmp_path):
    out = tmp_path / "doctor.json"
    r = _run("doctor", "--rows", "300", "--iterations", "5", "--json", str(out), "--device", "cpu")
    assert r.returncode == 0, r.stderr
    assert "cpu" in r.stdout and "wrote" in r.stdout
    rep = json.loads(out.read_text())
    cpu = rep["devices"]["cpu"]
    assert cpu["ok"] and cpu["array_type"] == "numpy.ndarray"
    assert set(cpu["relative_difference_from_cpu"]) == set(TOLERANCE)
    assert rep["data"] == {"name": "concrete", "rows": 300} and rep["environment"]["python"]


@pytest.mark.skipif(gpu_available(), reason="checks the error of a machine without a GPU")
def test_doctor_on_a_machine_without_a_gpu_says_what_is_missing(tmp_path):
    r = _run("doctor", "--device", "gpu", "--json", str(tmp_path / "d.json"))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "device='gpu' needs" in lines[0]
    assert not (tmp_path / "d.json").exists()
