"""The local cluster's workers: started with the malloc setting that keeps the solvers' temporaries off
mmap (see daskgp.compute.cluster.MMAP_THRESHOLD) and distributed's own single-threaded BLAS."""

import os

import pytest

from daskgp.compute.cluster import MMAP_THRESHOLD, close_client, get_client, worker_environ


def _env():
    return os.environ.get("MALLOC_MMAP_THRESHOLD_"), os.environ.get("OMP_NUM_THREADS")


def test_worker_environ_keeps_distributed_defaults():
    env = worker_environ()
    assert env["MALLOC_MMAP_THRESHOLD_"] == MMAP_THRESHOLD and str(env["OMP_NUM_THREADS"]) == "1"


@pytest.mark.cluster
def test_local_cluster_workers_get_the_environment():
    client = get_client(n_workers=1)
    try:
        assert set(client.run(_env).values()) == {(str(MMAP_THRESHOLD), "1")}
    finally:
        close_client(client)
