"""The dashboard's state object without a browser: upload checks, settings, run transitions, live draws."""

import time

import numpy as np
import pytest
import xarray as xr

from daskgp.interface.dashboard import DashboardSettings, LiveRun, RunCapReached, parse_upload


@pytest.mark.parametrize("content,msg", [
    (b"", "empty"),
    (b"a,b\n" + b"1,2\n" * 30, None),
    (b"a,b\n1,x\n" + b"1,2\n" * 30, "non-numeric"),
    (b"a,b\n1,\n" + b"1,2\n" * 30, "missing values"),
    (b"a\n" + b"1\n" * 30, "at least two columns"),
    (b"a,b\n1,2\n", "at least 20"),
    (b"\xff\xfe\x00binary\x00", "not a readable CSV"),
    (b"a,b\n" + b"1,2\n" * 3000, "limit"),
    (b"1,2\n" * 30, "no header row"),  # its first row would have become the column names
    (b",".join(b"c%d" % j for j in range(41)) + b"\n" + b"1," * 40 + b"1\n", "41 columns; the limit is 40"),
    (b"a,b\n" + b"1,2\n" * 101, "101 rows; the limit is 100"),
    ("a,b\n" + "1,2\n" * 30, None),  # Panel hands text/csv uploads over decoded
])
def test_upload_checks(content, msg):
    """Sizes (bytes, rows, columns) are checked on the raw bytes before pandas parses anything."""
    if msg is None:
        assert parse_upload(content).shape == (30, 2)
    else:
        with pytest.raises(ValueError, match=msg):
            parse_upload(content, max_bytes=10_000, max_rows=100, max_columns=40)


def test_the_server_caps_an_upload_that_ignores_the_browser_check():
    """A client that sends more than the cap is cut off as the chunks arrive: the buffer is dropped, the page
    gets a message, and the next upload of the session is received normally."""
    import panel as pn

    from daskgp.interface.widgets import capped_dropper

    messages = []
    w = capped_dropper(pn, 1000, messages.append)()

    class Event:
        event_name = "upload_event"

        def __init__(self, name, chunk, total, data):
            self.data = {"name": name, "chunk": chunk, "total_chunks": total, "data": data,
                         "type": "text/csv"}

    for k in range(1, 6):  # 5 chunks of 400 bytes: over the 1000-byte cap at the third
        w._process_event(Event("big.csv", k, 5, b"x" * 400))
    assert messages == ["the uploaded file is over the 0.000954 MB limit"]
    assert not w.value and not w._file_buffer
    w._process_event(Event("ok.csv", 1, 1, b"a,b\n1,2\n"))
    assert w.value == {"ok.csv": "a,b\n1,2\n"}


@pytest.mark.parametrize("kw,msg", [
    (dict(dataset="mnist"), "unknown dataset"), (dict(dataset="upload"), "upload a CSV"),
    (dict(n_chains=1), "chains"), (dict(n_iter=10), "iter"),
    (dict(method="sgld", options=dict(step_start=1e-4, step_end=1e-2)), "step"),
    (dict(kernel="linear"), "kernel"), (dict(scheduler="tcp://10.0.0.1:8786"), "only use its local cluster"),
    (dict(method="nuts"), "method must be one of"),
    (dict(method="sgld", options=dict(step_start=float("nan"))), "step"),
    (dict(scheduler="tcp://10.0.0.1:8786", allowed_schedulers=("tcp://10.0.0.2:8786",)),
     "not one this server"),
])
def test_settings_are_validated(kw, msg):
    with pytest.raises(ValueError, match=msg):
        DashboardSettings(**kw).validate()


def test_an_allowed_scheduler_is_accepted():
    s = DashboardSettings(scheduler="tcp://10.0.0.2:8786", allowed_schedulers=("tcp://10.0.0.2:8786",))
    assert s.validate().scheduler == "tcp://10.0.0.2:8786"


@pytest.mark.cluster
def test_live_run_transitions_and_draws(client, monkeypatch):
    """start → running, draws arrive block by block; pause → no new blocks (the one in flight may land);
    resume → more draws; stop → 'stopped' with the committed draws exportable as netCDF; a second run
    beyond the cap is refused."""
    run = LiveRun(DashboardSettings(n_iter=400, block=20, n_chains=2), client=client)
    assert run.status == "idle" and run.n_draws == 0
    assert len(run.y_test) == round(0.1 * 1030) and run.X_train.shape == (1030 - 103, 8)
    run.start(max_runs=1)
    assert run.status == "running"
    other = LiveRun(DashboardSettings(n_iter=400), client=client)
    with pytest.raises(RunCapReached, match="limit is 1"):
        other.start(max_runs=1)
    deadline = time.time() + 120
    while run.n_draws < 40 and time.time() < deadline:
        time.sleep(0.2)
    assert run.n_draws >= 40
    n_at_pause = run.n_draws
    run.pause()
    assert run.status == "paused"
    history = []  # settles and stays put; one block (20 draws) already in flight may still land
    while time.time() < deadline:
        history.append(run.n_draws)
        if len(history) >= 7 and len(set(history[-7:])) == 1:
            break
        time.sleep(0.5)
    n_paused = history[-1]
    assert len(set(history[-7:])) == 1 and n_paused - n_at_pause <= 20, history
    run.resume()
    # past the warmup's draws (the sampler's adaptation for a target run — the page's default target — at most
    # a fifth of the 400 here): the diagnostics are the kept draws'
    from daskgp.mcmc.samplers import get_sampler

    adapt = get_sampler(run.method).adaptation_for_target(None)
    assert run.method == "hmc" and run.warmup_draws == min(adapt, 400 // 5) == 50
    while run.n_draws <= max(n_paused, run.warmup_draws + 20) and time.time() < deadline:
        time.sleep(0.2)
    assert run.n_draws > n_paused and run.status == "running"
    diag = run.diagnostics()
    assert set(diag["rhat"]) == {"variance", "lengthscale", "noise"}
    assert all(np.isfinite(list(diag["ess"].values())))
    pred = run.heldout_predictive(n_draws=5)
    assert pred.sizes["point"] == 103 and np.all(pred["lower"] < pred["upper"])
    x, mix, plug = run.slice_predictive(0, n_points=20, n_draws=5)
    assert len(x) == 20 and np.all(mix["sd"] > 0) and np.all(plug["sd"] > 0)
    run.stop()
    assert run.status == "stopped"
    post, stats = run.snapshot()
    dt = xr.open_datatree(run.export_netcdf())
    # ArviZ's layout: the warmup's draws apart from the kept ones, together what the page received
    assert dt["warmup_posterior"].sizes["draw"] + dt["posterior"].sizes["draw"] == post["variance"].shape[1]
    # the figures (no page, no browser) show exactly the stored draws: warmup, then the kept ones
    from daskgp.interface.figures import RunFigures
    from daskgp.mcmc.samplers import get_sampler

    assert run.settings.method == "auto" and run.method == "hmc"  # resolved by the data's size (927 rows)
    figs = RunFigures(run.names, set(stats), get_sampler(run.method))
    figs.update(post, stats, run.sampling_start())
    for nm in run.names:
        stored = np.concatenate([dt["warmup_posterior"][nm].values, dt["posterior"][nm].values], axis=1)
        np.testing.assert_array_equal(np.array(figs.trace[nm][1].data["ys"]), stored)
    import pandas as pd

    table = pd.read_csv(run.export_summary_csv(), index_col=0)
    assert {"mean", "sd", "ess_bulk", "r_hat", "sec_per_ess"} <= set(table.columns)
    assert list(table.index) == ["variance", "lengthscale", "noise"]
    other.start()  # the cap is free again once the first run stopped
    other.close()
    run.close()
