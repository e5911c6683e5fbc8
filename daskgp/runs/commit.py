"""The commit every daskgp run and fit checkpoint shares: one JSON document of plain data
(:mod:`daskgp.core.plaindata`: nothing in it is ever unpickled or executed), replaced atomically, the one
before it kept beside it, so that ``daskgp repair`` can fall back one commit when the last is damaged.

A folder holds ``daskgp-checkpoint.json`` (the commit), ``daskgp-checkpoint.prev.json`` (the one before) and,
while a process writes, ``daskgp-writer.lock`` (:mod:`daskgp.runs.lock`). What else a folder holds, and
what its document says, belongs to the store: the chains' draws (:mod:`daskgp.runs.draws`) or a fit's state
(:mod:`daskgp.runs.fits`).
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from ..core.files import write_atomically
from ..core.plaindata import decode

__all__ = ["RunError", "RunDamaged", "CHECKPOINT", "PREVIOUS", "read_document", "commit", "digest"]

CHECKPOINT = "daskgp-checkpoint.json"
PREVIOUS = "daskgp-checkpoint.prev.json"


class RunError(ValueError):
    """A run or a fit checkpoint on disk cannot be used as asked; the message is one line saying why and
    what to do."""


class RunDamaged(RunError):
    """Part of a run or a fit checkpoint on disk is missing, torn or altered."""


def digest(values: np.ndarray) -> str:
    """A 128-bit BLAKE2b of an array's dtype, shape and bytes. (Not :func:`daskgp.core.files.array_digest`,
    its twin for saved models: that one hashes a 0-d array's shape as (1,), so the two differ there, and
    either change would refuse the runs or models already written.)"""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{values.dtype.str}{values.shape}".encode())
    h.update(np.ascontiguousarray(values).tobytes())
    return h.hexdigest()


def read_document(folder: str, name: str = CHECKPOINT, problem=None, decoded: tuple[str, str] | None = None
                  ) -> tuple[dict, bytes]:
    """(the parsed JSON document ``folder/name``, its raw bytes); RunDamaged naming the file when it is
    missing, unreadable, empty, truncated, not JSON, or when ``problem(doc)`` returns a description.
    ``decoded = (key, what)``: ``doc[key]`` is plain data (:mod:`daskgp.core.plaindata`) decoded in place;
    RunDamaged saying "``what`` is malformed" when it cannot be."""
    file = os.path.join(folder, name)
    try:
        with open(file, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise RunDamaged(f"{file} is missing") from None
    except OSError as e:
        raise RunDamaged(f"{file} cannot be read ({e.strerror})") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        what = "empty" if not raw else "truncated" if raw[:1] == b"{" else "not JSON"
        raise RunDamaged(f"{file} is damaged ({what}: {str(e)[:60]})") from None
    found = problem(doc) if problem is not None else None
    if found is not None:
        raise RunDamaged(f"{file} is damaged ({found})")
    if decoded is not None:
        key, what = decoded
        try:
            doc[key] = decode(doc[key])
        except (ValueError, TypeError, AttributeError, RecursionError) as e:
            raise RunDamaged(f"{file} is damaged ({what} is malformed: {str(e)[:80]})") from None
    return doc, raw


def commit(folder: str, raw: bytes, last: bytes | None) -> None:
    """Commit the document ``raw``: the current commit ``last`` (its bytes, when there is one) becomes the
    previous one, then the new one replaces it atomically. A crash between the two leaves the last commit in
    place (and as the previous one): nothing committed is lost."""
    if last is not None:
        write_atomically(os.path.join(folder, PREVIOUS), last)
    write_atomically(os.path.join(folder, CHECKPOINT), raw)
