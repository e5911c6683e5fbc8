"""The runs catalogue (daskgp.runs.catalog) and a run opened read-only (daskgp.interface.stored.StoredRun):
every run under the allowed folders is listed with its kind, phase, state and writer; nothing outside them is
read; reading changes no byte; a run opened from disk shows exactly what it stores."""

import hashlib
import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from daskgp.runs.catalog import allowed_path, find_runs

N_ITER = 40


def _tree_digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.blake2b(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory, concrete, client):
    """A runs folder: a finished MH run two folders down, an SGPR fit checkpoint, a damaged run, an empty
    folder, and a symbolic link to a run outside the folder."""
    from daskgp.inducing.features import GlobalParams
    from daskgp.mcmc.chains import sample
    from daskgp.sparse.fit import FitCheckpoint

    root = tmp_path_factory.mktemp("runs")
    outside = tmp_path_factory.mktemp("outside")
    X, y = concrete.X_std[:300], concrete.y_std[:300]
    kw = dict(method="mh", n_chains=2, n_iter=N_ITER, checkpoint_every=10, seed=1)
    (root / "study" / "a").mkdir(parents=True)
    sample(X, y, out=str(root / "study" / "a" / "mh.zarr"), client=client, **kw)
    sample(X, y, out=str(root / "broken.zarr"), client=client, **kw)
    chunk = next(p for p in (root / "broken.zarr" / "posterior").rglob("c/*") if p.is_file())
    chunk.write_bytes(chunk.read_bytes()[:-3] + b"xyz")
    (root / "broken.zarr" / "daskgp-checkpoint.json").write_text("{not json")
    sample(X, y, out=str(outside / "secret.zarr"), client=client, **kw)
    os.symlink(outside / "secret.zarr", root / "link.zarr")
    (root / "empty").mkdir()
    theta = GlobalParams(X[:5].copy(), 1.0, np.ones(X.shape[1]), noise=0.5)
    ckpt = FitCheckpoint(root / "fit.checkpoint")
    with ckpt.writing():
        ckpt.write(theta, [1.0, 2.0], "key")
    return root, outside


def test_every_run_under_the_folders_is_listed_and_reading_changes_nothing(runs_root):
    root, _ = runs_root
    before = _tree_digest(root)
    found = {r.name: r for r in find_runs([root])}
    assert set(found) == {"study/a/mh.zarr", "broken.zarr", "fit.checkpoint"}  # not the link, not 'empty'
    mh = found["study/a/mh.zarr"]
    assert (mh.kind, mh.phase, mh.state, mh.steps, mh.total, mh.who) == ("chains", "sampling", "finished",
                                                                         N_ITER, N_ITER, "")
    broken = found["broken.zarr"]
    assert broken.phase == "damaged" and "daskgp-checkpoint.json" in broken.message
    fit = found["fit.checkpoint"]
    assert (fit.kind, fit.phase, fit.state, fit.steps) == ("sgpr", "fitting", "stopped", 2)
    assert _tree_digest(root) == before


def test_a_live_writer_is_named_with_its_host_and_pid(runs_root):
    """A lock held by a live process (this one) makes the run 'writing', with who writes it; the lock file
    is the writer's own format (daskgp.runs.lock.acquire)."""
    from daskgp.runs.lock import acquire, release

    root, _ = runs_root
    run = root / "study" / "a" / "mh.zarr"
    acquire(str(run))
    try:
        entry = next(r for r in find_runs([root]) if r.name == "study/a/mh.zarr")
        assert entry.state == "writing"
        assert entry.who == f"PID {os.getpid()} on {socket.gethostname()} (live)"
    finally:
        release(str(run))
    assert next(r for r in find_runs([root]) if r.name == "study/a/mh.zarr").state == "finished"


@pytest.mark.parametrize("given", ["../outside/secret.zarr", "link.zarr", "{outside}/secret.zarr", "/etc"])
def test_a_path_outside_the_folders_is_refused_in_one_line(runs_root, given):
    root, outside = runs_root
    # the outside folder is a sibling of root in pytest's tmp tree only by name: make '..' reach it
    given = given.format(outside=outside).replace("../outside", os.path.relpath(outside, root))
    with pytest.raises(ValueError, match="outside the runs folders") as e:
        allowed_path([root], given)
    assert "\n" not in str(e.value)


def test_a_path_inside_is_resolved_against_the_first_folder(runs_root):
    root, _ = runs_root
    assert allowed_path([root], "study/a/mh.zarr") == (str(root / "study" / "a" / "mh.zarr"), str(root))
    with pytest.raises(ValueError, match="does not exist"):
        allowed_path([root / "nope"], "x")


def test_a_stored_run_shows_what_the_run_stores(runs_root):
    """StoredRun's draws, diagnostics and predictive are the stored run's (open_run, ArviZ) to the bit, and
    its sampler the one the page's figures are built for; its downloads go to its own temporary folder, never
    into the runs folder."""
    import arviz as az

    from daskgp.interface.stored import StoredRun
    from daskgp.mcmc.diagnostics import open_run

    root, _ = runs_root
    path = str(root / "study" / "a" / "mh.zarr")
    before = _tree_digest(root)
    run = StoredRun(path, str(root))
    dt = open_run(path)
    post, stats = run.snapshot()
    W = dt.attrs["warmup_draws"]
    for name in dt.posterior.data_vars:
        np.testing.assert_array_equal(post[name][:, W:], dt.posterior[name].values)
        np.testing.assert_array_equal(post[name][:, :W], dt.warmup_posterior[name].values)
    diag = run.diagnostics()
    for name in dt.posterior.data_vars:
        assert diag["rhat"][name] == pytest.approx(float(az.rhat(dt.posterior.to_dataset())[name]), rel=1e-12)
    assert run.status == f"finished — {N_ITER} of {N_ITER} draws per chain"
    # the page's figures follow the sampler that ran it (a stored run opened in the page once raised here)
    from daskgp.interface.figures import RunFigures
    from daskgp.mcmc.samplers import get_sampler

    assert run.method == dt.attrs["config"]["method"] == "mh"
    RunFigures(run.names, set(stats), get_sampler(run.method)).update(post, stats, run.sampling_start())
    assert run.heldout_predictive() is None  # a run keeps no held-out rows
    x, mix, _ = run.slice_predictive(0, n_draws=5)  # the library's run holds standardised data, no scalers
    assert np.all(np.isfinite(mix["mean"].values)) and -3 < x.min() < x.max() < 4
    assert not run.refresh()  # nothing committed since
    nc = run.export_netcdf()
    assert not nc.startswith(str(root)) and os.path.exists(nc)
    run.close()
    assert _tree_digest(root) == before
    assert json.loads((root / "study" / "a" / "mh.zarr" / "zarr.json").read_text())["zarr_format"] == 3


def test_a_new_run_opens_from_its_warmup_or_staging_folder_and_follows_it_to_its_draws(tmp_path, concrete,
                                                                                       client):
    """Issue 56, item 10: a run in its pre-chain warmup was listed, but opening it answered "Cannot open:
    …/RUN.zarr.partial-… is not a daskgp run" (and its staging folder was listed as a damaged run). Now the
    staging folder is a run 'starting', the warmup checkpoint a run's 'warmup', and either opens the run they
    become: the page shows the warmup's stage, gradients and time from its last commit and that the chains
    have started, then the draws once the first block commits — reading writes nothing."""
    from daskgp.interface.stored import StoredRun, pending_run
    from daskgp.mcmc.chains import sample
    from daskgp.mcmc.warmup import WarmupStore, warmup_path, warmup_start
    from daskgp.runs.draws import DrawStore, remove_dead_staging, staging_folders

    out = tmp_path / "new.zarr"
    warm = WarmupStore(warmup_path(str(out)))
    state = {**warmup_start(np.zeros(3), np.eye(3), 0), "stage": 1, "gradients": 12, "seconds": 200.0}
    with warm.writing():  # this process writes the warmup (its lock is live) …
        warm.commit("key", 1, state)
        staging = DrawStore.create(str(out), attrs={"who": "test"}, chunk=10)  # … and the chains' staging
        try:
            before = _tree_digest(tmp_path)
            found = {r.name: r for r in find_runs([tmp_path])}
            stage_name = os.path.basename(staging.path)
            assert set(found) == {"new.zarr.warmup", stage_name}
            w, st = found["new.zarr.warmup"], found[stage_name]
            assert (w.kind, w.phase, w.state) == ("warmup", "warmup", "writing")
            assert (st.kind, st.phase, st.state, st.message) == ("chains", "starting", "writing", "")
            assert pending_run(w) == pending_run(st) == str(out)
            view = StoredRun(pending_run(st), str(tmp_path))
            assert view.status == (
                f"being written by PID {os.getpid()} on {socket.gethostname()} — pre-chain warmup: "
                "curvature, 12 gradients in 3.3 min; the chains have started; their first block is not "
                "committed yet"
            ), view.status
            assert view.snapshot() == ({}, {}) and view.n_draws == 0 and not view.refresh()
            assert _tree_digest(tmp_path) == before
        finally:
            staging.close()  # committed nothing: its staging folder goes
    stopped = StoredRun(str(out), str(tmp_path))
    assert stopped.status.startswith("stopped — pre-chain warmup: curvature, 12 gradients"), stopped.status
    warm.remove()
    # a writer killed before its first block leaves a dead staging folder: said so, with what removes it
    import signal
    import subprocess
    import sys

    killed = ("import os, signal, sys\nfrom daskgp.runs.draws import DrawStore\n"
              "DrawStore.create(sys.argv[1], attrs={}, chunk=10)\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert subprocess.run([sys.executable, "-c", killed, str(out)], timeout=120).returncode == -signal.SIGKILL
    assert os.path.basename(staging_folders(out)[0][0]).startswith("new.zarr.partial-")
    assert StoredRun(str(out), str(tmp_path)).status == (
        f"stopped — its writer stopped before the chains' first block ('daskgp repair {out}' removes what it "
        "left)")
    remove_dead_staging(out)
    assert StoredRun(str(out), str(tmp_path)).status == "failed"  # nothing there any more: said so
    sample(concrete.X_std[:200], concrete.y_std[:200], out=str(out), client=client, method="mh", n_chains=2,
           n_iter=20, checkpoint_every=10, seed=1)
    assert view.refresh() and view.n_draws == 20 and view.status == "finished — 20 of 20 draws per chain"
    assert set(view.snapshot()[0]) == set(view.names) and view.names
    view.close()


WRITER_HOST = "daskgp-writer-host"


@pytest.mark.cluster
def test_a_run_written_from_another_host_is_watched_read_only(tmp_path):
    """``daskgp sample`` in a UTS namespace of its own (``unshare --uts``: hostname 'daskgp-writer-host',
    the same file system, as a batch job on another machine sharing the storage) writes a run; the reader
    cannot check a PID on another host, so the catalogue names the writer as foreign and the run as being
    written, and a StoredRun rereads it as its blocks commit — its draws rise — without writing a byte."""
    import signal
    import subprocess
    import sys
    import time

    from daskgp.interface.stored import StoredRun

    run = tmp_path / "remote.zarr"
    cmd = (f"hostname {WRITER_HOST} && exec {sys.executable} -m daskgp sample --data concrete --method mh "
           f"--chains 2 --iterations 100000 --checkpoint-every 20 --workers 1 --out {run}")
    writer = subprocess.Popen(["unshare", "--uts", "sh", "-c", cmd], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, start_new_session=True, env=os.environ.copy())
    try:
        deadline = time.time() + 300
        while not (run / "daskgp-checkpoint.json").exists() and time.time() < deadline:
            time.sleep(0.5)
        assert (run / "daskgp-checkpoint.json").exists(), writer.stderr
        [entry] = find_runs([tmp_path])
        assert entry.state == "writing" and entry.writer.state == "foreign"
        assert entry.who == f"PID {writer.pid} on {WRITER_HOST} (foreign)"
        view = StoredRun(str(run), str(tmp_path))
        assert view.status.startswith(f"being written by PID {writer.pid} on {WRITER_HOST}")
        first = view.n_draws
        deadline = time.time() + 180
        while view.n_draws < first + 40 and time.time() < deadline:
            time.sleep(1)
            view.refresh()
        assert view.n_draws >= first + 40, (first, view.n_draws)
        os.killpg(writer.pid, signal.SIGINT)
        assert writer.wait(timeout=120) == 130
        before = _tree_digest(run)
        view.refresh()
        _ = view.snapshot(), view.diagnostics()
        view.close()
        assert _tree_digest(run) == before
        # its lock went with the writer: stopped, resumable
        assert find_runs([tmp_path])[0].state == "stopped"
    finally:
        if writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
            writer.wait()
