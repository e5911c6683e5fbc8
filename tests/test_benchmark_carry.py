"""A benchmark longer than a session is carried to the next one in git (benchmarks/_common.py): its run
folder and its warmup's checkpoint packed whole but for the writers' locks, unpacked only where neither is
on disk, and an archive that would write outside benchmarks/runs/ is refused."""

import importlib.util
import io
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

from daskgp.runs.lock import LOCK_NAME

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def common(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_common", ROOT / "benchmarks" / "_common.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "CARRIED", tmp_path / "carried")
    return mod


def _files(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_run_is_carried_whole_without_its_lock_and_restored_only_where_missing(tmp_path, common):
    run = tmp_path / "runs" / "case.zarr"
    (run / "posterior" / "noise" / "c").mkdir(parents=True)
    (run / "zarr.json").write_text('{"daskgp_run": 3}')
    (run / "posterior" / "noise" / "c" / "0").write_bytes(bytes(range(256)))
    (run / "daskgp-checkpoint.json").write_text('{"n_draws": 50}')
    (run / LOCK_NAME).write_text('{"pid": 1}')
    warm = run.with_name("case.zarr.warmup")  # a warmup's checkpoint, beside the run until its first block
    warm.mkdir()
    (warm / "daskgp-checkpoint.json").write_text('{"step": 7}')
    (warm / LOCK_NAME).write_text('{"pid": 1}')
    before = _files(tmp_path / "runs")

    archive = common.carry_run(run)
    assert archive == tmp_path / "carried" / "case.zarr.tar.gz" and not list(archive.parent.glob("*.tmp"))
    assert common.restore_run(run) is False  # the run is on disk: never overwritten
    shutil.rmtree(run)
    assert common.restore_run(run) is False  # its warmup is on disk: a run in progress, never overwritten
    shutil.rmtree(warm)  # a fresh clone: benchmarks/runs/ is empty

    assert common.restore_run(run) is True
    after = _files(tmp_path / "runs")
    assert after == {k: v for k, v in before.items() if not k.endswith(LOCK_NAME)}
    assert common.carry_run(tmp_path / "runs" / "absent.zarr") is None
    early = tmp_path / "runs" / "early.zarr.warmup"  # a warmup before its first commit: its lock alone
    early.mkdir()
    (early / LOCK_NAME).write_text('{"pid": 1}')
    assert common.carry_run(tmp_path / "runs" / "early.zarr") is None


def test_an_archive_that_would_write_outside_the_runs_folder_is_refused(tmp_path, common):
    (tmp_path / "carried").mkdir()
    with tarfile.open(tmp_path / "carried" / "evil.zarr.tar.gz", "w:gz") as tar:
        data = b"x"
        info = tarfile.TarInfo("../outside.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(tarfile.OutsideDestinationError):
        common.restore_run(tmp_path / "runs" / "evil.zarr")
    assert not (tmp_path / "outside.txt").exists()


def test_a_sitting_records_itself_at_every_block_and_carries_the_run(tmp_path, common):
    import numpy as np

    run = tmp_path / "runs" / "case.zarr"
    run.mkdir(parents=True)
    (run / "daskgp-checkpoint.json").write_text('{"n_draws": 50}')
    segments, saved = [], []
    hooks, finish = common.sitting(run, segments, lambda: saved.append(len(segments)))
    assert set(hooks) == {"on_block", "on_warmup"} and len(segments) == 1
    assert segments[0]["restored_from_carried"] is False and segments[0]["draws_per_chain"] is None
    hooks["on_block"]({"noise": np.zeros((2, 50))}, {}, 50)  # the block of draws 50..99 committed
    assert segments[0]["draws_per_chain"] == 100 and saved == [1]
    assert (tmp_path / "carried" / "case.zarr.tar.gz").exists()
    assert finish() >= segments[0]["wall_s"] > 0


def test_paired_by_seed_pairs_only_seeds_both_ran_and_reports_the_log_ratios_spread(common):
    """The helper the paired benchmarks summarise with (small_n_crossover.py, hmc_adaptation.py): exact
    numbers on a hand-made results dict — seed 2 ran only one side and is left out."""
    run = {"mean_log": [0.0, 1.0], "sd_log": [1.0, 2.0]}
    runs = {"a/0": {**run, "wall_seconds": 2.0}, "b/0": {**run, "wall_seconds": 4.0},
            "a/1": {**run, "wall_seconds": 2.0, "mean_log": [0.5, 0.0]}, "b/1": {**run, "wall_seconds": 1.0},
            "a/2": {**run, "wall_seconds": 1.0}}
    p = common.paired_by_seed(runs, "a", "b")
    assert p["seeds"] == [0, 1] and p["ratios"] == [0.5, 2.0]
    assert p["geometric_mean"] == pytest.approx(1.0)
    assert p["se_of_log"] == pytest.approx(np.log(4.0) / np.sqrt(2) / np.sqrt(2))  # sd of ±log 2 over 2
    assert not p["below_every_seed"]
    assert p["mean_gap_in_pooled_sd"] == [[0.0, 0.0], [0.5, 0.5]]
    assert common.paired_by_seed(runs, "a", "c") is None
