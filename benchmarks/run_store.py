"""What the run store costs: writing a block (draws + commit) and opening a run, against the previous format.

    python benchmarks/run_store.py [--blocks 200] [--house-blocks 20]

The chain states and records are synthetic, but shaped exactly like those of a real SGLD run (4 chains, 100
draws per block, 3 parameters, the sampler's 8 per-iteration records, probes (n, 4) and warm starts (n, 5)
per chain): n = 1,030 (concrete) over 200 blocks = 20,000 draws per chain, and n = 22,784 (house_8L) over
20 blocks. Sampling itself is not timed: only the store.

Side by side in one run:
* **daskgp format 2** (:class:`daskgp.runs.draws.DrawStore`): zarr arrays written directly, a BLAKE2b
  digest per block, consolidated metadata, the checkpoint as JSON (base64 arrays) with the previous one kept,
  both fsynced; opening = read-only read of the committed prefix with every block verified (:func:`open_run`).
* **format 1** (as daskgp wrote runs before): ``xarray.Dataset.to_zarr(append_dim="draw")`` per group and a
  pickled checkpoint, fsynced; opening = ``xr.open_datatree(...).load()`` + ``pickle.load`` (which executes
  whatever the file says: the reason for format 2).

Writes benchmarks/results/run_store.json. ``ratio`` = format-2 seconds per block / format-1 seconds per block
on the house_8L-sized states; this machine has 2 cores and is noisy, so medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import median_seconds  # noqa: E402

C, B, P, N_PROBES = 4, 100, 3, 4
NAMES = ["variance", "lengthscale", "noise"]


def _block(rng, start):
    post = {nm: np.exp(rng.normal(size=(C, B))) for nm in NAMES}
    stats = {"step": np.full((C, B), 0.01), "frozen": np.ones((C, B), bool),
             "ratio": np.full((C, B), np.nan), "cg_iterations": rng.integers(3, 9, (C, B)).astype(float),
             "n_products": rng.integers(5, 12, (C, B)).astype(float), "seconds": rng.random((C, B)),
             "warmup": np.zeros((C, B), bool), "diverged": np.zeros((C, B), bool)}
    return post, stats


def _states(rng, n, t):
    """Chain states of the sizes an SGLD run commits (the typed states' plain data)."""
    from daskgp.exact.posterior import ProbeState
    from daskgp.mcmc.samplers import SGLDState
    from daskgp.mcmc.segments import ChainState

    def chain(c):
        sampler = SGLDState(rng.normal(size=P), t, 0.01, rng.normal(size=(100, P)), np.random.default_rng(c))
        probes = ProbeState(rng.choice([-1.0, 1.0], size=(n, N_PROBES)), rng.normal(size=(n, N_PROBES + 1)),
                            np.random.default_rng(100 + c))
        return ChainState(sampler, probes).to_dict()

    return [chain(c) for c in range(C)]


def _format2(folder, n, blocks, rng):
    from daskgp.runs.draws import DrawStore

    store = DrawStore.create(os.path.join(folder, "v2.zarr"), {"config": {}, "param_names": NAMES}, B)
    times = []
    for k in range(blocks):
        post, stats = _block(rng, k * B)
        extra = {"states": _states(rng, n, (k + 1) * B), "elapsed": float(k), "messages": {}}
        t0 = time.perf_counter()
        store.append(post, stats, extra)
        times.append(time.perf_counter() - t0)
    store.close()
    return store.path, times


def _format1(folder, n, blocks, rng):
    """The previous writer, verbatim in what it did per block."""
    import xarray as xr
    import zarr

    path = os.path.join(folder, "v1.zarr")
    zarr.open_group(path, mode="w").attrs.update({"config": "{}"})
    times = []
    for k in range(blocks):
        post, stats = _block(rng, k * B)
        ckpt = {"states": _states(rng, n, (k + 1) * B), "elapsed": float(k), "messages": {}}
        t0 = time.perf_counter()
        for group, block in (("posterior", post), ("sample_stats", stats)):
            ds = xr.Dataset({key: (("chain", "draw"), v) for key, v in block.items()},
                            coords={"chain": np.arange(C), "draw": np.arange(k * B, (k + 1) * B)})
            if k == 0:
                ds.to_zarr(path, group=group, mode="w", consolidated=False,
                           encoding={key: {"chunks": (C, B)} for key in block})
            else:
                ds.to_zarr(path, group=group, append_dim="draw", consolidated=False)
        tmp = path + ".checkpoint.tmp"
        with open(tmp, "wb") as f:
            pickle.dump({**ckpt, "n_draws": (k + 1) * B, "chunk": B}, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path + ".checkpoint")
        times.append(time.perf_counter() - t0)
    return path, times


def _open_v1(path):
    import xarray as xr

    with open(path + ".checkpoint", "rb") as f:
        pickle.load(f)  # trusted here: our own file, written above
    return xr.open_datatree(path, engine="zarr", consolidated=False).load()


def _case(name, n, blocks):
    from daskgp.mcmc.diagnostics import open_run
    from daskgp.runs.draws import CHECKPOINT

    folder = tempfile.mkdtemp(prefix="daskgp-store-bench-")
    try:
        p2, t2 = _format2(folder, n, blocks, np.random.default_rng(0))
        p1, t1 = _format1(folder, n, blocks, np.random.default_rng(0))
        open2, open1 = median_seconds(lambda: open_run(p2), 5), median_seconds(lambda: _open_v1(p1), 5)
        row = {"case": name, "n": n, "chains": C, "draws_per_block": B, "blocks": blocks,
               "draws_per_chain": blocks * B,
               "format2_s_per_block_median": float(np.median(t2[1:])),
               "format1_s_per_block_median": float(np.median(t1[1:])),
               "format2_checkpoint_mb": os.path.getsize(os.path.join(p2, CHECKPOINT)) / 2**20,
               "format1_checkpoint_mb": os.path.getsize(p1 + ".checkpoint") / 2**20,
               "format2_open_s": open2, "format1_open_s": open1}
        row["ratio_write"] = row["format2_s_per_block_median"] / row["format1_s_per_block_median"]
        row["ratio_open"] = open2 / open1
        print(json.dumps(row))
        return row
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=200, help="blocks of 100 draws, concrete-sized states")
    ap.add_argument("--house-blocks", type=int, default=20, help="blocks of 100 draws, house_8L-sized states")
    ap.add_argument("--out", default=str(HERE / "results" / "run_store.json"))
    a = ap.parse_args()
    rows = [_case("concrete-sized states", 1030, a.blocks),
            _case("house_8L-sized states", 22_784, a.house_blocks)]
    result = {"benchmark": "run store: write a block, open a run", "rows": rows,
              "ratio": rows[1]["ratio_write"],
              "note": "synthetic states shaped like a 4-chain SGLD run; sampling not timed; medians; "
                      "2-core shared machine"}
    from _common import write_results  # stamped with its provenance (benchmarks/claims.py)
    write_results(Path(Path(a.out)), result)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
