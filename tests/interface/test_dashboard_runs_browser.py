"""The dashboard opens runs it did not start (issue 35, item 1), in a real headless Chromium: ``daskgp
sample`` writes a run in another process into the folder given to ``daskgp dashboard --runs``; the page
opens it read-only, names its writer (PID and host) and its draw count rises on screen while it is written;
a path outside the folder is refused in one line; the run's files are byte-identical before and after the
page read them. Screenshots at 1,280 and 1,920 px go to tests/artifacts/ (the README's)."""

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from .test_dashboard_browser import (
    ARTIFACTS,
    CHROMIUM,
    IN_CI,
    _assert_fits,
    _count,
    _fits_and_screenshots,
    _wait,
    serve_dashboard,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None and not IN_CI,
                                 reason="no Chromium here: apt-get install -y chromium")]

ITERATIONS = 100_000  # far more than the test waits for: the writer is interrupted once the page has seen it


def _digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.blake2b(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _page(p, url):
    """(browser, page): headless Chromium at the dashboard, once its runs controls are up."""
    from playwright.sync_api import expect

    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    expect(page.get_by_role("button", name="Open read-only")).to_be_visible(timeout=60_000)
    return browser, page


@contextlib.contextmanager
def _writing(first_commit: Path, *args):
    """``daskgp ARGS`` in a process group of its own (a batch job writing into the runs folder), handed over
    once its ``first_commit`` file exists; killed on the way out when it still runs."""
    writer = subprocess.Popen([sys.executable, "-m", "daskgp", *args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=os.environ.copy(), start_new_session=True)
    try:
        assert _wait(lambda: first_commit.exists(), timeout=300), writer.stderr
        yield writer
    finally:
        if writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
            writer.wait()


def _open(page, path: str) -> None:
    """Type ``path`` into the page's run path and press "Open read-only"."""
    page.locator(".run-path input").fill(path)
    page.locator(".run-path input").press("Enter")
    page.get_by_role("button", name="Open read-only").click()


@pytest.fixture
def served_runs(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    with serve_dashboard("--runs", str(root)) as url:
        yield url, root


def test_a_batch_run_is_opened_and_watched_while_it_is_written(served_runs, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, root = served_runs
    run = root / "batch.zarr"
    ARTIFACTS.mkdir(exist_ok=True)
    # the run folder appears with its first committed block (a new run is staged under another name)
    with _writing(run / "daskgp-checkpoint.json", "sample", "--data", "concrete", "--method", "mh",
                  "--chains", "2", "--iterations", str(ITERATIONS), "--checkpoint-every", "20", "--workers",
                  "1", "--out", str(run)) as writer, sync_playwright() as p:
        browser, page = _page(p, url)
        # outside the runs folder: one line, nothing opened
        _open(page, "/etc")
        expect(page.locator(".run-error")).to_contain_text("outside the runs folders", timeout=30_000)
        assert "\n" not in page.locator(".run-error").inner_text().strip()
        # the batch run: listed, opened, its writer named, its draw count rising on screen
        page.get_by_role("button", name="Refresh list").click()
        expect(page.locator(".run-list")).to_contain_text("batch.zarr", timeout=30_000)
        _open(page, "batch.zarr")
        expect(page.locator(".run-writer")).to_contain_text(f"PID {writer.pid} on {socket.gethostname()}",
                                                            timeout=30_000)
        expect(page.locator(".run-status")).to_contain_text("being written", timeout=30_000)
        assert _wait(lambda: _count(page) >= 20, timeout=120)
        first = _count(page)
        assert _wait(lambda: _count(page) >= first + 40, timeout=180), (first, _count(page))
        time.sleep(2.5)
        _fits_and_screenshots(page, "dashboard_open_run")
        # the writer interrupted (Ctrl-C): the run stops, and the page says so
        os.killpg(writer.pid, signal.SIGINT)
        assert writer.wait(timeout=120) == 130
        expect(page.locator(".run-status")).to_contain_text("stopped", timeout=30_000)
        # a run nobody writes: the page's reading changes no byte of it
        before = _digest(run)
        page.get_by_role("button", name="Open read-only").click()
        expect(page.locator(".run-status")).to_contain_text("stopped", timeout=30_000)
        n = _count(page)
        time.sleep(3)  # three refreshes
        assert _count(page) == n
        assert _digest(run) == before
        # a finished run with kept draws: ArviZ's own plots of them (arviz-plots' Bokeh backend) appear
        done = root / "done.zarr"
        r = subprocess.run([sys.executable, "-m", "daskgp", "sample", "--data", "concrete", "--method",
                            "mh", "--chains", "2", "--iterations", "200", "--checkpoint-every", "20",
                            "--workers", "1", "--out", str(done)], capture_output=True, text=True,
                           env=os.environ.copy(), timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        before = _digest(done)
        _open(page, "done.zarr")
        expect(page.locator(".run-status")).to_contain_text("finished", timeout=30_000)
        for name in ("trace_dist", "rank", "ess_evolution", "pair"):
            expect(page.locator(f".arviz-{name} canvas").first).to_be_attached(timeout=60_000)
        time.sleep(1.5)
        _assert_fits(page)
        page.screenshot(path=str(ARTIFACTS / "dashboard_arviz_1920.png"), full_page=True)
        assert _digest(done) == before
        browser.close()


def test_a_sparse_fit_in_progress_is_opened_and_its_bound_grows_on_screen(served_runs):
    """Issue 35, item 3 (first part): ``daskgp sgpr`` in another process checkpoints its fit into the runs
    folder after every L-BFGS-B iteration; the page opens the checkpoint, names its writer, and the steps
    it shows rise while the bound's line holds as many points as steps."""
    from playwright.sync_api import expect, sync_playwright

    url, root = served_runs
    out = root / "fit.nc"
    ckpt = root / "fit.nc.checkpoint"
    ARTIFACTS.mkdir(exist_ok=True)
    with _writing(ckpt / "daskgp-checkpoint.json", "sgpr", "--data", "flights", "--train-size", "30000",
                  "--max-iter", "500", "--workers", "1", "--out", str(out)) as writer, sync_playwright() as p:
        browser, page = _page(p, url)
        _open(page, "fit.nc.checkpoint")
        expect(page.locator(".run-status")).to_contain_text(f"being written by PID {writer.pid}",
                                                            timeout=30_000)
        assert _wait(lambda: _count(page) >= 2, timeout=120)
        first = _count(page)
        assert _wait(lambda: _count(page) >= first + 3, timeout=180), (first, _count(page))
        _assert_fits(page)
        page.screenshot(path=str(ARTIFACTS / "dashboard_open_fit_1280.png"), full_page=True)
        browser.close()


SOURCES_JS = """() => {
  const out = [];
  for (const doc of window.Bokeh.documents) {
    for (const m of doc.all_models) {
      const d = m.data;
      if (d && d.x !== undefined && d.y !== undefined) out.push({x: Array.from(d.x), y: Array.from(d.y)});
      if (d && d.staleness !== undefined)
        out.push({staleness: Array.from(d.staleness), count: Array.from(d.count)});
      if (d && d.freq !== undefined) out.push({p: Array.from(d.p), freq: Array.from(d.freq)});
    }
  }
  return out;
}"""


def _has_series(sources, xs, ys) -> bool:
    """Whether one of the page's (x, y) sources holds exactly these numbers (JSON doubles round-trip)."""
    return any(s.get("y") == list(map(float, ys)) and s.get("x") == list(map(float, xs)) for s in sources)


def test_every_familys_finished_fit_is_drawn_with_its_stored_numbers(served_runs):
    """Issue 35, item 3: the SGPR, ADVGP and GPC commands finish into the runs folder (their checkpoints
    removed) and a GPLVM fit keeps its checkpoint; each is listed and opened, and the numbers the browser's
    figures hold are the stored ones: the bound or objective against seconds, the held-out curve, ADVGP's
    staleness counts, GPC's calibration and the GPLVM's embedding."""
    import xarray as xr
    from playwright.sync_api import expect, sync_playwright
    from sklearn.datasets import load_iris

    import daskgp as dg
    from daskgp.interface.fitview import fit_results

    from .test_fitview import write_finished_fits

    url, root = served_runs
    write_finished_fits(root)
    gp = dg.BayesianGPLVM(n_components=2, n_inducing=8, n_outer=2, global_iter=5, local_iter=5, chunk_rows=50)
    gp.fit(load_iris().data, checkpoint=root / "gplvm.ckpt", keep_checkpoint=True)
    before = _digest(root)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page = _page(p, url)
        page.get_by_role("button", name="Refresh list").click()
        for name in ("sgpr.nc", "advgp.nc", "gpc.nc", "gplvm.ckpt"):
            expect(page.locator(".run-list")).to_contain_text(name, timeout=30_000)
        for name in ("sgpr.nc", "advgp.nc", "gpc.nc"):
            _open(page, name)
            with xr.open_dataset(root / name) as f:
                ds = f.load()
            res = fit_results(str(root / name))
            expect(page.locator(".run-status")).to_contain_text(f"{res.kind} fit, finished", timeout=30_000)
            expect(page.locator(".draw-count")).to_contain_text(f"{len(res.trace)} steps", timeout=30_000)
            x = res.trace["seconds"] if "seconds" in res.trace else res.trace["step"]
            y = res.trace["objective"]
            assert _wait(lambda x=x, y=y: _has_series(page.evaluate(SOURCES_JS), x, y), timeout=30)
            metric = "test_error" if res.kind == "gpc" else "test_rmse"
            hx = res.heldout["seconds"] if "seconds" in res.heldout else res.heldout["step"]
            assert _has_series(page.evaluate(SOURCES_JS), hx, res.heldout[metric])
            assert res.heldout[metric].iloc[-1] == pytest.approx(ds.attrs[metric], rel=1e-12)
            if res.kind == "advgp":
                assert {"staleness": res.staleness[0].tolist(), "count": res.staleness[1].tolist()} in \
                    page.evaluate(SOURCES_JS)
            if res.kind == "gpc":
                bins = np.asarray(res.calibration)
                assert {"p": bins[:, 0].tolist(), "freq": bins[:, 1].tolist()} in page.evaluate(SOURCES_JS)
            time.sleep(1.0)
            _assert_fits(page)
            if res.kind == "sgpr":
                page.screenshot(path=str(ARTIFACTS / "dashboard_sgpr_finished_1280.png"), full_page=True)
        _open(page, "gplvm.ckpt")
        expect(page.locator(".run-status")).to_contain_text("gplvm fit, stopped", timeout=30_000)
        assert _wait(lambda: _has_series(page.evaluate(SOURCES_JS), gp.embedding_[:, 0], gp.embedding_[:, 1]),
                     timeout=30)
        page.set_viewport_size({"width": 1920, "height": 1080})
        time.sleep(1.5)
        _assert_fits(page)
        page.screenshot(path=str(ARTIFACTS / "dashboard_gplvm_1920.png"), full_page=True)
        browser.close()
    assert _digest(root) == before  # the page read them and changed no byte


def test_a_sparse_fit_started_from_the_page_is_a_batch_job_in_the_runs_folder(served_runs):
    """Issue 35, item 3: "Start fit" runs the family's own command in the first runs folder; the page shows it
    while it runs and, once finished, its results file's numbers; Stop interrupts a second fit as Ctrl-C
    does, leaving its checkpoint resumable by the same command with --resume."""
    import glob

    import xarray as xr
    from playwright.sync_api import expect, sync_playwright

    from daskgp.interface.fitview import fit_results

    url, root = served_runs
    with sync_playwright() as p:
        browser, page = _page(p, url)
        _set_int(page, "Fit iterations", 40)
        page.get_by_role("button", name="Start fit").click()
        expect(page.locator(".run-status")).to_contain_text("sgpr fit running (PID", timeout=30_000)
        expect(page.locator(".run-status")).to_contain_text("sgpr fit, finished", timeout=300_000)
        [out] = glob.glob(str(root / "dashboard-*" / "fit.nc"))
        with xr.open_dataset(out) as f:
            assert f.sizes["iteration"] == 40 and f.attrs["dataset"] == "concrete"
        res = fit_results(out)
        assert _wait(lambda: _has_series(page.evaluate(SOURCES_JS), res.trace["seconds"],
                                         res.trace["objective"]), timeout=30)
        assert not os.path.exists(out + ".checkpoint")  # the command removed it once its results were safe
        # a second fit, stopped from the page: interrupted as Ctrl-C, its checkpoint kept
        page.get_by_label("Sparse fit").select_option(label="ADVGP")
        _set_int(page, "Fit iterations", 100_000)
        page.get_by_role("button", name="Start fit").click()
        expect(page.locator(".run-status")).to_contain_text("advgp fit running (PID", timeout=30_000)
        assert _wait(lambda: glob.glob(str(root / "dashboard-*" / "fit.nc.checkpoint" /
                                           "daskgp-checkpoint.json")), timeout=300)
        expect(page.locator(".draw-count")).to_contain_text("steps", timeout=60_000)
        page.get_by_role("button", name="Stop").click()
        expect(page.locator(".run-status")).to_contain_text("continues with daskgp advgp … --resume",
                                                            timeout=60_000)
        [ckpt] = glob.glob(str(root / "dashboard-*" / "fit.nc.checkpoint"))
        assert (Path(ckpt) / "daskgp-checkpoint.json").exists()
        assert "interrupted" in (Path(ckpt).parent / "fit.log").read_text()
        browser.close()


def _set_int(page, label: str, value: int) -> None:
    """Type ``value`` into the page's integer input labelled ``label``."""
    box = page.get_by_label(label)
    box.fill(str(value))
    box.press("Enter")
