"""The first thing a newcomer runs (issue 29): the README's first Python example, saved as a script and run
as written, predicts concrete strength in MPa; the same code without the ``__main__`` guard is refused in one
line before any cluster starts (it printed 27 KB of "Nanny failed to start" tracebacks)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _first_python_block() -> str:
    return re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)


@pytest.mark.cluster
@pytest.mark.slow
def test_the_readmes_example_runs_as_a_script_and_predicts_in_mpa(tmp_path):
    code = _first_python_block()
    assert 'if __name__ == "__main__":' in code and "print(" in code
    script = tmp_path / "example.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900,
                       cwd=tmp_path, env=os.environ.copy())
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr and "Nanny failed" not in r.stderr
    nums = [float(v) for v in re.findall(r"-?\d+\.\d*", r.stdout)]  # numpy prints 40.0 as "40."
    assert len(nums) == 10, r.stdout
    mean, sd = np.array(nums[:5]), np.array(nums[5:10])
    truth = pd.read_csv(Path(os.environ["DASKGP_DATA"]) / "concrete.csv").iloc[:5, -1].to_numpy()
    assert truth[0] == pytest.approx(79.99, abs=0.01)
    assert np.all(np.abs(mean - truth) < 4 * sd + 1) and np.all((sd > 0.5) & (sd < 15)), (mean, sd)


def test_an_unguarded_script_is_refused_in_one_line(tmp_path):
    code = _first_python_block()
    body = [ln[4:] for ln in code.splitlines()[3:]]  # the guarded lines, dedented to top level
    script = tmp_path / "unguarded.py"
    script.write_text("import daskgp as dg\n\n" + "\n".join(body) + "\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env=os.environ.copy())
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError:") and "outside 'if __name__ == \"__main__\":'" in last, r.stderr
    assert "Nanny" not in r.stderr and len(r.stderr) < 3000


@pytest.mark.cluster
def test_estimators_without_a_client_start_and_stop_their_cluster_quietly(tmp_path):
    """Issue 35, item 5: a script that fits SGPR, ADVGP and the classifier without a client gets a local
    cluster per fit from daskgp, and its shutdown prints no traceback — no "Failed to communicate with
    scheduler during heartbeat" (a script once printed 30 such lines as its cluster closed). Measured here:
    stderr empty."""
    script = tmp_path / "fits.py"
    script.write_text(
        "import numpy as np\nimport daskgp as dg\n\n"
        "if __name__ == '__main__':\n"
        "    d = dg.load('concrete')\n"
        "    dg.SparseGPRegressor(n_inducing=10, max_iter=3).fit(d.X, d.y)\n"
        "    dg.ADVGPRegressor(n_inducing=10, max_iter=20).fit(d.X, d.y)\n"
        "    dg.SparseGPClassifier(n_inducing=10, max_iter=3).fit(d.X, (d.y > np.median(d.y)).astype(int))\n"
        "    print('fitted')\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path, env=os.environ.copy())
    assert r.returncode == 0 and r.stdout.strip() == "fitted", r.stderr[-3000:]
    # distributed may warn of a slow event loop on a loaded machine; what must not appear is a traceback
    for bad in ("Traceback", "Failed to communicate", "Exception", "Error"):
        assert bad not in r.stderr, r.stderr[-3000:]
