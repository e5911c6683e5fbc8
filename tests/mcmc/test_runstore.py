"""The run store as a hostile but realistic user meets it: overwrite only runs, readers that never write,
checkpoints that are data (no pickle ever executes), damage reported in one line, and daskgp repair."""

import base64
import itertools
import json
import os
import pickle
import shutil
import socket
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import daskgp as dg
from daskgp.datasets import load_csv
from daskgp.interface.cli import main
from daskgp.mcmc.chains import resume, sample
from daskgp.mcmc.control import RunControl, RunStopped
from daskgp.mcmc.diagnostics import save_netcdf
from daskgp.mcmc.estimator import BayesianGPRegressor
from daskgp.runs.draws import CHECKPOINT, PREVIOUS, RunError, decode, encode, read_checkpoint
from daskgp.runs.lock import LOCK_NAME, acquire, lock_info, release

SHARED = os.environ.get("DASKGP_DATA", "")
pytestmark = pytest.mark.cluster


class _Payload:
    """Unpickling this creates a marker file: proof that a pickle was executed."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The first 150 rows of concrete as a user's CSV, and 5 new inputs."""
    folder = tmp_path_factory.mktemp("data")
    df = pd.read_csv(os.path.join(SHARED, "concrete.csv"))
    df.iloc[:150].to_csv(folder / "train.csv", index=False)
    df.iloc[150:155].to_csv(folder / "new.csv", index=False)
    return folder, load_csv(folder / "train.csv", "strength_mpa")


@pytest.fixture(scope="module")
def tiny_run(data, client, tmp_path_factory):
    """A finished MH run, 2 chains × 30 draws in three blocks of 10 (the warmup's, then two of kept draws),
    that knows its data (a CSV)."""
    folder, ds = data
    out = tmp_path_factory.mktemp("runs") / "tiny.zarr"
    sample(ds.X_std, ds.y_std, out=str(out), client=client, method="mh", n_chains=2, n_iter=30,
           checkpoint_every=10, n_adapt=10, seed=0,
           data_spec={"csv": str(folder / "train.csv"), "target": ds.target_name}, data_meta=ds.meta())
    return out


def _copy(run, dst):
    shutil.copytree(run, dst)
    return str(dst)


def _files(run):
    return sorted(os.path.relpath(os.path.join(d, f), run) for d, _, fs in os.walk(run) for f in fs)


def _snapshot(folder):
    """Every file under folder with its size, mtime and content: to prove nothing was written."""
    snap = {}
    for d, _, fs in os.walk(folder):
        for f in fs:
            p = os.path.join(d, f)
            st = os.stat(p)
            with open(p, "rb") as fh:
                snap[os.path.relpath(p, folder)] = (st.st_size, st.st_mtime_ns, fh.read())
    return snap


def _one_line_error(capsys, code):
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1, err
    assert len(err) == 1 and err[0].startswith("daskgp: error:") and "Traceback" not in err[0], err
    return err[0]


def _sample_argv(out, *extra):
    return ["sample", "--data", "concrete", "--iterations", "100", "--chains", "2", "--out", str(out), *extra]


# ------------------------------------------------------------------------------------------ overwrite
def test_overwrite_keeps_a_folder_that_is_not_a_run(tmp_path, capsys):
    """The reproduction: a folder with a user file and --out DIR --overwrite: exit 1, the file is kept."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "keep").write_text("mine")
    line = _one_line_error(capsys, main(_sample_argv(d, "--overwrite")))
    assert "not a daskgp run" in line and (d / "keep").read_text() == "mine"
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    assert "is a file" in _one_line_error(capsys, main(_sample_argv(f, "--overwrite")))
    (tmp_path / "link").symlink_to(d)
    assert "symbolic link" in _one_line_error(capsys, main(_sample_argv(tmp_path / "link", "--overwrite")))
    assert f.read_text() == "mine" and (d / "keep").exists()


def test_a_new_run_beside_a_checkpointed_warmup_is_refused_unless_overwritten(tmp_path, capsys):
    """A warmup interrupted before the run's first block keeps its checkpoint beside the run's path: a new
    run there is refused in one line that says to resume it; --overwrite removes it (a folder of other
    files at that path is never removed); --resume of a damaged one is one line naming it."""
    from daskgp.mcmc.warmup import WarmupStore, warmup_path

    run = str(tmp_path / "run.zarr")
    ckpt = WarmupStore(warmup_path(run))
    with ckpt.writing():
        ckpt.commit("key", 5, {"start": {}, "warmup": {}})
    assert "resume it" in _one_line_error(capsys, main(_sample_argv(run)))
    assert "its warmup (5 gradients) is checkpointed" in _one_line_error(capsys, main(["summary", run]))
    line = _one_line_error(capsys, main(["sample", "--resume", run]))
    assert "warmup checkpoint is malformed" in line and ckpt.path in line
    assert os.path.isdir(ckpt.path)
    with mock.patch("daskgp.interface.cli.runs.cluster_from_args", side_effect=ValueError("stop here")):
        assert "stop here" in _one_line_error(capsys, main(_sample_argv(run, "--overwrite")))
    assert not os.path.exists(ckpt.path)  # removed before any cluster starts
    os.mkdir(ckpt.path)
    (tmp_path / "run.zarr.warmup" / "keep").write_text("mine")
    assert "not a daskgp warmup checkpoint" in _one_line_error(capsys, main(_sample_argv(run, "--overwrite")))
    assert (tmp_path / "run.zarr.warmup" / "keep").read_text() == "mine"


def test_overwrite_refuses_the_working_directory_its_parents_and_home(tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "keep").write_text("mine")
    monkeypatch.chdir(work / "sub")
    assert "working directory" in _one_line_error(capsys, main(_sample_argv(".", "--overwrite")))
    line = _one_line_error(capsys, main(_sample_argv("..", "--overwrite")))
    assert "contains the working directory" in line
    assert "the root folder" in _one_line_error(capsys, main(_sample_argv("/", "--overwrite")))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert "home folder" in _one_line_error(capsys, main(_sample_argv(home, "--overwrite")))
    assert (work / "keep").read_text() == "mine"


def test_overwrite_refuses_a_run_holding_user_files_or_a_live_writer(tiny_run, tmp_path, capsys):
    run = _copy(tiny_run, tmp_path / "run.zarr")
    with open(os.path.join(run, "notes.txt"), "w") as f:
        f.write("mine")
    line = _one_line_error(capsys, main(_sample_argv(run, "--overwrite")))
    assert "holds notes.txt" in line and os.path.exists(os.path.join(run, "notes.txt"))
    os.remove(os.path.join(run, "notes.txt"))
    acquire(run)  # this process writes it
    try:
        assert "being written by" in _one_line_error(capsys, main(_sample_argv(run, "--overwrite")))
        assert "being written by" in _one_line_error(capsys, main(["sample", "--resume", run]))
        assert "cannot be repaired now" in _one_line_error(capsys, main(["repair", run]))
        assert dg.open_run(run).attrs["writer"].startswith("it is being written by")  # readers still read
    finally:
        release(run)
    assert not os.path.exists(os.path.join(run, LOCK_NAME))


def test_a_failed_start_keeps_the_run_it_was_to_replace(tiny_run, data, client, tmp_path):
    """A new run lives under a temporary name until its first block is committed: stopped before that,
    the old run is untouched and nothing is left behind."""
    _, ds = data
    run = _copy(tiny_run, tmp_path / "run.zarr")
    before = _snapshot(run)
    control = RunControl()
    control.stop()
    with pytest.raises(RunStopped):
        sample(ds.X_std, ds.y_std, out=run, client=client, overwrite=True, control=control, method="mh",
               n_chains=2, n_iter=20, checkpoint_every=10, seed=9)
    assert _snapshot(run) == before
    assert os.listdir(tmp_path) == ["run.zarr"]
    dt = sample(ds.X_std, ds.y_std, out=run, client=client, overwrite=True, method="mh", n_chains=2,
                n_iter=30, checkpoint_every=10, seed=9)
    assert dt.attrs["n_draws"] == 30 and os.listdir(tmp_path) == ["run.zarr"]


def _make_legacy(run, marker):
    """A run as the previous format left it: no marker, no checkpoint inside, a pickle beside it."""
    for name in (CHECKPOINT, PREVIOUS):
        os.remove(os.path.join(run, name))
    with open(os.path.join(run, "zarr.json")) as f:
        meta = json.load(f)
    del meta["attributes"]["daskgp_run"]
    with open(os.path.join(run, "zarr.json"), "w") as f:
        json.dump(meta, f)
    with open(run + ".checkpoint", "wb") as f:
        f.write(pickle.dumps(_Payload(marker)))


def test_a_run_of_the_previous_format_is_refused_in_one_line_and_can_be_overwritten(tiny_run, data, client,
                                                                                      tmp_path, capsys):
    _, ds = data
    marker = tmp_path / "EXECUTED"
    run = _copy(tiny_run, tmp_path / "old.zarr")
    _make_legacy(run, marker)
    for argv in (["summary", run], ["sample", "--resume", run], ["repair", run]):
        line = _one_line_error(capsys, main(argv))
        assert "old.zarr.checkpoint is a pickle" in line and "will not be loaded" in line
    with pytest.raises(RunError, match="earlier daskgp"):
        dg.open_run(run)
    sample(ds.X_std, ds.y_std, out=run, client=client, overwrite=True, method="mh", n_chains=2, n_iter=10,
           checkpoint_every=10, seed=1)
    assert not os.path.exists(run + ".checkpoint") and not marker.exists()
    assert dg.open_run(run).attrs["n_draws"] == 10


# ------------------------------------------------------------------------------------------ no pickle runs
_PREDICTIONS = itertools.count()


def _entry_points(run, data, tmp):
    folder, ds = data

    def pred():  # a new CSV each call: daskgp never replaces a CSV, even with --overwrite (issue 56)
        return str(tmp / f"pred-{next(_PREDICTIONS)}.csv")

    return {
        "dg.open_run": lambda: dg.open_run(run),
        "dg.resume": lambda: resume(run, X=ds.X_std, y=ds.y_std),
        "from_run": lambda: BayesianGPRegressor.from_run(run, n_predict_draws=5),
        "daskgp summary": lambda: main(["summary", run]),
        "daskgp predict": lambda: main(["predict", run, "--x", str(folder / "new.csv"), "--out", pred(),
                                        "--draws", "5"]),
        "daskgp sample --resume": lambda: main(["sample", "--resume", run]),
    }


def _outcome(call, capsys):
    """'ok' or 'error'; a CLI error must be one line without a traceback, an API error a clean exception."""
    try:
        rc = call()
    except (ValueError, FileNotFoundError, OSError) as e:
        assert "\n" not in str(e), e
        return "error"
    capsys.readouterr()
    if isinstance(rc, int):
        if rc:
            return "error"
    return "ok"


@pytest.mark.slow
def test_no_file_of_a_run_is_ever_unpickled(tiny_run, data, tmp_path, capsys):
    """A crafted pickle at the old checkpoint path, beside an empty folder or beside a genuine run, and in
    place of every file of a run, one at a time: under every reader and resume, the payload never runs."""
    marker = tmp_path / "EXECUTED"
    payload = pickle.dumps(_Payload(marker))
    pickle.loads(payload)
    assert marker.exists()  # the payload is live
    marker.unlink()
    bare = tmp_path / "bare.zarr"
    bare.mkdir()
    (tmp_path / "bare.zarr.checkpoint").write_bytes(payload)
    for name, call in _entry_points(str(bare), data, tmp_path).items():
        assert _outcome(call, capsys) == "error", name
        assert not marker.exists(), name
    beside = _copy(tiny_run, tmp_path / "beside.zarr")
    (tmp_path / "beside.zarr.checkpoint").write_bytes(payload)
    for name, call in _entry_points(beside, data, tmp_path).items():
        assert _outcome(call, capsys) == "ok", name  # the new format never looks there
        assert not marker.exists(), name
    files = _files(tiny_run) + [LOCK_NAME]
    assert len(files) > 30
    for i, rel in enumerate(files):
        run = _copy(tiny_run, tmp_path / f"case{i}.zarr")
        with open(os.path.join(run, rel), "wb") as f:
            f.write(payload)
        outcomes = {name: _outcome(call, capsys) for name, call in _entry_points(run, data, tmp_path).items()}
        assert not marker.exists(), (rel, outcomes)
        if rel == PREVIOUS:  # only read when the checkpoint itself is damaged
            assert set(outcomes.values()) == {"ok"}, (rel, outcomes)
        elif rel == LOCK_NAME:  # readers read; a writer refuses an unreadable lock
            assert outcomes["dg.open_run"] == "ok" and outcomes["dg.resume"] == "error", (rel, outcomes)
        else:
            assert set(outcomes.values()) == {"error"}, (rel, outcomes)
        shutil.rmtree(run)


def test_the_checkpoint_codec_round_trips_exactly_and_refuses_what_it_would_not_write():
    rng = np.random.default_rng(0)
    state = {"phi": rng.normal(size=3), "t": 7, "alpha": None, "flags": np.array([True, False]),
             "rng": rng.bit_generator.state, "x0": rng.normal(size=(4, 5)), "nan": float("nan"),
             "inf": -float("inf")}
    back = decode(json.loads(json.dumps(encode(state), allow_nan=False)))
    for k in ("phi", "flags", "x0"):
        assert back[k].dtype == state[k].dtype and np.array_equal(back[k], state[k])
    assert back["rng"] == state["rng"] and back["t"] == 7 and back["alpha"] is None
    assert np.isnan(back["nan"]) and back["inf"] == -np.inf
    with pytest.raises(TypeError):
        encode({"obj": np.array([object()])})
    with pytest.raises(TypeError):
        encode({"f": lambda: 0})
    good = encode({"a": np.arange(3.0)})["a"]
    for bad in ({**good, "dtype": "|O"}, {**good, "shape": [4]}, {**good, "shape": [-3]},
                {**good, "__ndarray__": "!!"}, {**good, "extra": 1}):
        with pytest.raises(ValueError):
            decode(bad)


# ------------------------------------------------------------------------------------------ damage
def _rewrite_checkpoint(run, change):
    path = os.path.join(run, CHECKPOINT)
    with open(path, "rb") as f:
        raw = f.read()
    with open(path, "wb") as f:
        f.write(change(raw))


def _edit(fn):
    def change(raw):
        doc = json.loads(raw)
        fn(doc)
        return json.dumps(doc).encode()

    return change


def _beyond(doc):  # the warmup's block, then 3 kept blocks where the arrays hold 1
    doc["n_draws"], doc["block_ends"] = 40, [10, 20, 30, 40]
    doc["digests"] = {k: v if k.startswith("warmup_") else v + v[-1:] for k, v in doc["digests"].items()}


CHECKPOINT_DAMAGE = {
    "empty": lambda raw: b"",
    "truncated": lambda raw: raw[: len(raw) // 2],
    "garbage": lambda raw: bytes(range(256)) * 8,
    "a list": lambda raw: b"[1, 2, 3]",
    "deeply nested": lambda raw: b"[" * 100_000 + b"]" * 100_000,
    "no digests": _edit(lambda d: d.pop("digests")),
    "negative count": _edit(lambda d: d.update(n_draws=-5)),
    "digest key leaving the run": _edit(lambda d: d["digests"].update({"../../etc/passwd": ["0", "0"]})),
    "array of objects": _edit(lambda d: d["states"][0]["phi"].update(dtype="|O")),
    "bad base64": _edit(lambda d: d["states"][0]["phi"].update(__ndarray__="@@@")),
    "more draws than the arrays hold": _edit(_beyond),
}


@pytest.mark.parametrize("case", sorted(CHECKPOINT_DAMAGE))
def test_a_damaged_checkpoint_is_one_line_and_repair_restores_the_previous_one(case, tiny_run, data, tmp_path,
                                                                               capsys):
    folder, _ = data
    run = _copy(tiny_run, tmp_path / "run.zarr")
    _rewrite_checkpoint(run, CHECKPOINT_DAMAGE[case])
    before = _snapshot(run)
    for argv in (["summary", run], ["sample", "--resume", run],
                 ["predict", run, "--x", str(folder / "new.csv"), "--out", str(tmp_path / "p.csv")]):
        line = _one_line_error(capsys, main(argv))
        if case == "more draws than the arrays hold":
            assert "holds 20 draws, fewer than the 30 committed" in line
        else:
            assert CHECKPOINT in line and "damaged" in line, line
            assert "daskgp repair" in line and "restores the previous checkpoint (20 draws" in line, line
    assert _snapshot(run) == before  # readers wrote nothing
    if case == "more draws than the arrays hold":
        return
    assert main(["repair", run]) == 0
    assert "restored the previous checkpoint (20 draws per chain)" in capsys.readouterr().out
    assert dg.open_run(run).attrs["n_draws"] == 20
    assert main(["summary", run]) == 0


def _unfinish(run, n_iter=40):
    """Make a finished run look interrupted (its configuration asks for more draws), so resume reads its
    chain states."""
    with open(os.path.join(run, "zarr.json")) as f:
        meta = json.load(f)
    cfg = json.loads(meta["attributes"]["config"])
    cfg["n_adapt"] = cfg["n_iter"] // 5 if cfg["n_adapt"] is None else cfg["n_adapt"]  # MH: keep its shape
    cfg["n_iter"] = n_iter
    meta["attributes"]["config"] = json.dumps(cfg)
    with open(os.path.join(run, "zarr.json"), "w") as f:
        json.dump(meta, f)


@pytest.mark.parametrize("change,msg", [
    (lambda d: d["states"][1].update(phi=encode(np.zeros(5))),
     "state of chain 1 is malformed (phi must be a float array of shape (3,)"),
    (lambda d: d["states"][0].update(rng={"bit_generator": "RandomState", "state": {}}),
     "state of chain 0 is malformed (not a numpy random generator state"),
    (lambda d: d["states"][0].update(t=3), "state of chain 0 is malformed (iteration 3 for 30 committed"),
    (lambda d: d["states"].pop(), "expected 2 chain states, found 1"),
])
def test_a_malformed_chain_state_stops_resume_in_one_line(change, msg, tiny_run, data, tmp_path, capsys):
    """Checked before a cluster starts (CLI) and before any chain runs (API)."""
    _, ds = data
    run = _copy(tiny_run, tmp_path / "run.zarr")
    _unfinish(run)
    _rewrite_checkpoint(run, _edit(change))
    assert msg in _one_line_error(capsys, main(["sample", "--resume", run]))
    with pytest.raises(RunError, match="malformed|expected"):
        resume(run, X=ds.X_std, y=ds.y_std)
    assert lock_info(run) is None  # the refused writer released the run


def test_a_missing_chunk_is_reported_not_summarised_and_salvage_keeps_the_intact_draws(tiny_run, tmp_path,
                                                                                       capsys):
    run = _copy(tiny_run, tmp_path / "run.zarr")
    os.remove(os.path.join(run, "posterior", "noise", "c", "0", "1"))  # the last block (run draws 20–29)
    line = _one_line_error(capsys, main(["summary", run]))
    assert "posterior/noise: draws 10–19 are missing (chunk file c/0/1)" in line
    assert "--salvage' keeps the 20 intact draws" in line
    line = _one_line_error(capsys, main(["repair", run]))
    assert "missing" in line and "--salvage" in line
    assert main(["repair", run, "--salvage"]) == 0
    assert "cut the run back to its 20 intact draws" in capsys.readouterr().out
    dt = dg.open_run(run)
    assert dt.attrs["n_draws"] == 20 and np.isfinite(dt["posterior"]["noise"].values).all()
    assert dt["posterior"].sizes["draw"] == 10 and dt["warmup_posterior"].sizes["draw"] == 10
    assert main(["summary", run]) == 0
    assert "cut this run back from 30 to 20 draws" in capsys.readouterr().out
    assert "cannot be resumed" in _one_line_error(capsys, main(["sample", "--resume", run]))
    assert xr.open_datatree(run, engine="zarr")["posterior"].sizes["draw"] == 10


@pytest.mark.parametrize("what", ["altered value", "corrupt chunk", "torn array metadata",
                                  "torn group metadata", "torn root metadata", "deleted array"])
def test_other_damage_is_one_line_naming_the_file(what, tiny_run, tmp_path, capsys):
    import zarr

    run = _copy(tiny_run, tmp_path / "run.zarr")
    target = {"altered value": "warmup_posterior/variance", "corrupt chunk": "posterior/variance/c/0/1",
              "torn array metadata": "sample_stats/logp/zarr.json",
              "torn group metadata": "posterior/zarr.json", "torn root metadata": "zarr.json",
              "deleted array": "posterior/lengthscale"}[what]
    path = os.path.join(run, target)
    if what == "deleted array":
        shutil.rmtree(path)
    elif what == "altered value":  # a valid chunk with one number changed: only the digest can tell
        zarr.open_array(path, mode="r+")[1, 3] = 1.5
    elif what == "corrupt chunk":
        raw = bytearray(open(path, "rb").read())
        raw[-1] ^= 0xFF
        open(path, "wb").write(bytes(raw))
    else:
        raw = open(path, "rb").read()
        open(path, "wb").write(raw[: len(raw) // 2])
    before = _snapshot(run)
    line = _one_line_error(capsys, main(["summary", run]))
    name = target.split("/c/")[0].removesuffix("zarr.json").rstrip("/") or "zarr.json"
    assert name in line, line
    expected = {"altered value": "warmup_posterior/variance: draws 0–9 are altered; no intact draws remain",
                "corrupt chunk": "posterior/variance: draws 10–19 cannot be read",
                "torn group metadata": "posterior/zarr.json is missing or unreadable",
                "deleted array": "posterior/lengthscale is missing"}.get(what, "")
    assert expected in line, line
    if what == "corrupt chunk":
        assert "--salvage' keeps the 20 intact draws" in line
    elif what != "altered value":
        assert "daskgp repair cannot rebuild it" in line, line
    assert _snapshot(run) == before


# ------------------------------------------------------------------------------------------ locks
def _write_lock(run, host, pid, start):
    with open(os.path.join(run, LOCK_NAME), "w") as f:
        json.dump({"host": host, "pid": pid, "process_start": start, "started": "then"}, f)


def test_a_stale_lock_is_reported_cleared_by_repair_and_a_foreign_one_needs_force(tiny_run, tmp_path, capsys):
    run = _copy(tiny_run, tmp_path / "run.zarr")
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _write_lock(run, socket.gethostname(), gone.pid, 1.0)
    assert lock_info(run).state == "stale"
    assert main(["summary", run]) == 0
    assert "is no longer running" in capsys.readouterr().out
    assert main(["repair", run]) == 0
    assert "cleared the lock" in capsys.readouterr().out and lock_info(run) is None
    _write_lock(run, "elsewhere.example", 4242, 1.0)
    line = _one_line_error(capsys, main(["repair", run]))
    assert "cannot be checked from this host" in line and "--force" in line
    assert main(["repair", run, "--force"]) == 0 and lock_info(run) is None
    with open(os.path.join(run, LOCK_NAME), "wb") as f:
        f.write(b"[" * 4000)
    assert lock_info(run).state == "unreadable"
    assert "unreadable" in _one_line_error(capsys, main(["sample", "--resume", run]))


def test_readers_never_write_even_beside_a_torn_append(tiny_run, data, tmp_path, capsys):
    """Readers present the committed prefix of a run whose arrays grew past the checkpoint (a writer in
    the middle of an append) and change no byte, no size, no timestamp."""
    import zarr

    folder, _ = data
    run = _copy(tiny_run, tmp_path / "run.zarr")
    for key in ("posterior/noise", "sample_stats/logp"):
        arr = zarr.open_group(run, mode="r+", use_consolidated=False)[key]
        arr.resize((2, 30))
        arr[:, 20:] = np.nan
    before = _snapshot(run)
    dt = dg.open_run(run)
    assert dt.attrs["n_draws"] == 30 and np.isfinite(dt["posterior"]["noise"].values).all()
    BayesianGPRegressor.from_run(run, n_predict_draws=5).predict(np.zeros((2, 8)))
    assert main(["summary", run, "--psrf"]) == 0
    assert main(["predict", run, "--x", str(folder / "new.csv"), "--out", str(tmp_path / "p.csv")]) == 0
    save_netcdf(dt, tmp_path / "post.nc")
    assert _snapshot(run) == before


def test_arviz_reads_the_run_as_daskgp_summarises_it(tiny_run, tmp_path):
    """ArviZ's layout on disk: posterior holds only the kept draws, the warmup's are in warmup_posterior /
    warmup_sample_stats; az.from_zarr (no warning: the metadata are consolidated) gives the R-hat and ESS
    of daskgp's summary to 1e-12, and plain xarray sees the same groups."""
    import warnings

    import arviz as az

    from daskgp.mcmc.diagnostics import run_summary

    run = _copy(tiny_run, tmp_path / "run.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tree = az.from_zarr(run)
    assert {"posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"} <= set(tree.children)
    assert tree["posterior"].sizes == {"chain": 2, "draw": 20}
    assert tree["warmup_posterior"].sizes == {"chain": 2, "draw": 10}
    assert not tree["sample_stats"]["warmup"].values.any()
    assert tree["warmup_sample_stats"]["warmup"].values.all()
    ours, _ = run_summary(dg.open_run(run))
    theirs = az.summary(tree)
    for col in ("r_hat", "ess_bulk", "ess_tail", "mean", "sd"):
        np.testing.assert_allclose(theirs.loc[ours.index, col].to_numpy(float), ours[col].to_numpy(float),
                                   rtol=1e-12, atol=1e-12, err_msg=col)
    whole = dg.open_run(run)
    from daskgp.mcmc.diagnostics import whole_chains

    joined = whole_chains(whole)["posterior"]["noise"].values
    np.testing.assert_array_equal(joined, np.concatenate([tree["warmup_posterior"]["noise"].values,
                                                          tree["posterior"]["noise"].values], axis=1))


def test_a_moved_run_predicts_and_resumes_from_its_own_data(tiny_run, data, client, tmp_path, monkeypatch,
                                                            capsys):
    """The training data live in the run (constant_data / observed_data with the scalers): moved away from
    its CSV (deleted) and with DASKGP_DATA unset, a run still summarises, predicts (the input columns by the
    stored names) and is extended by resume, bit for bit as from the original data."""
    folder, ds = data
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    run = _copy(tiny_run, moved / "run.zarr")
    new = tmp_path / "new.csv"
    shutil.copy(folder / "new.csv", new)
    original = BayesianGPRegressor.from_run(tiny_run, dataset=ds, n_predict_draws=5).predict(
        pd.read_csv(new)[list(ds.feature_names)].to_numpy())
    csv_backup = tmp_path / "train.csv.bak"
    shutil.move(folder / "train.csv", csv_backup)
    monkeypatch.delenv("DASKGP_DATA", raising=False)
    try:
        dt = dg.open_run(run)
        np.testing.assert_array_equal(dt["constant_data"]["X"].values, ds.X_std)
        np.testing.assert_array_equal(dt["observed_data"]["y"].values, ds.y_std)
        assert list(dt["constant_data"]["feature"].values) == list(ds.feature_names)
        np.testing.assert_allclose(dt["constant_data"]["x_center"].values, ds.x_scaler.mean_)
        assert dt["observed_data"].attrs["y_scale"] == pytest.approx(float(ds.y_scaler.scale_[0]))
        assert main(["summary", run]) == 0
        assert main(["predict", run, "--x", str(new), "--out", str(tmp_path / "p.csv"), "--draws", "5"]) == 0
        pred = pd.read_csv(tmp_path / "p.csv")
        np.testing.assert_allclose(pred["mean"].to_numpy(), original, rtol=1e-10)
        ext = resume(run, client=client, n_iter=40)
        assert ext.attrs["n_draws"] == 40
    finally:
        shutil.move(csv_backup, folder / "train.csv")
    capsys.readouterr()


def test_read_checkpoint_is_data(tiny_run):
    ck = read_checkpoint(tiny_run)
    assert ck["n_draws"] == 30 and ck["block_ends"] == [10, 20, 30] and ck["warmup_draws"] == 10
    assert len(ck["states"]) == 2
    assert isinstance(ck["states"][0]["phi"], np.ndarray)
    raw = json.load(open(os.path.join(tiny_run, CHECKPOINT)))
    assert base64.b64decode(raw["states"][0]["phi"]["__ndarray__"])  # arrays are base64 in plain JSON
