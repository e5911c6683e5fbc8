import os
import signal
from pathlib import Path

import numpy as np
import pytest

# Tests read the real data in ../shared/data through the project's loader unless told otherwise.
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
if not os.environ.get("DASKGP_DATA") and _SHARED.is_dir():
    os.environ["DASKGP_DATA"] = str(_SHARED)

# A test run started in the background of a non-interactive shell (a CI script's `cmd &`) inherits SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler in it or in any subprocess it starts: every
# Ctrl-C test would see its command run to the end. A handler here is reset to the default in each child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The files whose tests take 5–12 minutes each on CI's 2 cores go first, so that under `pytest -n 2 --dist
# loadfile` (the Makefile) the many short files fill in beside them instead of one long file running alone at
# the end (it did for 12 minutes). Within a file the order is unchanged; without xdist the order is all that
# changes.
LONG_FIRST = ("tests/test_first_contact.py", "tests/mcmc/test_posterior_at_scale.py",
              "tests/test_estimator_checks.py", "tests/gpc/test_binary_sets.py", "tests/exact/test_mode.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONG_FIRST)))  # stable


@pytest.fixture(scope="session")
def concrete():
    import daskgp

    return daskgp.load("concrete")


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


@pytest.fixture(scope="module")
def client():
    """A real two-worker dask.distributed LocalCluster, its workers started with the library's environment."""
    import dask
    from distributed import Client, LocalCluster

    from daskgp.compute.cluster import worker_environ

    with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ()}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address="127.0.0.1:0", memory_limit="4GiB")
    with cluster, Client(cluster) as c:
        c.wait_for_workers(2, timeout=60)
        yield c
