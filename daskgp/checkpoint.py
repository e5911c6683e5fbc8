"""A run on disk: draws appended to a zarr store chunk by chunk, with an atomic commit marker.

Layout of ``run.zarr`` (zarr format 3, readable with ``xarray.open_datatree(path, engine="zarr")``):

* root attributes: the run's configuration (JSON strings), written once;
* ``posterior``: one (chain, draw) array per parameter, natural units;
* ``sample_stats``: the per-iteration records, (chain, draw).

Appending a block grows the arrays one by one, which is not atomic; so the sidecar ``run.zarr.checkpoint``
(pickle, replaced atomically with ``os.replace`` after every array has grown) holds the committed number of
draws and each chain's sampler state. :func:`repair` trims torn appends back to the committed length, so an
interrupted run loses at most the block in flight.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil

import numpy as np
import xarray as xr
import zarr

__all__ = ["DrawStore", "repair", "read_checkpoint", "checkpoint_path"]


def checkpoint_path(store: str) -> str:
    return os.fspath(store).rstrip("/") + ".checkpoint"


def read_checkpoint(store: str) -> dict:
    """The last committed checkpoint: {'n_draws', 'states', 'elapsed', ...}. Raises FileNotFoundError."""
    path = checkpoint_path(store)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{store} has no checkpoint ({path} is missing): not a daskgp run, or it "
                                f"was interrupted before its first checkpoint")
    with open(path, "rb") as f:
        return pickle.load(f)


def _arrays(group: zarr.Group):
    for _, a in group.arrays():
        yield a
    for _, g in group.groups():
        yield from _arrays(g)


def repair(store: str, dim: str = "draw") -> int:
    """Trim every array along ``dim`` to the committed length (undo a torn append). Returns that length."""
    n = read_checkpoint(store)["n_draws"]
    for a in _arrays(zarr.open_group(os.fspath(store), mode="r+")):
        dims = list(a.metadata.dimension_names or a.attrs.get("_ARRAY_DIMENSIONS", []))
        if dim in dims and a.shape[dims.index(dim)] != n:
            shape = list(a.shape)
            shape[dims.index(dim)] = n
            a.resize(tuple(shape))
    return n


class DrawStore:
    """Writes (chain, draw) blocks of a run to ``path``.

    ``create`` starts a new store (refusing to overwrite an existing one unless asked) with root ``attrs``;
    ``append(posterior, stats, checkpoint)`` writes one block — dicts of (chains, B) arrays — then commits
    ``checkpoint`` (a picklable dict; its 'n_draws' is set here) atomically.
    """

    def __init__(self, path: str, chunk: int):
        self.path, self.chunk = os.fspath(path).rstrip("/"), int(chunk)
        self.n_draws = 0

    @classmethod
    def create(cls, path: str, attrs: dict, chunk: int, overwrite: bool = False) -> DrawStore:
        path = os.fspath(path).rstrip("/")
        if os.path.exists(path) or os.path.exists(checkpoint_path(path)):
            if not overwrite:
                raise FileExistsError(f"{path} already exists: resume it, or choose another output "
                                      f"(or overwrite it explicitly)")
            shutil.rmtree(path, ignore_errors=True)
            if os.path.exists(path):
                os.remove(path)
            if os.path.exists(checkpoint_path(path)):
                os.remove(checkpoint_path(path))
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"the output folder {parent} does not exist")
        root = zarr.open_group(path, mode="w")
        root.attrs.update({k: json.dumps(v) for k, v in attrs.items()})
        return cls(path, chunk)

    @classmethod
    def open(cls, path: str) -> tuple[DrawStore, dict]:
        """Reopen after an interruption: repair, then return the store and its checkpoint."""
        path = os.fspath(path).rstrip("/")
        if not os.path.isdir(path):
            raise FileNotFoundError(f"no run at {path}")
        ckpt = read_checkpoint(path)
        repair(path)
        store = cls(path, ckpt["chunk"])
        store.n_draws = ckpt["n_draws"]
        return store, ckpt

    def attrs(self) -> dict:
        return {k: json.loads(v) for k, v in zarr.open_group(self.path, mode="r").attrs.items()}

    def append(self, posterior: dict, stats: dict, checkpoint: dict) -> None:
        first = self.n_draws == 0
        B = next(iter(posterior.values())).shape[1]
        for group, block in (("posterior", posterior), ("sample_stats", stats)):
            C = next(iter(block.values())).shape[0]
            ds = xr.Dataset({k: (("chain", "draw"), np.asarray(v)) for k, v in block.items()},
                            coords={"chain": np.arange(C), "draw": np.arange(self.n_draws, self.n_draws + B)})
            if first:
                ds.to_zarr(self.path, group=group, mode="w", consolidated=False,
                           encoding={k: {"chunks": (C, self.chunk)} for k in block})
            else:
                ds.to_zarr(self.path, group=group, append_dim="draw", consolidated=False)
        self.n_draws += B
        checkpoint = {**checkpoint, "n_draws": self.n_draws, "chunk": self.chunk}
        tmp = checkpoint_path(self.path) + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(checkpoint, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, checkpoint_path(self.path))  # the commit: after every array has grown
