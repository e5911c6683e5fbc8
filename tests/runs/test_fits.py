"""Issue 32: one run store for every fit. Each family's checkpoint (SGPR, ADVGP, GPC, GPLVM) is a folder of
the chains' commit files: a JSON commit of plain data with a digest, the previous commit, the writer's lock;
a truncated, torn, altered or foreign file is one line naming it; ``daskgp repair`` mends a fit's
checkpoint as it mends a run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from daskgp.advgp.server import ServerCheckpoint
from daskgp.core.files import written_kind
from daskgp.gpc.fit import GPCCheckpoint
from daskgp.interface.cli import main
from daskgp.runs import fits
from daskgp.runs.commit import CHECKPOINT, PREVIOUS, RunDamaged, RunError
from daskgp.runs.fits import FitStore, is_fit_store, repair_fit
from daskgp.runs.lock import LOCK_NAME, RunLocked, lock_info
from daskgp.sparse.fit import FitCheckpoint
from daskgp.sparse.gplvm import GPLVMCheckpoint

FAMILIES = [FitCheckpoint, ServerCheckpoint, GPCCheckpoint, GPLVMCheckpoint]


def _state(step: int) -> dict:
    return {"theta": np.arange(5.0) + step, "trace": np.linspace(-3, -1, step), "info": {"n": step},
            "names": ["a", "b"], "nan": float("nan")}


def _committed(cls, path, steps=(1, 2)) -> FitStore:
    store = cls(path)
    with store.writing():
        for k in steps:
            store.commit("key", k, _state(k))
    return store


@pytest.mark.parametrize("cls", FAMILIES)
def test_a_commit_reads_back_as_plain_data_with_the_previous_kept(cls, tmp_path):
    store = _committed(cls, tmp_path / "ck")
    assert is_fit_store(store.path) and written_kind(store.path) == cls.kind
    assert sorted(os.listdir(store.path)) == [CHECKPOINT, PREVIOUS]  # the lock is gone with the writer
    step, st = store.read_state("key")
    assert step == 2 and store.iterations() == 2
    np.testing.assert_array_equal(st["theta"], np.arange(5.0) + 2)
    assert st["names"] == ["a", "b"] and np.isnan(st["nan"]) and st["info"] == {"n": 2}
    with open(os.path.join(store.path, PREVIOUS)) as f:
        assert json.load(f)["step"] == 1
    with pytest.raises(RunError, match="other data or settings"):
        store.read_state("another key")


def _truncate(file):
    raw = open(file, "rb").read()
    open(file, "wb").write(raw[: len(raw) // 2])


def _alter(file):  # a bit flip inside the state: still JSON, no longer its digest
    doc = json.load(open(file))
    doc["state"]["info"]["n"] = 7
    open(file, "w").write(json.dumps(doc))


def _blake2b(obj) -> str:  # the digest as the format documents it, computed here independently
    body = json.dumps(obj, sort_keys=True, allow_nan=False, separators=(",", ":"))
    return hashlib.blake2b(body.encode("utf-8"), digest_size=16).hexdigest()


def _foreign_kind(file):  # a whole, consistent commit of another kind (its digest its own)
    doc = json.load(open(file))
    doc["daskgp_kind"] = "daskgp.someone-elses"
    doc["digest"] = _blake2b({k: doc[k] for k in ("daskgp_kind", "daskgp_fit_checkpoint", "key", "step",
                                                   "state")})
    open(file, "w").write(json.dumps(doc))


@pytest.mark.parametrize("cls", FAMILIES)
@pytest.mark.parametrize("damage,says", [(_truncate, "truncated"), (_alter, "do not match its digest"),
                                         (_foreign_kind, "not a 'daskgp."), (lambda f: open(f, "w").close(),
                                                                             "empty")])
def test_damage_is_one_line_naming_the_file_and_repair_restores_the_previous_commit(cls, damage, says,
                                                                                     tmp_path):
    """Every family's checkpoint: a truncated, altered, foreign or empty commit is refused in one line that
    names the file and says what `daskgp repair` can do; repair puts the previous commit back (one step
    lost), after which the checkpoint reads again; with the previous one damaged too, nothing is guessed."""
    store = _committed(cls, tmp_path / "ck")
    file = os.path.join(store.path, CHECKPOINT)
    damage(file)
    with pytest.raises(RunDamaged) as e:
        store.read_state("key")
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and file in msg and says in msg and "daskgp repair" in msg, msg
    assert store.iterations() == 0
    actions = repair_fit(store.path)
    assert len(actions) == 1 and "restored the previous commit (1 steps)" in actions[0]
    assert store.read_state("key")[0] == 1
    damage(file)
    damage(os.path.join(store.path, PREVIOUS))
    if damage is _foreign_kind:  # both commits agree: a consistent checkpoint of another kind, not damage
        assert "is intact" in repair_fit(store.path)[0]
        return
    with pytest.raises(RunDamaged, match="and so is the previous one"):
        repair_fit(store.path)


def test_a_folder_that_is_not_a_fit_checkpoint_is_never_read_or_removed(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    store = FitCheckpoint(folder)
    with pytest.raises(RunError, match="not a daskgp fit checkpoint"):
        store.read_state("key")
    with pytest.raises(RunError, match="not a daskgp fit checkpoint"), store.writing():
        pass
    store.remove()
    assert (folder / "notes.txt").read_text() == "my notes"
    other = _committed(GPCCheckpoint, tmp_path / "gpc")  # another family's checkpoint: refused, kept
    with pytest.raises(RunDamaged, match="'daskgp.gpc-checkpoint' checkpoint, not a 'daskgp.sgpr"):
        FitCheckpoint(other.path).read_state("key")


def test_a_second_writer_is_refused_while_the_first_lives_and_a_stale_lock_is_repaired(tmp_path):
    store = _committed(FitCheckpoint, tmp_path / "ck")
    with store.writing():
        with pytest.raises(RunLocked, match="cannot be written"), FitCheckpoint(store.path).writing():
            pass
        with pytest.raises(RunLocked, match="cannot be repaired now"):
            repair_fit(store.path)
    # a writer that died (SIGKILL) leaves its lock: the next writer takes it over, repair clears it
    code = "import sys; from daskgp.runs.lock import acquire; acquire(sys.argv[1])"
    subprocess.run([sys.executable, "-c", code, store.path], check=True)
    assert lock_info(store.path).state == "stale"
    actions = repair_fit(store.path)
    assert actions[0].startswith("cleared the lock") and not os.path.exists(os.path.join(store.path,
                                                                                          LOCK_NAME))


def test_a_fit_that_commits_nothing_leaves_nothing(tmp_path):
    store = FitCheckpoint(tmp_path / "ck")
    with store.writing():
        assert os.path.isdir(store.path)
    assert not os.path.exists(store.path)


def test_daskgp_repair_mends_a_fit_checkpoint(tmp_path, capsys):
    store = _committed(GPLVMCheckpoint, tmp_path / "g.ckpt")
    _truncate(os.path.join(store.path, CHECKPOINT))
    assert main(["repair", store.path]) == 0
    assert "restored the previous commit" in capsys.readouterr().out
    assert main(["repair", store.path]) == 0
    assert "is intact: 1 steps committed; nothing to repair" in capsys.readouterr().out
    assert main(["repair", store.path, "--salvage"]) == 1
    assert "--salvage applies to a run's draws only" in capsys.readouterr().err


@pytest.mark.parametrize("cls,suffix", [(FitCheckpoint, ".npz"), (ServerCheckpoint, ".json"),
                                        (GPCCheckpoint, ".npz")])
def test_a_checkpoint_of_daskgp_0_3_is_refused_in_one_line(cls, suffix, tmp_path):
    """The single file daskgp <= 0.3 wrote (at the path, or beside it with the family's suffix) is never
    resumed or removed: one line says so."""
    from daskgp.core.files import MARK

    old = tmp_path / f"fit.checkpoint{suffix}"
    if suffix == ".npz":
        np.savez(old, theta=np.zeros(3), trace=np.zeros(1), key=np.str_("k"), **{MARK: np.str_(cls.kind)})
    else:
        old.write_text(json.dumps({"format": "daskgp-advgp-1", "key": "k"}))
    for store in (cls(old), cls(tmp_path / "fit.checkpoint")):
        with pytest.raises(RunError, match=r"daskgp <= 0.3; this daskgp keeps a fit.s checkpoint"):
            store.read_state("k")
        store.remove()
    assert old.exists()


def test_a_fit_killed_before_its_first_commit_leaves_a_lock_the_next_fit_takes_over(tmp_path):
    """SIGKILL between the folder's creation and the first commit: the folder holds only the dead writer's
    lock. Reading it says the commit is missing (one line); the next writer takes the stale lock over."""
    path = tmp_path / "ck"
    code = ("import sys, os; os.mkdir(sys.argv[1]); from daskgp.runs.lock import acquire; "
            "acquire(sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    store = FitCheckpoint(path)
    assert is_fit_store(path)
    with pytest.raises(RunDamaged, match="daskgp-checkpoint.json is missing"):
        store.read_state("key")
    with store.writing():
        store.commit("key", 1, _state(1))
    assert store.read_state("key")[0] == 1 and not os.path.exists(path / LOCK_NAME)


@pytest.mark.parametrize("cls", FAMILIES)
def test_a_format_1_checkpoint_resumes_only_where_the_noise_did_not_change(cls, tmp_path):
    """Format 1 carried SGPR's, ADVGP's and the GPLVM's noise as log β, format 2 as log σ²_n: resuming one
    of theirs would invert the noise, so it is refused in one line; the classifier has no noise and reads
    it. Formats 1 and 2 digested the state alone: the commits are rewritten as an old writer left them."""
    store = _committed(cls, tmp_path / "ck")
    _as_older_format(store, 1)
    if cls is GPCCheckpoint:
        assert store.read_state("key")[0] == 2
    else:
        with pytest.raises(RunDamaged, match="format 1 .*noise as a precision.*cannot be resumed") as e:
            store.read_state("key")
        assert "\n" not in str(e.value) and CHECKPOINT in str(e.value)


def _as_older_format(store, fmt):
    for name in (CHECKPOINT, PREVIOUS):
        file = os.path.join(store.path, name)
        doc = json.load(open(file))
        doc["daskgp_fit_checkpoint"] = fmt
        doc["digest"] = _blake2b(doc["state"])  # formats 1 and 2: the state alone
        json.dump(doc, open(file, "w"))


@pytest.mark.parametrize("cls", FAMILIES)
@pytest.mark.parametrize("field,value", [("step", 200), ("key", "another data set's key"),
                                         ("daskgp_fit_checkpoint", 2)])
def test_an_altered_step_count_key_or_format_is_refused_and_format_2_still_reads(cls, field, value,
                                                                                  tmp_path):
    """Issue 56: format 3's digest covers every field a resume reads, not the state alone — a step count
    raised from 2 to 200 (the fit would think it had finished) or a key rewritten to match other data was
    read as written under format 2's state-only digest. A format-2 commit as its writer left it still reads
    (the documented older format)."""
    store = _committed(cls, tmp_path / "ck")
    for name in (CHECKPOINT, PREVIOUS):
        file = os.path.join(store.path, name)
        doc = json.load(open(file))
        assert doc["daskgp_fit_checkpoint"] == fits.FORMAT == 3
        doc[field] = value
        json.dump(doc, open(file, "w"))
    with pytest.raises(RunDamaged, match="do not match its digest") as e:
        store.read_state(None)
    assert "\n" not in str(e.value) and CHECKPOINT in str(e.value)
    older = _committed(cls, tmp_path / "older")
    _as_older_format(older, 2)
    step, state = older.read_state("key")
    assert step == 2 and state["info"] == {"n": 2}


def test_the_held_out_log_is_appended_beside_the_checkpoint_and_read_back(tmp_path):
    """log_heldout appends JSON lines into an existing fit checkpoint folder only (the folder stays a fit
    store, so repair and remove still recognise it); read_heldout gives them back in order and leaves out a
    torn last line (a writer killed mid-append)."""
    from daskgp.runs.fits import HELDOUT

    store = _committed(FitCheckpoint, tmp_path / "fit")
    assert store.read_heldout() == []
    assert not FitCheckpoint(tmp_path / "absent").log_heldout({"step": 1})
    assert not (tmp_path / "absent").exists()
    for k in (10, 20):
        assert store.log_heldout({"step": k, "seconds": k / 10, "test_rmse": 1.0 / k})
    assert is_fit_store(store.path)
    with open(tmp_path / "fit" / HELDOUT, "a") as f:
        f.write('{"step": 30, "seco')  # torn
    assert store.read_heldout() == [{"step": 10, "seconds": 1.0, "test_rmse": 0.1},
                                    {"step": 20, "seconds": 2.0, "test_rmse": 0.05}]
    store.remove()
    assert not (tmp_path / "fit").exists()


def test_core_files_knows_a_fit_checkpoints_own_files():
    """``core.files`` (below ``runs``, so it cannot import it) lists a fit checkpoint's own file names to
    recognise the folder as daskgp's; a name missing there made a checkpoint with a held-out log unwritable
    over (stop 52). The two lists must agree."""
    from daskgp.core.files import _FIT_ARRAYS, _FIT_FILES
    from daskgp.runs.fitarrays import ARRAY_FILE
    from daskgp.runs.fits import _OWN

    assert set(_FIT_FILES) == _OWN
    name = "daskgp-array-3-latent.npy"  # an array file's name, as both sides know it
    assert ARRAY_FILE.fullmatch(name) and name.startswith(_FIT_ARRAYS)


def test_an_array_too_large_for_the_json_is_streamed_beside_it_digested_and_pruned(tmp_path):
    """Issue 58: a state's large array (the GPLVM's q(x_i) for every row) is written row block by row block
    to its own file, named by the commit with its digest; read back block by block, equal; the files the
    last two commits name are kept, older ones removed; an altered, truncated or missing file is one line
    naming it; the folder is still a fit checkpoint (found, repaired, removed as one)."""
    rng = np.random.default_rng(0)
    full = rng.standard_normal((1000, 4))
    blocks = [(0, 300), (300, 650), (650, 1000)]
    path = tmp_path / "ckpt"
    store = GPLVMCheckpoint(path)
    refs = []
    with store.writing():
        for step in (1, 2, 3):
            ref = store.write_array("latent", step, (full[a:b] + step for a, b in blocks), full.shape)
            store.commit("key", step, {"latent": ref})
            refs.append(ref)
    names = sorted(e for e in os.listdir(path) if e.startswith("daskgp-array-"))
    assert names == ["daskgp-array-2-latent.npy", "daskgp-array-3-latent.npy"]  # the last two commits'
    assert is_fit_store(path) and written_kind(str(path)) == GPLVMCheckpoint.kind
    _, state = store.read_state("key")
    got = np.concatenate(list(store.read_array(state["latent"], [(0, 10), (10, 999), (999, 1000)])))
    np.testing.assert_array_equal(got, full + 3)
    # one block at a time: a block's rows, not the array
    first = next(iter(store.read_array(state["latent"], [(5, 7)])))
    np.testing.assert_array_equal(first, full[5:7] + 3)
    # a block that does not fit, or too few rows, is refused before anything is named by a commit
    with store.writing():
        with pytest.raises(ValueError, match="does not fit"):
            store.write_array("latent", 4, [np.zeros((10, 3))], full.shape)
        with pytest.raises(ValueError, match="held 10 rows"):
            store.write_array("latent", 4, [np.zeros((10, 4))], full.shape)
    assert not any(e.startswith("daskgp-array-4") for e in os.listdir(path))
    file = path / "daskgp-array-3-latent.npy"
    raw = file.read_bytes()
    file.write_bytes(raw[:-8] + b"\0" * 8)  # altered
    with pytest.raises(RunDamaged, match="digest"):
        store.read_array(state["latent"], blocks)
    file.write_bytes(raw[:-8])  # truncated
    with pytest.raises(RunDamaged, match="truncated"):
        store.read_array(state["latent"], blocks)
    file.unlink()
    with pytest.raises(RunDamaged, match="cannot be read"):
        store.read_array(state["latent"], blocks)
    with pytest.raises(RunDamaged, match="outside its folder"):
        store.read_array({**state["latent"], "daskgp_array": "../daskgp-array-3-latent.npy"}, blocks)
    store.remove()
    assert not path.exists()
