"""A first look at ADVGP's issue-31 default optimiser (Adam per group + natural steps on q(w), stopping rule)
on all flights rows, one seed, before the 3-seed rerun of advgp_flights.py / peers_converged.py:
``python benchmarks/advgp_adam_probe.py [--budget 180] [--seed 0]``. Same split, m = 100, 4 partitions on
2 workers as peers_converged.py's ADVGP part; configurations τ = 0 with whole partitions and τ = 0 with
2,000-row minibatch tasks. Writes benchmarks/results/advgp_adam_probe.json (RMSE curve every 10 s)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from advgp_flights import _advgp, _cluster, _save  # noqa: E402


def main() -> None:
    from daskgp.datasets import load, train_test

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=180.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batches", default="all,2000", help="task sizes to run: all (whole partitions) or rows")
    ap.add_argument("--out", default=str(HERE / "results" / "advgp_adam_probe.json"))
    a = ap.parse_args()
    data = train_test(load("flights"), test_fraction=0.1, seed=a.seed)
    out = {"seed": a.seed, "budget": a.budget, "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "runs": []}
    client = _cluster()
    try:
        for batch in [None if b == "all" else int(b) for b in a.batches.split(",")]:
            r = _advgp(client, data, 100, 0, a.budget, batch, 4, 10.0, seed=a.seed)
            r.pop("delays", None)
            out["runs"].append(r)
            print(f"tau 0 batch {batch}: RMSE {r['final_rmse']:.3f} after {r['seconds']:.0f} s, "
                  f"{r['updates']} updates", flush=True)
            _save(out, Path(a.out))
    finally:
        client.close()


if __name__ == "__main__":
    main()
