"""Agg-Var clustering: the paper's rule, incremental extension, exact statistics, invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from cbcl_pr_ros.core.clustering import ClassClusters, agg_var


def test_strict_threshold_opens_new_cluster_at_exactly_d():
    r = agg_var(np.array([[0.0], [1.0]]), 1.0)  # distance == D is not < D
    assert r.counts.tolist() == [1, 1]
    r = agg_var(np.array([[0.0], [0.999]]), 1.0)
    assert r.counts.tolist() == [2]


def test_nearest_centroid_within_d_is_updated_count_weighted():
    x = np.array([[0.0], [0.4], [0.2], [10.0], [0.3]])
    r = agg_var(x, 1.0)
    assert r.counts.tolist() == [4, 1]
    np.testing.assert_allclose(r.centroids[0], [(0.0 + 0.4 + 0.2 + 0.3) / 4])
    assert r.assignment.tolist() == [0, 0, 0, 1, 0]


def test_depends_on_order_like_the_paper():
    x = np.array([[0.0], [0.9], [1.8]])
    assert agg_var(x, 1.0).counts.tolist() == [2, 1]
    assert agg_var(x[::-1], 1.0).counts.tolist() == [2, 1]
    # chain: 0.9 joins 0 (mean .45), 1.8 is 1.35 away -> new cluster; reversed mirrors it
    np.testing.assert_allclose(agg_var(x, 1.0).centroids.ravel(), [0.45, 1.8])


@pytest.mark.parametrize("mode", ["full", "diagonal"])
def test_statistics_are_exact_after_incremental_extension(rng, mode):
    x = rng.normal(0, 1, (30, 6))
    one = ClassClusters.empty(6, mode).extend(x, distance_threshold=100.0)  # one cluster
    inc = ClassClusters.empty(6, mode)
    for part in np.array_split(x, 4):
        inc = inc.extend(part, distance_threshold=100.0)
    assert one.counts.tolist() == inc.counts.tolist() == [30]
    np.testing.assert_allclose(inc.means[0], x.mean(0), atol=1e-5)
    want = np.cov(x.T) if mode == "full" else np.diag(np.diag(np.cov(x.T)))
    np.testing.assert_allclose(inc.covariance(0), want, atol=1e-4)


def test_full_factor_has_rank_at_most_n_minus_1(rng):
    x = rng.normal(0, 1, (5, 1280))
    cc = ClassClusters.empty(1280, "full").extend(x, distance_threshold=1e9)
    assert cc.factors[0].shape == (1280, 4)
    assert cc.nbytes() < 1280 * 1280 * 4 / 50  # far smaller than one dense covariance


def test_merged_cluster_equals_pooled_data(rng):
    a, b = rng.normal(0, 1, (7, 4)), rng.normal(3, 1, (5, 4))
    cc = ClassClusters.empty(4, "full").extend(np.vstack([a, b]), distance_threshold=2.5)
    assert cc.n_clusters >= 2
    merged = cc.merged([np.arange(cc.n_clusters)])
    allx = np.vstack([a, b])
    np.testing.assert_allclose(merged.means[0], allx.mean(0), atol=1e-5)
    np.testing.assert_allclose(merged.covariance(0), np.cov(allx.T), atol=1e-4)


@settings(max_examples=40, deadline=None)
@given(
    x=arrays(np.float64, st.tuples(st.integers(1, 25), st.integers(1, 5)),
             elements=st.floats(-50, 50, allow_nan=False, width=32)),
    dist=st.floats(0.01, 60.0),
    split=st.integers(0, 25),
)
def test_invariants_counts_and_assignment_distance(x, dist, split):
    first = agg_var(x[:split], dist) if split and split < len(x) else None
    rest = x[split:] if first is not None else x
    r = agg_var(rest, dist, None if first is None else first.centroids, None if first is None else first.counts)
    assert r.counts.sum() == len(x)
    assert np.all(r.distance < dist)  # within D of its centroid when it was assigned
    assert np.all(r.counts >= 1)
    cc = ClassClusters.empty(x.shape[1], "full").extend(x, dist)
    assert cc.n_samples == len(x)
    assert all(f.shape[1] <= max(int(n) - 1, 0) for f, n in zip(cc.factors, cc.counts))
