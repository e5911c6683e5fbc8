"""The notebooks execute top to bottom with their quick settings (nbclient, a real kernel)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


# notebook -> (least number of figures, text its outputs must contain)
EXPECTED = {
    "01_sgld_vs_mh_concrete.ipynb": (3, "|mean_SGLD - mean_MH| / sd_MH"),  # running stats, trace, PSRF
    "02_distributed_sgpr_flights.ipynb": (2, "daskgp SGPR"),  # bound trace, per-worker load; RMSE table
    "03_gplvm_digits.ipynb": (3, "accuracy: GPLVM bound ratio"),  # latent space, imputation, confusion
    "04_advgp_flights.ipynb": (2, "largest staleness"),  # RMSE against time; staleness, updates per partition
    "05_sep_classification.ipynb": (3, "test NLL"),  # 2-D surface; evidence traces; calibration
}


@pytest.mark.cluster
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_executes_with_quick_settings(name, tmp_path, monkeypatch):
    monkeypatch.setenv("DASKGP_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("DASKGP_NOTEBOOK_RUNS", str(tmp_path))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    n_figures, marker = EXPECTED[name]
    assert len(images) >= n_figures
    text = "".join(o.get("text", "") for o in outputs)
    assert marker in text
