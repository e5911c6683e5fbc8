"""The workers' tree sum (daskgp.compute.reductions) against the same sum made in one place: results computed
in groups (a task per worker) and summed in chunk order have the bits of a task per chunk and the tree."""

import numpy as np
import pytest

from daskgp.compute.reductions import sum_groups_in_tree_order, sum_in_tree_order, tree_sum


def _parts(k=13, seed=0):
    # magnitudes over twelve decades, so the order of the additions shows in the last bits
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(50) * 10.0 ** rng.integers(-6, 6, 50) for _ in range(k)]


def test_the_tree_order_on_the_workers_and_in_one_place_agree_bit_for_bit(client):
    parts = _parts()
    on_workers = tree_sum(client, client.scatter(parts)).result()
    np.testing.assert_array_equal(sum_in_tree_order(parts), on_workers)
    # the power of the check: a left-to-right sum of the same parts differs in the last bits
    left = parts[0].copy()
    for p in parts[1:]:
        left = left + p
    assert not np.array_equal(left, on_workers)
    np.testing.assert_allclose(left, on_workers, rtol=1e-12, atol=1e-3)


@pytest.mark.parametrize("groups", [[list(range(13))], [[0, 2, 4, 6, 8, 10, 12], [1, 3, 5, 7, 9, 11]],
                                    [[12, 3], [5, 0, 1], [2, 4, 6, 7, 8, 9, 10, 11]]])
def test_grouped_results_sum_in_chunk_order_whatever_the_grouping(groups):
    parts = _parts(seed=1)
    order = [i for g in groups for i in g]
    got = sum_groups_in_tree_order(order, *[[parts[i] for i in g] for g in groups])
    np.testing.assert_array_equal(got, sum_in_tree_order(parts))


def test_a_group_that_lost_a_result_is_refused():
    parts = _parts(3)
    with pytest.raises(ValueError, match="2 results for 3 chunks"):
        sum_groups_in_tree_order([0, 1, 2], parts[:2])
