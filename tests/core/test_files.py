"""The one rule for every file daskgp writes (issue 29): only where the user pointed, an existing path only
with overwrite and only when daskgp wrote it as the same kind, never through a symbolic link, never into a
store, never over an input; and the CLI commands that write follow it before any cluster starts."""

import json
import os

import numpy as np
import pytest
import xarray as xr

from daskgp.core.files import (
    MANIFEST,
    MARK,
    check_destination,
    replaced_atomically,
    write_atomically,
    written_kind,
)
from daskgp.interface.cli import main


def _mine(path, kind="daskgp.doctor-report"):
    write_atomically(path, json.dumps({MARK: kind, "x": 1}).encode())


def test_new_paths_are_accepted_and_checked(tmp_path):
    assert check_destination(tmp_path / "a.json", "k", suffixes=(".json",)) == str(tmp_path / "a.json")
    with pytest.raises(ValueError, match="ending in .json"):
        check_destination(tmp_path / "a.txt", "k", suffixes=(".json",))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_destination(tmp_path / "no" / "a.json", "k")
    with pytest.raises(ValueError, match="empty"):
        check_destination("", "k")


def test_an_existing_file_needs_overwrite_and_the_same_kind(tmp_path):
    p = tmp_path / "r.json"
    _mine(p)
    with pytest.raises(FileExistsError, match="overwrite"):
        check_destination(p, "daskgp.doctor-report")
    assert check_destination(p, "daskgp.doctor-report", overwrite=True)
    with pytest.raises(ValueError, match="it is a daskgp.doctor-report"):  # ours, but of another kind
        check_destination(p, "daskgp.other", overwrite=True)
    foreign = tmp_path / "mine.json"
    foreign.write_text('{"precious": true}')
    with pytest.raises(ValueError, match="daskgp did not write it"):
        check_destination(foreign, "daskgp.doctor-report", overwrite=True)
    assert json.loads(foreign.read_text()) == {"precious": True}


@pytest.mark.parametrize("content", [b"", b"\x89HDF\r\n\x1a\n" + b"\0" * 40, b"garbage" * 100])
def test_unreadable_files_are_not_provably_ours(content, tmp_path):
    for suffix in (".nc", ".npz", ".json", ".csv"):
        p = tmp_path / f"f{suffix}"
        p.write_bytes(content)
        assert written_kind(p) is None
        with pytest.raises(ValueError, match="did not write|never replaces a CSV"):
            check_destination(p, "daskgp.anything", overwrite=True)


def test_markers_of_each_format(tmp_path):
    nc = tmp_path / "m.nc"
    xr.Dataset({"a": ("x", np.arange(3.0))}, attrs={MARK: "daskgp.k"}).to_netcdf(nc)
    assert written_kind(nc) == "daskgp.k"
    plain = tmp_path / "p.nc"
    xr.Dataset({"a": ("x", np.arange(3.0))}).to_netcdf(plain)
    assert written_kind(plain) is None
    z = tmp_path / "m.zarr"
    xr.Dataset({"a": ("x", np.arange(3.0))}, attrs={MARK: "daskgp.k", MANIFEST: ["a"]}).to_zarr(z)
    assert written_kind(z) == "daskgp.k"
    (z / "precious.txt").write_text("keep")  # a user's file inside: not provably ours any more
    assert written_kind(z) is None
    bare = tmp_path / "bare.zarr"  # the marker without the manifest of its nodes (daskgp <= 0.6)
    xr.Dataset({"a": ("x", np.arange(3.0))}, attrs={MARK: "daskgp.k"}).to_zarr(bare)
    assert written_kind(bare) is None
    npz = tmp_path / "c.npz"
    np.savez(npz, a=np.zeros(2), **{MARK: np.str_("daskgp.fit-checkpoint")})
    assert written_kind(npz) == "daskgp.fit-checkpoint"
    csv = tmp_path / "p.csv"  # a CSV cannot carry a marker: never provably ours, whatever its header
    csv.write_text("a,b,mean,sd,lower,upper\n1,2,3,4,5,6\n")
    assert written_kind(csv) is None


def test_symbolic_links_are_never_written_through(tmp_path):
    victim = tmp_path / "victim.json"
    _mine(victim)
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    with pytest.raises(ValueError, match="symbolic link"):
        check_destination(link, "daskgp.doctor-report", overwrite=True)
    with pytest.raises(ValueError, match="symbolic link"):
        write_atomically(link, b"x")
    assert json.loads(victim.read_text())["x"] == 1 and link.is_symlink()


def test_nothing_is_written_into_a_store_or_over_an_input(tmp_path):
    store = tmp_path / "run.zarr"
    store.mkdir()
    (store / "zarr.json").write_text("{}")
    with pytest.raises(ValueError, match="inside the store"):
        check_destination(store / "daskgp-checkpoint.json", "daskgp.doctor-report", overwrite=True)
    (store / "sub").mkdir()
    with pytest.raises(ValueError, match="inside the store"):
        check_destination(store / "sub" / "new.json", "k")
    src = tmp_path / "in.csv"
    src.write_text("a,b,mean,sd,lower,upper\n1,2,3,4,5,6\n")  # even one that looks like our predictions
    with pytest.raises(ValueError, match="is the input"):
        check_destination(src, "predictions", overwrite=True, reads=(str(src),))


def test_an_atomic_write_that_fails_names_the_users_path(tmp_path):
    target = tmp_path / "out.nc"
    with pytest.raises(OSError) as e, replaced_atomically(target) as tmp:
        raise OSError(28, f"No space left on device: '{tmp}'")
    assert "tmp-" not in str(e.value) and str(target) in str(e.value)
    assert os.listdir(tmp_path) == []


def _one_line(capsys, code):
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and err[0].startswith("daskgp: error:"), err
    return err[0]


def test_doctor_writes_only_with_json_and_never_over_a_foreign_file(tmp_path, capsys, monkeypatch):
    """The reproductions of issue 29: a user's file, a symlink's target and a run's checkpoint survive, each
    refused in one line before any cluster starts; without --json nothing is written at all."""
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "mine.json"
    mine.write_text("precious")
    victim = tmp_path / "victim.txt"
    victim.write_text("victim")
    (tmp_path / "link.json").symlink_to(victim)
    run = tmp_path / "run.zarr"
    run.mkdir()
    (run / "zarr.json").write_text("{}")
    (run / "daskgp-checkpoint.json").write_text("{}")
    for argv, msg in ((["--json", "mine.json"], "exists; pass --overwrite"),
                      (["--json", "mine.json", "--overwrite"], "daskgp did not write it"),
                      (["--json", "link.json", "--overwrite"], "symbolic link"),
                      (["--json", "run.zarr/daskgp-checkpoint.json", "--overwrite"], "inside the store"),
                      (["--json", "report.txt"], "ending in .json")):
        assert msg in _one_line(capsys, main(["doctor", "--rows", "60", *argv]))
    assert mine.read_text() == "precious" and victim.read_text() == "victim"
    assert (run / "daskgp-checkpoint.json").read_text() == "{}"
    assert sorted(os.listdir(tmp_path)) == ["link.json", "mine.json", "run.zarr", "victim.txt"]


@pytest.mark.parametrize("command", ["sgpr", "advgp", "gpc"])
def test_fit_commands_never_replace_a_foreign_netcdf(command, tmp_path, capsys):
    foreign = tmp_path / "theirs.nc"
    xr.Dataset({"a": ("x", np.arange(3.0))}).to_netcdf(foreign)
    before = foreign.read_bytes()
    data = ["--data", "breast_cancer"] if command == "gpc" else []
    msg = _one_line(capsys, main([command, *data, "--out", str(foreign), "--overwrite"]))
    assert "daskgp did not write it" in msg and foreign.read_bytes() == before
    msg = _one_line(capsys, main([command, *data, "--out", str(tmp_path / "no" / "r.nc")]))
    assert "does not exist" in msg


@pytest.mark.parametrize("command", ["sgpr", "gpc", "advgp"])
@pytest.mark.parametrize("content", [b"PK\x03\x04" + b"\0" * 20, b"\x93NUMPY garbage" * 10, b""])
def test_a_damaged_fit_checkpoint_gives_one_line_naming_it(command, content, tmp_path, capsys):
    """Issue 29: a truncated or garbage checkpoint on --resume was a BadZipFile traceback or numpy's
    'allow_pickle' hint; now one line naming the checkpoint and what to do, before any cluster starts, and
    the file is left as it was."""
    out = tmp_path / "r.nc"
    folder = tmp_path / "r.nc.checkpoint"
    folder.mkdir()
    ckpt = folder / "daskgp-checkpoint.json"
    ckpt.write_bytes(content)
    data = ["--data", "breast_cancer"] if command == "gpc" else []
    msg = _one_line(capsys, main([command, *data, "--out", str(out), "--resume"]))
    assert str(folder) in msg and "is damaged or not a daskgp checkpoint" in msg and "delete it" in msg
    assert "allow_pickle" not in msg and ckpt.read_bytes() == content


@pytest.mark.parametrize("command,suffix", [("sgpr", ".npz"), ("gpc", ".npz"), ("advgp", ".json")])
def test_a_checkpoint_of_daskgp_0_3_gives_one_line_and_stays(command, suffix, tmp_path, capsys):
    """Issue 32: a fit's checkpoint is a folder now; the single file daskgp <= 0.3 wrote beside the results
    (OUT.checkpoint.npz / .json, with its marker) cannot be resumed: --resume says so in one line naming it,
    and leaves it as it was."""
    old = tmp_path / f"r.nc.checkpoint{suffix}"
    if suffix == ".npz":
        np.savez(old, theta=np.zeros(3), trace=np.zeros(1), key=np.str_("k"),
                 **{MARK: np.str_("daskgp.gpc-checkpoint" if command == "gpc" else "daskgp.fit-checkpoint")})
    else:
        old.write_text(json.dumps({MARK: "daskgp.advgp-checkpoint", "format": "daskgp-advgp-1"}))
    before = old.read_bytes()
    data = ["--data", "breast_cancer"] if command == "gpc" else []
    msg = _one_line(capsys, main([command, *data, "--out", str(tmp_path / "r.nc"), "--resume"]))
    assert str(old) in msg and "daskgp <= 0.3" in msg and "cannot resume it" in msg, msg
    assert old.read_bytes() == before


def test_predict_never_replaces_a_foreign_file_or_its_input(tmp_path, capsys):
    (tmp_path / "run.zarr").mkdir()
    theirs = tmp_path / "theirs.nc"
    xr.Dataset({"a": ("x", np.arange(3.0))}).to_netcdf(theirs)
    before = theirs.read_bytes()
    new = tmp_path / "new.csv"
    new.write_text("a,b,mean,sd,lower,upper\n1,2,3,4,5,6\n")
    run = str(tmp_path / "run.zarr")
    msg = _one_line(capsys, main(["predict", run, "--out", str(theirs), "--overwrite"]))
    assert "daskgp did not write it" in msg and theirs.read_bytes() == before
    msg = _one_line(capsys, main(["predict", run, "--x", str(new), "--out", str(new), "--overwrite"]))
    assert "is the input" in msg and new.read_text().startswith("a,b,mean")
