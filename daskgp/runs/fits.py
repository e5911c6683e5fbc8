"""A fit's checkpoint — SGPR, ADVGP, GPC or the GPLVM — committed as the chains' runs are
(:mod:`daskgp.runs.commit`): a folder holding one JSON commit of plain data with a digest, the commit before
it, and the writer's lock while a fit writes it.

``PATH/`` (``daskgp sgpr --out OUT`` uses ``OUT.checkpoint``):

* ``daskgp-checkpoint.json``: ``{"daskgp_kind": <the family's kind>, "daskgp_fit_checkpoint": FORMAT,
  "key": <the data and settings it belongs to>, "step": <finished steps>, "digest": <BLAKE2b of the kind,
  format, key, step and state>, "state": <the family's state as plain data (:mod:`daskgp.core.plaindata`)>}``,
  replaced atomically after
  every step: an interruption, SIGKILL included, loses at most the step in progress;
* ``daskgp-checkpoint.prev.json``: the commit before it (``daskgp repair PATH`` falls back to it when the
  last one is damaged);
* ``daskgp-writer.lock``: while a fit writes it (:mod:`daskgp.runs.lock`): a second fit on the same
  checkpoint is refused while the first lives;
* ``daskgp-heldout.jsonl`` (optional): held-out measurements the command line appends while the fit runs, one
  JSON object a line (:meth:`FitStore.log_heldout`), for readers such as the dashboard; not the fit's state;
* ``daskgp-array-STEP-NAME.npy`` (optional): an array too large for a JSON state — the GPLVM's q(x_i) for
  every row — written row block by row block (:meth:`FitStore.write_array`: the writer never holds it whole)
  before the commit that names it; the commit holds its reference, shape, dtype and BLAKE2b digest, checked
  when it is read back (:meth:`FitStore.read_array`, block by block). Only the arrays the last two commits
  name are kept.

Reading never writes and never executes anything. A missing, truncated, torn, altered or foreign file is one
line naming it (:class:`daskgp.runs.commit.RunDamaged`, a ValueError), with what ``daskgp repair`` can do.
What a state holds, and its shapes, is the family's to check (:meth:`FitStore.read_state` returns it decoded).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil

import numpy as np

from ..core.files import MARK, written_kind
from ..core.plaindata import encode
from .commit import CHECKPOINT, PREVIOUS, RunDamaged, RunError, commit, read_document
from .fitarrays import ARRAY_FILE, read_array, write_array
from .lock import LOCK_NAME, RunLocked, acquire, clear_for_repair, lock_info, release

__all__ = ["FitStore", "FORMAT", "MARKER", "repair_fit", "is_fit_store"]

FORMAT = 3
MARKER = "daskgp_fit_checkpoint"
# format 3 (issue 56) digests everything a resume reads — the kind, the format, the key the state belongs to,
# the finished steps and the state — where format 2 digested the state alone (an altered step count or key
# was read as written); format 2 is still read, its digest checked as it was written.
# format 2 (issue 32) carries the noise of SGPR, ADVGP and the GPLVM as log σ²_n where format 1 had log β:
# a format-1 state of theirs would resume with the noise inverted, so only the kinds without a noise read it
_FORMAT_1_KINDS = {"daskgp.gpc-checkpoint"}
_DIGESTED = (MARK, MARKER, "key", "step", "state")  # a format-3 commit's digested fields
HELDOUT = "daskgp-heldout.jsonl"  # held-out measurements the command line appends while the fit runs
_OWN = {CHECKPOINT, PREVIOUS, LOCK_NAME, HELDOUT}


def _state_digest(encoded) -> str:
    body = json.dumps(encoded, sort_keys=True, allow_nan=False, separators=(",", ":"))
    return hashlib.blake2b(body.encode("utf-8"), digest_size=16).hexdigest()


def _digest(doc: dict) -> str:
    """The digest a commit of ``doc``'s format carries: every field a resume reads (format 3), or the state
    alone (formats 1 and 2, as they were written)."""
    if doc.get(MARKER) == FORMAT:
        return _state_digest({k: doc.get(k) for k in _DIGESTED})
    return _state_digest(doc.get("state"))


def _leftover(entry: str) -> bool:
    """A temporary a crash can leave behind (an atomic write's, a taken-over lock's, an array's)."""
    return entry.startswith((f"{CHECKPOINT}.tmp-", f"{PREVIOUS}.tmp-", f"{LOCK_NAME}.stale-",
                             f"{LOCK_NAME}.tmp")) or (ARRAY_FILE.match(entry) is not None
                                                      and ".npy.tmp-" in entry)


def _own(entry: str) -> bool:
    return entry in _OWN or ARRAY_FILE.fullmatch(entry) is not None or _leftover(entry)


def is_fit_store(path) -> bool:
    """Whether ``path`` is a folder holding only a fit checkpoint's files, whatever their state (a fit killed
    before its first commit leaves its lock alone there)."""
    path = os.fspath(path)
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    entries = os.listdir(path)
    return bool(entries) and all(_own(e) for e in entries)


class FitStore:
    """The checkpoint folder of one fit at ``path``; a family subclasses it with its ``kind`` (the marker
    :func:`daskgp.core.files.written_kind` reads) and turns its state into plain data and back.

    A fit writes through :meth:`writing` (``with ckpt.writing(): …``, holding the lock, creating the folder
    and removing it again when nothing was committed) and :meth:`commit`; a resume reads :meth:`read_state`.
    ``legacy_suffix``: the one file daskgp <= 0.3 wrote for this family at ``path + legacy_suffix``, never
    resumed: :meth:`check_legacy` says so in one line."""

    kind = ""
    what = "fit"  # the family's name in messages
    legacy_suffix = ""

    def __init__(self, path):
        self.path = os.path.abspath(os.fspath(path)).rstrip("/")
        self._last: bytes | None = None
        self._writing = False

    # ---------------------------------------------------------------------------------- what is there
    def exists(self) -> bool:
        return os.path.lexists(self.path)

    def check_legacy(self) -> None:
        """One line when only a checkpoint of daskgp <= 0.3 is there (a single file): it cannot be resumed."""
        for old in ([self.path] if os.path.isfile(self.path) else []) + \
                ([self.path + self.legacy_suffix] if self.legacy_suffix else []):
            if os.path.isfile(old) and not os.path.isdir(self.path):
                found = written_kind(old)
                made = "a checkpoint of daskgp <= 0.3" if found else "not a daskgp checkpoint folder"
                raise RunError(f"{old} is {made}; this daskgp keeps a fit's checkpoint in a folder and "
                               f"cannot resume it: start the {self.what} fit afresh")

    def _check_folder(self) -> None:
        if not os.path.lexists(self.path):
            self.check_legacy()
            raise FileNotFoundError(f"no checkpoint to resume at {self.path}")
        self.check_legacy()
        if os.path.islink(self.path):
            raise RunError(f"{self.path} is a symbolic link; daskgp never reads or writes a checkpoint "
                           "through one")
        if not is_fit_store(self.path):
            raise RunError(f"{self.path} is not a daskgp fit checkpoint (it holds other files); nothing in "
                           "it is read or removed")

    def _problem(self, doc) -> str | None:
        if not isinstance(doc, dict):
            return "not a JSON object"
        if doc.get(MARKER) not in (FORMAT, 2) and not (doc.get(MARKER) == 1 and self.kind in _FORMAT_1_KINDS):
            if doc.get(MARKER) == 1:
                return (f"fit checkpoint format 1 (the noise as a precision, before 0.4); this daskgp reads "
                        f"formats 2 and {FORMAT}, so it cannot be resumed: start the fit afresh")
            return (f"fit checkpoint format {doc.get(MARKER)!r}; this daskgp reads formats 2 and {FORMAT}"
                    if MARKER in doc else "not a fit checkpoint")
        if doc.get(MARK) != self.kind:
            return f"a {doc.get(MARK)!r} checkpoint, not a {self.kind!r} one"
        if not isinstance(doc.get("key"), str) or type(doc.get("step")) is not int or doc["step"] < 0:
            return "its key or step count is malformed"
        if "state" not in doc or doc.get("digest") != _digest(doc):
            return "its contents do not match its digest: altered or torn"
        return None

    def _read(self, name: str = CHECKPOINT) -> tuple[dict, bytes]:
        return read_document(self.path, name, self._problem, decoded=("state", "its state"))

    def _hint(self) -> str:
        try:
            prev, _ = self._read(PREVIOUS)
        except RunDamaged:
            return f"daskgp repair cannot rebuild it: start the {self.what} fit afresh"
        return (f"'daskgp repair {self.path}' restores the previous commit ({prev['step']} steps; the last "
                "one is lost)")

    def read_state(self, key: str | None = None) -> tuple[int, dict]:
        """(finished steps, the state as committed) of a fit of ``key`` (its data and settings; None: a
        caller that checks what the state belongs to itself, from the state). Raises
        FileNotFoundError without a checkpoint, :class:`RunDamaged` (one line naming the file) when it is
        damaged, foreign or of daskgp <= 0.3, :class:`RunError` when it belongs to other data or settings."""
        self._check_folder()
        try:
            doc, _ = self._read()
        except RunDamaged as e:
            raise RunDamaged(f"{e}; {self._hint()}") from None
        if key is not None and doc["key"] != key:
            raise RunError(f"{self.path} was written for other data or settings: start afresh without "
                           "resuming")
        return doc["step"], doc["state"]

    def iterations(self) -> int:
        """The finished steps the checkpoint holds (0 without one, or with a damaged one)."""
        try:
            self._check_folder()
            return int(self._read()[0]["step"])
        except (OSError, RunError):
            return 0

    # ---------------------------------------------------------------------------------- writing
    @contextlib.contextmanager
    def writing(self):
        """Hold the checkpoint while a fit writes it: create the folder (or take an existing checkpoint of
        this kind), take the writer's lock (:class:`daskgp.runs.lock.RunLocked` while another live process
        holds it), and on the way out release it; a folder this fit created and never committed to is
        removed."""
        created = not os.path.lexists(self.path)
        if created:
            self.check_legacy()
            os.mkdir(self.path)
        elif not is_fit_store(self.path) and os.listdir(self.path):
            raise RunError(f"{self.path} is not a daskgp fit checkpoint (it holds other files); choose "
                           "another checkpoint path")
        try:
            acquire(self.path)
        except BaseException:
            if created:
                shutil.rmtree(self.path, ignore_errors=True)
            raise
        self._writing, self._last = True, None
        if not created:  # a resumed fit: its next commit keeps the current one as the previous
            try:
                self._last = self._read()[1]
            except RunDamaged:
                pass
        try:
            yield self
        finally:
            self._writing = False
            release(self.path)
            if created and self._last is None:
                shutil.rmtree(self.path, ignore_errors=True)

    def commit(self, key: str, step: int, state: dict) -> None:
        """Commit the fit's ``state`` (plain data and numeric arrays) after ``step`` finished steps."""
        if not self._writing:
            raise RuntimeError("commit a fit's checkpoint inside its writing() block")
        encoded = encode(state)
        doc = {MARK: self.kind, MARKER: FORMAT, "key": key, "step": int(step), "state": encoded}
        doc["digest"] = _digest(doc)
        raw = json.dumps(doc, allow_nan=False).encode("utf-8")
        keep = set(ARRAY_FILE.findall(raw.decode("utf-8")))
        if self._last is not None:
            keep |= set(ARRAY_FILE.findall(self._last.decode("utf-8")))
        commit(self.path, raw, self._last)
        self._last = raw
        for entry in os.listdir(self.path):  # arrays neither of the two commits names: superseded
            if ARRAY_FILE.fullmatch(entry) and entry not in keep:
                os.remove(os.path.join(self.path, entry))

    # ---------------------------------------------------------------------------------- arrays
    def write_array(self, name: str, step: int, blocks, shape, dtype=np.float64) -> dict:
        """Write an array of ``shape`` (rows first) from ``blocks``, its row blocks in order, beside the
        commits as ``daskgp-array-STEP-NAME.npy``; returns its reference (plain data, digest included) for
        the state :meth:`commit` commits next (:func:`daskgp.runs.fitarrays.write_array`)."""
        if not self._writing:
            raise RuntimeError("write a fit's arrays inside its writing() block")
        return write_array(self.path, name, step, blocks, shape, dtype)

    def read_array(self, ref: dict, edges, verify: bool = True):
        """The array a state's ``ref`` names, as an iterator over its row blocks ``edges``, its digest
        checked first (:func:`daskgp.runs.fitarrays.read_array`); RunDamaged naming the file otherwise."""
        try:
            return read_array(self.path, ref, edges, verify)
        except RunDamaged as e:
            raise RunDamaged(f"{e}; {self._hint()}") from None

    def log_heldout(self, record: dict) -> bool:
        """Append one held-out measurement of the fit writing this checkpoint — plain numbers and lists: its
        step, wall seconds, metrics — as a JSON line of ``daskgp-heldout.jsonl``, for readers such as the
        dashboard; not part of the fit's state (a resume neither reads nor needs it). Only into a checkpoint
        folder that exists (False otherwise)."""
        if not is_fit_store(self.path):
            return False
        with open(os.path.join(self.path, HELDOUT), "a", encoding="utf-8") as f:
            f.write(json.dumps(record, allow_nan=False) + "\n")
        return True

    def read_heldout(self) -> list[dict]:
        """The held-out log's records in order (none without one); a line that is not a JSON object — a
        writer killed mid-append leaves its last line torn — is left out."""
        try:
            with open(os.path.join(self.path, HELDOUT), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError):
            return []
        out = []
        for line in lines:
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def remove(self) -> None:
        """Delete the checkpoint (a finished fit's): only a folder of a fit checkpoint's own files."""
        if is_fit_store(self.path) or (os.path.isdir(self.path) and not os.listdir(self.path)):
            info = lock_info(self.path)
            if info is not None and info.state == "live" and not self._writing:
                raise RunLocked(f"{self.path} is being written: {info.describe()}")
            shutil.rmtree(self.path)


def repair_fit(path, *, force: bool = False) -> list[str]:
    """Mend the fit checkpoint at ``path`` in place and say what was done (one line per action): clear a
    stale lock (one from another host or unreadable only with ``force``; never a live writer's), restore the
    previous commit when the last is damaged, remove leftover temporaries. Raises :class:`RunError` when it
    cannot be mended."""
    path = os.fspath(path).rstrip("/")
    if not is_fit_store(path):
        raise RunError(f"{path} is not a daskgp fit checkpoint")
    actions = clear_for_repair(path, force)
    store = FitStore(path)
    # the kind the folder was written as: the previous commit's (a last commit naming another kind is the
    # odd one out), else the last's
    store.kind = _commit_kind(path, PREVIOUS) or _commit_kind(path, CHECKPOINT) or "daskgp.fit-checkpoint"
    acquire(path)
    try:
        try:
            last, _ = store._read()
            actions_ok = f"{path} is intact: {last['step']} steps committed"
        except RunDamaged as e:
            try:
                prev, raw = store._read(PREVIOUS)
            except RunDamaged as e2:
                raise RunDamaged(f"{e}, and so is the previous one ({e2}); daskgp repair cannot rebuild "
                                 "them: start the fit afresh") from None
            commit(path, raw, None)
            actions.append(f"{e}: restored the previous commit ({prev['step']} steps)")
            actions_ok = None
        for leftover in glob.glob(os.path.join(glob.escape(path), "*")):
            if _leftover(os.path.basename(leftover)):
                os.remove(leftover)
                actions.append(f"removed the leftover {os.path.basename(leftover)}")
    finally:
        release(path)
    if not actions and actions_ok:
        actions.append(f"{actions_ok}; nothing to repair")
    return actions


def _commit_kind(path: str, name: str) -> str | None:
    """The kind a commit file names, or None when it is unreadable."""
    try:
        with open(os.path.join(path, name), "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    kind = doc.get(MARK) if isinstance(doc, dict) else None
    return kind if isinstance(kind, str) else None
