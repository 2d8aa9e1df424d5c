"""Pseudo-rehearsal: modes, counts, singletons, determinism, full covariances sampled correctly."""

from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core.memory import ClusterMemory
from cbcl_pr_ros.core.rehearsal import pseudo_exemplars, sample_counts


def test_few_shot_gives_per_class_even_with_many_singletons(rng):
    # 60 singletons + one big cluster: the released code's count went negative here
    x = np.vstack([rng.normal(0, 0.01, (10, 3)), np.arange(60)[:, None] * 100.0 + np.ones((60, 3))])
    mem = ClusterMemory(3).with_taught({"a": x}, 1.0)
    assert mem["a"].n_clusters == 61
    xs, ys = pseudo_exemplars(mem, "few_shot", np.random.default_rng(0), per_class=40)
    assert xs.shape == (40, 3) and np.all(ys == 0)
    assert sample_counts(mem["a"].counts, 40).min() >= 0


def test_full_mode_replays_m_i_per_cluster(rng):
    mem = ClusterMemory(4).with_taught({"a": rng.normal(0, 1, (17, 4)), "b": rng.normal(9, 1, (5, 4))}, 2.5)
    xs, ys = pseudo_exemplars(mem, "full", np.random.default_rng(0))
    assert np.bincount(ys).tolist() == [17, 5]


@pytest.mark.parametrize("mode", ["full", "diagonal"])
def test_samples_follow_the_stored_gaussian(rng, mode):
    a = rng.normal(0, 1, (60, 3)) @ np.array([[2.0, 0, 0], [1.0, 1.0, 0], [0, 0, 0.2]])
    mem = ClusterMemory(3, mode).with_taught({"a": a}, 1e6)
    xs, _ = pseudo_exemplars(mem, "few_shot", np.random.default_rng(0), per_class=20000)
    np.testing.assert_allclose(xs.mean(0), a.mean(0), atol=0.08)
    want = np.cov(a.T) if mode == "full" else np.diag(np.diag(np.cov(a.T)))
    np.testing.assert_allclose(np.cov(xs.T.astype(np.float64)), want, atol=0.15)


def test_singleton_replays_centroid_or_jitter():
    mem = ClusterMemory(2).with_taught({"a": np.array([[1.0, 2.0]])}, 1.0)
    xs, _ = pseudo_exemplars(mem, "few_shot", np.random.default_rng(0), per_class=5)
    np.testing.assert_allclose(xs, np.tile([1.0, 2.0], (5, 1)))
    xj, _ = pseudo_exemplars(mem, "few_shot", np.random.default_rng(0), per_class=5, singleton_jitter=0.1)
    assert 0 < np.abs(xj - [1.0, 2.0]).max() < 1.0


def test_degenerate_covariance_does_not_crash(rng):
    same = np.ones((4, 8))  # zero covariance
    line = np.outer(np.arange(5), np.ones(8)) * 0.1  # rank-1 covariance
    mem = ClusterMemory(8).with_taught({"s": same, "l": line}, 10.0)
    xs, _ = pseudo_exemplars(mem, "few_shot", np.random.default_rng(0))
    assert np.all(np.isfinite(xs))


def test_seeded_and_deterministic(rng):
    mem = ClusterMemory(5).with_taught({"a": rng.normal(0, 1, (9, 5))}, 2.0)
    a, _ = pseudo_exemplars(mem, "few_shot", np.random.default_rng(7))
    b, _ = pseudo_exemplars(mem, "few_shot", np.random.default_rng(7))
    c, _ = pseudo_exemplars(mem, "few_shot", np.random.default_rng(8))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_bad_mode_refused(rng):
    mem = ClusterMemory(2).with_taught({"a": rng.normal(0, 1, (3, 2))}, 1.0)
    with pytest.raises(ValueError, match="rehearsal mode"):
        pseudo_exemplars(mem, "bogus", np.random.default_rng(0))


def test_full_rehearsal_keeps_replaying_a_class_taught_more_shots(rng):
    """More shots of a known class, full-data rehearsal: the head still trains on what the class held
    (replayed from its clusters) besides the new real shots; it used to get the new shots alone."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    d = 8
    e = np.eye(d)
    first_a = rng.normal(0, 0.3, (50, d)) + 3 * e[0] + 1.5 * e[1]  # near b's side of the a-b boundary
    b = rng.normal(0, 0.3, (50, d)) + 3 * e[1]
    more_a = rng.normal(0, 0.3, (2, d)) - 3 * e[1]  # a second view of a, far from the first
    learner = CBCLPRLearner(LearnerConfig.paper(rehearsal="full", distance_threshold=2.0), backbone="x",
                            feature_dim=d)
    learner.teach_increment({"a": first_a, "b": b})
    assert (learner.predict_scores(first_a).argmax(1) == 0).mean() > 0.95
    learner.teach("a", more_a)
    assert learner.memory["a"].n_samples == 52
    # before: trained on 2 vectors of a against 50 of b, most of a's first view was called b
    assert (learner.predict_scores(first_a).argmax(1) == 0).mean() > 0.95
    assert (learner.predict_scores(b).argmax(1) == 1).mean() > 0.95
