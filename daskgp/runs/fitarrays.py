"""Arrays too large for a fit checkpoint's JSON state (:mod:`daskgp.runs.fits`) — the GPLVM's q(x_i) for every
row — kept as ``.npy`` files beside its commits: written row block by row block, so the writer never holds the
array whole, and read back block by block after a BLAKE2b digest over the whole file (the commit that names
the file holds its reference: file, shape, dtype, digest). Reading never writes and never executes anything
(``.npy`` headers are parsed, never unpickled)."""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np

from ..core.files import replaced_atomically
from .commit import CHECKPOINT, RunDamaged

__all__ = ["ARRAY_KEY", "ARRAY_FILE", "write_array", "read_array"]

ARRAY_KEY = "daskgp_array"  # a state's reference to an array file of the folder
ARRAY_FILE = re.compile(r"daskgp-array-[0-9]+-[A-Za-z0-9_]+\.npy")  # the files' names
_READ_BYTES = 8 << 20  # an array file is digested this many bytes at a time


def write_array(folder: str, name: str, step: int, blocks, shape, dtype=np.float64) -> dict:
    """Write an array of ``shape`` (rows first) from ``blocks``, an iterable of its row blocks in order
    (each (b, *shape[1:])), as ``folder/daskgp-array-STEP-NAME.npy`` (an .npy file, written to a temporary
    and renamed once whole and synced): memory one block, whatever the array's size. Returns its reference
    — plain data for the state that names it — with its digest. ``name``: letters, digits, underscores.
    ValueError when the blocks do not make the shape (nothing is left behind)."""
    file = f"daskgp-array-{int(step)}-{name}.npy"
    if not ARRAY_FILE.fullmatch(file):
        raise ValueError(f"array name {name!r}: letters, digits and underscores only")
    dtype, shape = np.dtype(dtype), tuple(int(k) for k in shape)
    digest, rows = hashlib.blake2b(digest_size=16), 0
    with replaced_atomically(os.path.join(folder, file)) as tmp, open(tmp, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                 "fortran_order": False, "shape": shape})
        for block in blocks:
            a = np.ascontiguousarray(block, dtype=dtype)
            if a.shape[1:] != shape[1:] or rows + a.shape[0] > shape[0]:
                raise ValueError(f"a block of shape {a.shape} does not fit the array {shape} at row {rows}")
            data = a.tobytes()
            digest.update(data)
            f.write(data)
            rows += a.shape[0]
        if rows != shape[0]:
            raise ValueError(f"the blocks held {rows} rows of the array's {shape[0]}")
    return {ARRAY_KEY: file, "shape": list(shape), "dtype": dtype.str, "digest": digest.hexdigest()}


def read_array(folder: str, ref: dict, edges, verify: bool = True):
    """The array ``ref`` names in ``folder``, as an iterator over its row blocks ``edges`` [(start, stop),
    …] in order (one block in memory at a time), once its digest is checked over the whole file — here,
    before this returns (``verify`` False: a caller that checked it already). Raises :class:`RunDamaged`
    (one line naming the file) when it is missing, of another shape or dtype than its reference says, or
    altered."""
    try:
        file = os.path.join(folder, ref[ARRAY_KEY])
        shape, dtype, want = tuple(int(k) for k in ref["shape"]), np.dtype(ref["dtype"]), ref["digest"]
    except (KeyError, TypeError, ValueError):
        raise RunDamaged(f"{folder}/{CHECKPOINT} holds a malformed array reference") from None
    if not ARRAY_FILE.fullmatch(os.path.basename(file)) or os.path.dirname(file) != folder:
        raise RunDamaged(f"{folder}/{CHECKPOINT} names an array outside its folder")
    try:
        f = open(file, "rb")
    except OSError as e:
        raise RunDamaged(f"{file} cannot be read ({e.strerror}): the commit that names it is "
                         "damaged") from None
    with f:
        try:
            version = np.lib.format.read_magic(f)
            header = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                      else np.lib.format.read_array_header_2_0(f))
        except (ValueError, OSError) as e:
            raise RunDamaged(f"{file} is not an .npy file ({e})") from None
        if (tuple(header[0]), header[2]) != (shape, dtype) or header[1]:
            raise RunDamaged(f"{file} holds {header[0]} {header[2]}, not the {shape} {dtype} its commit "
                             "names")
        start = f.tell()
        digest, left = hashlib.blake2b(digest_size=16), int(np.prod(shape)) * dtype.itemsize
        while left and verify:
            piece = f.read(min(left, _READ_BYTES))
            if not piece:
                raise RunDamaged(f"{file} is truncated")
            digest.update(piece)
            left -= len(piece)
        if verify and digest.hexdigest() != want:
            raise RunDamaged(f"{file} does not match its digest: altered or torn")
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize

    def blocks():
        with open(file, "rb") as g:
            for a, b in edges:
                g.seek(start + a * row_bytes)
                yield np.frombuffer(g.read((b - a) * row_bytes), dtype=dtype).reshape((b - a, *shape[1:]))
    return blocks()
