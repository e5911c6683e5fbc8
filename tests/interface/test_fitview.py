"""A sparse fit's checkpoint as the dashboard shows it (daskgp.interface.fitview): the trace read from each
family's checkpoint is the one the fit recorded, and the figures' sources hold exactly those numbers."""

import numpy as np
import pytest

from daskgp.interface.figures import FitFigures
from daskgp.interface.fitview import FIT_KINDS, StoredFit, fit_trace
from daskgp.runs.catalog import find_runs


@pytest.mark.cluster
def test_sgpr_and_advgp_checkpoints_show_what_their_fits_recorded(concrete, client, tmp_path):
    import daskgp as dg

    X, y = concrete.X, concrete.y
    sg = dg.SparseGPRegressor(n_inducing=10, max_iter=6).fit(
        X, y, client=client, checkpoint=tmp_path / "s.ckpt", keep_checkpoint=True)
    ad = dg.ADVGPRegressor(n_inducing=10, max_iter=30, tol=None, tau=2).fit(
        X, y, client=client, checkpoint=tmp_path / "a.ckpt", keep_checkpoint=True)
    kinds = {r.name: r.kind for r in find_runs([tmp_path])}
    assert kinds == {"s.ckpt": "sgpr", "a.ckpt": "advgp"}

    t = fit_trace(str(tmp_path / "s.ckpt"), "sgpr")
    np.testing.assert_array_equal(t["objective"], sg.bound_trace_)
    assert list(t["step"]) == list(range(1, len(sg.bound_trace_) + 1))

    a = fit_trace(str(tmp_path / "a.ckpt"), "advgp")
    recs = ad.records_
    assert list(a["step"]) == [r.version for r in recs]
    np.testing.assert_array_equal(a["objective"], [r.objective for r in recs])
    np.testing.assert_array_equal(a["seconds"], [r.seconds for r in recs])
    assert list(a["staleness_max"]) == [max(r.staleness) for r in recs] and max(a["staleness_max"]) <= 2

    figs = FitFigures("advgp", FIT_KINDS["advgp"][1])
    figs.update(a)
    assert figs.src.data["x"] == list(a["seconds"]) and figs.src.data["y"] == list(a["objective"])
    n_contrib = sum(len(r.staleness) for r in recs)
    assert sum(figs.stale_src.data["count"]) == n_contrib
    assert sum(figs.part_src.data["count"]) == len(recs)

    view = StoredFit(str(tmp_path / "s.ckpt"), str(tmp_path), "sgpr")
    assert view.status.startswith("sgpr fit, stopped") and len(view.trace) == len(sg.bound_trace_)
    assert not view.refresh()  # nothing committed since
    view.close()
    with pytest.raises(ValueError, match="no trace view"):
        fit_trace(str(tmp_path / "s.ckpt"), "warmup")
