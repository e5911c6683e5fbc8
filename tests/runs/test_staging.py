"""Staging folders of new runs (issue 56, item 6): a new run is written in ``OUT.partial-PID-HEX`` and renamed
to ``OUT`` at its first committed block; a writer killed before then left the folder behind for good. Now
the next ``daskgp sample --out OUT`` or ``daskgp repair OUT`` removes it — only when its writer is gone
(a real process, killed) and it holds nothing but a run's own entries; a live writer's staging folder and
one holding a user's file are left, the latter named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from daskgp.interface.cli import main
from daskgp.runs.draws import DrawStore, remove_dead_staging, staging_folders

_KILLED_WRITER = """
import os, signal, sys
from daskgp.runs.draws import DrawStore
DrawStore.create(sys.argv[1], attrs={"who": "killed"}, chunk=10)
os.kill(os.getpid(), signal.SIGKILL)  # dies holding its staging folder, before any block
"""


def _killed_writer(out) -> str:
    r = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr
    (folder, state), = staging_folders(out)
    assert state == "dead" and os.path.basename(folder).startswith(os.path.basename(out) + ".partial-")
    return folder


def test_a_dead_writers_staging_folder_is_removed_and_a_live_ones_kept(tmp_path):
    out = tmp_path / "run.zarr"
    dead = _killed_writer(out)
    live = DrawStore.create(str(out), attrs={"who": "live"}, chunk=10)  # this process: alive, locked
    try:
        states = dict(staging_folders(out))
        assert states == {dead: "dead", live.path: "live"}
        lines = remove_dead_staging(out)
        assert len(lines) == 1 and lines[0].startswith(f"removed {dead}")
        assert not os.path.exists(dead) and os.path.isdir(live.path)
    finally:
        live.close()  # a run that committed nothing removes its own staging folder
    assert staging_folders(out) == []


def test_a_dead_writers_staging_folder_with_a_users_file_is_left_and_named(tmp_path):
    out = tmp_path / "run.zarr"
    dead = _killed_writer(out)
    with open(os.path.join(dead, "notes.txt"), "w") as f:
        f.write("mine")
    assert staging_folders(out) == [(dead, "foreign")]
    lines = remove_dead_staging(out)
    assert len(lines) == 1 and lines[0].startswith(f"left {dead}")
    with open(os.path.join(dead, "notes.txt")) as f:
        assert f.read() == "mine"


@pytest.mark.parametrize("command", ["repair", "sample"])
def test_the_next_command_on_the_output_removes_it(command, tmp_path, capsys):
    """``daskgp repair OUT`` (OUT itself never committed, so it does not exist) lists and removes it;
    ``daskgp sample --out OUT`` removes it before its own run (refused here for another reason after the
    output was checked: an unknown data set, so no cluster starts)."""
    out = tmp_path / "run.zarr"
    dead = _killed_writer(out)
    if command == "repair":
        assert main(["repair", str(out)]) == 0
        said = capsys.readouterr().out
    else:
        assert main(["sample", "--data", "no-such-set", "--out", str(out)]) != 0
        said = capsys.readouterr().err
    assert f"removed {dead}" in said and not os.path.exists(dead) and not os.path.exists(out)


def test_an_unlocked_staging_folder_counts_as_dead_only_when_old(tmp_path):
    """Before its writer locks it (seconds after making it) a staging folder names only a pid, which means
    nothing when the writer runs on another host sharing the storage: such a folder is left while it is
    younger than UNLOCKED_STAGING_S, and removed when older (its pid, of a process that has exited, gone)."""
    from daskgp.runs.layout import UNLOCKED_STAGING_S

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, timeout=60)
    pid = int(done.stdout)  # a process that has exited
    out = tmp_path / "run.zarr"
    folder = tmp_path / f"run.zarr.partial-{pid}-abc123"
    folder.mkdir()
    assert staging_folders(out) == [(str(folder), "live")] and remove_dead_staging(out) == []
    old = os.path.getmtime(folder) - UNLOCKED_STAGING_S - 60
    os.utime(folder, (old, old))
    assert staging_folders(out) == [(str(folder), "dead")]
    assert remove_dead_staging(out)[0].startswith(f"removed {folder}") and not folder.exists()
