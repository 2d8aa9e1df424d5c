"""Cluster memory: exact budget K, proportional reduction, plain removal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cbcl_pr_ros.core.memory import ClusterMemory, allocate_reduction


def _taught(rng, k=None, reduction="kmeans", mode="diagonal", n_classes=4, n=30, d=3):
    mem = ClusterMemory(d, mode, k, reduction)
    for c in range(n_classes):
        mem = mem.with_taught({f"c{c}": rng.normal(c * 10, 3, (n, d))}, 1.5)
    return mem


@pytest.mark.parametrize("reduction", ["kmeans", "remove"])
@pytest.mark.parametrize("mode", ["full", "diagonal"])
def test_budget_never_exceeded_and_samples_kept(rng, reduction, mode):
    mem = _taught(rng, 12, reduction, mode)
    assert mem.n_clusters <= 12
    assert all(mem[c].n_clusters >= 1 for c in mem.classes)
    if reduction == "kmeans":  # merging keeps every member counted
        assert all(mem[c].n_samples == 30 for c in mem.classes)


def test_unlimited_memory_keeps_all(rng):
    assert _taught(rng).n_clusters > 12


def test_budget_smaller_than_classes_is_refused_and_memory_unchanged(rng):
    mem = _taught(rng, 4, n_classes=4)
    with pytest.raises(ValueError, match="K=4"):
        mem.with_taught({"new": np.zeros((2, 3))}, 1.0)
    assert mem.classes == ("c0", "c1", "c2", "c3")


def test_kmeans_merge_is_count_weighted(rng):
    mem = ClusterMemory(1, "full").with_taught({"a": np.array([[0.0]] * 9 + [[10.0]])}, 1.0)
    red = mem.reduced_to(1)
    np.testing.assert_allclose(red["a"].means[0], [1.0])  # (9*0 + 1*10) / 10, not the unweighted 5
    assert red["a"].counts.tolist() == [10]


def test_remove_drops_the_smallest_clusters():
    x = np.array([[0.0]] * 5 + [[10.0]] + [[20.0]] * 3)
    mem = ClusterMemory(1, "diagonal", reduction="remove").with_taught({"a": x}, 1.0)
    red = mem.reduced_to(2)
    assert sorted(red["a"].counts.tolist()) == [3, 5]


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=12), budget_extra=st.integers(0, 100))
def test_allocation_reaches_budget_exactly(sizes, budget_extra):
    named = {f"c{i}": s for i, s in enumerate(sizes)}
    budget = len(sizes) + budget_extra
    excess = max(sum(sizes) - budget, 0)
    take = allocate_reduction(named, excess)
    after = {c: named[c] - take[c] for c in named}
    assert all(v >= 1 for v in after.values())
    assert sum(after.values()) <= max(budget, len(sizes))
    assert sum(take.values()) == excess


@settings(max_examples=15, deadline=None)
@given(k=st.integers(3, 20), seed=st.integers(0, 1000))
def test_k_never_exceeded_after_each_teach(k, seed):
    rng = np.random.default_rng(seed)
    mem = ClusterMemory(2, "diagonal", k)
    for c in range(3):
        mem = mem.with_taught({f"c{c}": rng.normal(0, 5, (int(rng.integers(1, 15)), 2))}, 1.0)
        assert mem.n_clusters <= k
