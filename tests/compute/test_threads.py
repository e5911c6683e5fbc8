"""BLAS threads chosen for the size of a dense solve: one thread up to SMALL_DENSE_N, the default beyond."""

from threadpoolctl import threadpool_info

from daskgp.compute.threads import SMALL_DENSE_N, blas_threads_for


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_small_solves_run_on_one_thread_and_large_ones_keep_the_default():
    import numpy as np  # noqa: F401  (loads the BLAS whose threads are counted)

    before = _blas_threads()
    assert before, "no BLAS found by threadpoolctl"
    with blas_threads_for(1030):
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before  # restored
    with blas_threads_for(SMALL_DENSE_N + 1):
        assert _blas_threads() == before
