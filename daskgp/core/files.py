"""Files that are either complete or absent: write to a temporary name beside the target, flush to disk,
then rename over it (``os.replace`` is atomic within one filesystem), so a reader or a crash never sees a
half-written file."""

from __future__ import annotations

import os
from contextlib import contextmanager

__all__ = ["replaced_atomically", "write_atomically"]


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replaced_atomically(path, suffix: str = ""):
    """``with replaced_atomically("out.nc") as tmp: write(tmp)`` — ``path`` is replaced by what was written
    to ``tmp`` only when the block ends without an exception; otherwise ``tmp`` is removed and ``path`` is
    untouched. ``suffix`` ends the temporary name (``np.savez`` appends ``.npz`` to names without it)."""
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}{suffix}"
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_atomically(path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (see :func:`replaced_atomically`)."""
    with replaced_atomically(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
