import os
import signal
from pathlib import Path

import numpy as np
import pytest

# Tests read the real data in ../shared/data through the project's loader unless told otherwise.
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
if not os.environ.get("DASKGP_DATA") and _SHARED.is_dir():
    os.environ["DASKGP_DATA"] = str(_SHARED)
elif os.environ.get("DASKGP_DATA"):  # relative to where pytest started; tests run commands in other folders
    os.environ["DASKGP_DATA"] = os.path.abspath(os.environ["DASKGP_DATA"])

# A test run started in the background of a non-interactive shell (a CI script's `cmd &`) inherits SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler in it or in any subprocess it starts: every
# Ctrl-C test would see its command run to the end. A handler here is reset to the default in each child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The files whose tests take minutes on CI's 2 cores, longest first (seconds per file measured on a full CI
# run with --durations=0, 2026-11-27), so that under `pytest -n 2 --dist loadfile --no-loadscope-reorder`
# (the Makefile) the two processes start on the longest files and the many short ones fill in beside them at
# the end, instead of one long file running alone at the end. xdist's default reorder sorts files by their
# number of tests and ignores this order: the Makefile turns it off. Within a file the order is unchanged.
LONG_FIRST = ("tests/test_estimator_checks.py",  # 1,779 s
              "tests/gpc/test_classifier.py",  # 777
              "tests/test_first_contact.py",  # 701
              "tests/mcmc/test_chains.py",  # 575
              "tests/mcmc/test_posterior_at_scale.py",  # 568
              "tests/test_fault_injection.py",  # 520
              "tests/gpc/test_binary_sets.py",  # 439
              "tests/mcmc/test_run_interruptions.py",  # 385
              "tests/advgp/test_estimator.py",  # 374
              "tests/sparse/test_sgpr.py",  # 351
              "tests/exact/test_marginal.py",  # 315
              "tests/exact/test_mode.py",  # 262
              "tests/mcmc/test_runstore.py",  # 253
              "tests/mcmc/test_layout.py",  # 252
              "tests/mcmc/test_samplers.py",  # 247
              "tests/test_notebooks.py")  # 229


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
