"""Teach-time views are spread shared by all classes, not shots: memory, D, gate and folds hold the shots."""

from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.classifiers.blended import fit_blended_head
from cbcl_pr_ros.core.memory import ClusterMemory
from cbcl_pr_ros.core.view_spread import MAX_RANK, ViewSpread

from .conftest import fingerprint

D = 24


def _data(seed: int = 0, n: int = 5, k: int = 4, view_noise: float = 0.05):
    """Three non-negative classes (like pooled CNN features), and k tight views of every shot."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 4, (3, D))
    shots = {f"c{i}": np.maximum(centres[i] + rng.normal(0, 0.6, (n, D)), 0) for i in range(3)}
    views = {c: np.maximum(x[:, None, :] + rng.normal(0, view_noise, (n, k, D)), 0) for c, x in shots.items()}
    return shots, views


def test_views_leave_memory_d_and_gate_to_the_shots_and_widen_the_shared_covariance():
    shots, views = _data()
    plain = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    plain.teach_increment(shots)
    viewed = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    viewed.teach_increment(shots, views)
    assert [ci.shots for ci in viewed.class_info()] == [5, 5, 5]
    assert fingerprint(viewed) != fingerprint(plain)  # the head changed ...
    for a, b in zip(viewed.memory.items(), plain.memory.items()):  # ... the memory did not
        np.testing.assert_array_equal(a[1].means, b[1].means)
    assert viewed.distance_threshold_ == plain.distance_threshold_
    assert viewed._served.gate.distance_threshold == plain._served.gate.distance_threshold
    assert viewed.view_spread_.images == 15 and plain.view_spread_.images == 0
    # the head is the blended head of the shots' memory with the views' covariance added to the pooled one
    t = viewed.transform
    spread = ViewSpread.empty(D)
    for c in shots:
        spread = spread.with_views(t(views[c].reshape(-1, D)).reshape(views[c].shape))
    ref = fit_blended_head(viewed.memory, 0.5, 1.0, shared=spread.covariance())
    x = t(_data(seed=3)[0]["c1"])
    np.testing.assert_allclose(viewed._served.head.logits(x), ref.logits(x), rtol=1e-5, atol=1e-3)


def test_view_spread_is_the_mean_covariance_of_each_images_views():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (2, 5, 6)), rng.normal(0, 2, (3, 5, 6))
    spread = ViewSpread.empty(6).with_views(a).with_views(b)

    def cov(v):
        dev = v - v.mean(axis=0)
        return dev.T @ dev / (len(v) - 1)

    want = sum(cov(v) for v in [*a, *b]) / 5
    np.testing.assert_allclose(spread.covariance(), want, rtol=2e-3, atol=2e-3)  # float16-exact factor
    assert spread.images == 5
    with pytest.raises(ValueError, match="k >= 2"):
        spread.with_views(a[:, :1])  # one view of an image measures no spread


def test_the_shared_factor_keeps_a_fixed_rank():
    rng = np.random.default_rng(1)
    spread = ViewSpread.empty(200)
    for _ in range(4):
        spread = spread.with_views(rng.normal(0, 1, (6, 8, 200)))  # 4 x 6 x 8 deviations
    assert spread.factor.shape == (200, MAX_RANK) and spread.images == 24
    assert spread.nbytes() == 200 * MAX_RANK * 4


def test_views_survive_a_file_forget_and_rename(tmp_path):
    shots, views = _data()
    learner = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    learner.teach_increment(shots, views)
    learner.rename("c1", "mug")
    loaded = CBCLPRLearner.load(learner.save(tmp_path / "m.cbclpr"))
    x = _data(seed=5)[0]["c2"]
    np.testing.assert_array_equal(loaded.predict_scores(x), learner.predict_scores(x))
    assert loaded.view_spread_.images == 15
    loaded.forget("mug")  # the spread is the camera's, not the class's
    assert loaded.view_spread_.images == 15


@pytest.mark.parametrize("bad, match", [
    ({"c0": np.zeros((4, 2, D))}, "must be"),  # one row of views per shot
    ({"c0": np.zeros((5, 2, D + 1))}, "must be"),
    ({"c0": np.zeros((5, D))}, "must be"),
    ({"c0": np.zeros((5, 1, D))}, "k>=2"),
    ({"zz": np.zeros((5, 2, D))}, "not among"),
    ({"c0": np.full((5, 2, D), np.nan)}, "finite|NaN|nan"),
])
def test_bad_views_are_refused_and_change_nothing(bad, match):
    shots, views = _data()
    learner = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    learner.teach_increment(shots, views)
    before = fingerprint(learner), learner.view_spread_
    with pytest.raises(ValueError, match=match):
        learner.teach_increment({"c0": shots["c0"]}, bad)
    assert (fingerprint(learner), learner.view_spread_) == before
