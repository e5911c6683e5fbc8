"""Files that are either complete or absent: write to a temporary name beside the target, flush to disk,
then rename over it (``os.replace`` is atomic within one filesystem), so a reader or a crash never sees a
half-written file."""

from __future__ import annotations

import os
import shutil
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
    untouched. ``suffix`` ends the temporary name (``np.savez`` appends ``.npz`` to names without it). ``tmp``
    may also be a directory (a zarr store): an old directory at ``path`` is then moved aside first and removed
    once the new one is in place."""
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}{suffix}"
    old = f"{path}.old-{os.getpid()}"
    try:
        yield tmp
        _fsync(tmp)
        if os.path.isdir(tmp) and os.path.isdir(path):
            os.replace(path, old)  # a directory cannot replace a non-empty one in one step
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, old):
            if os.path.isdir(leftover):
                shutil.rmtree(leftover)
            elif os.path.exists(leftover):
                os.remove(leftover)


def write_atomically(path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (see :func:`replaced_atomically`)."""
    with replaced_atomically(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
