"""The temperature's folds hold out whole views: copies of one view (jittered crops, still frames) are
not evidence of how a new view scores, so they neither give held-out rows nor shrink the temperature."""

from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig, calibration
from cbcl_pr_ros.core import learner as learner_module
from cbcl_pr_ros.core.calibration import held_out_fold_logits, view_groups
from cbcl_pr_ros.core.classifiers.gaussian import PooledMoments
from cbcl_pr_ros.core.memory import ClusterMemory


def _views(rng, centre, n_views=1, copies=5, d=8, spread=1.0, jitter=0.01):
    """``n_views`` views around ``centre``, each ``copies`` near-identical vectors (view after view)."""
    heads = centre + rng.normal(0.0, spread, (n_views, d))
    return np.concatenate([h + rng.normal(0.0, jitter, (copies, d)) for h in heads])


def test_view_groups_chain_copies_and_keep_views_apart(rng):
    x = _views(rng, np.zeros(8), n_views=3, copies=4)
    groups = view_groups(x, 0.2)
    assert [g.tolist() for g in groups] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    # a chain of small steps is one view although its ends are far apart
    chain = np.arange(6, dtype=float)[:, None] * np.array([[0.1, 0.0]])
    assert len(view_groups(chain, 0.15)) == 1 and len(view_groups(chain, 0.05)) == 6


def test_view_groups_without_a_distance_are_one_shot_each(rng):
    x = np.repeat(rng.normal(size=(1, 4)), 3, axis=0)  # exact duplicates
    assert [g.tolist() for g in view_groups(x, 0.0)] == [[0], [1], [2]]


def test_copies_of_one_view_give_no_held_out_rows(rng):
    shots = {f"c{i}": _views(rng, np.full(8, 3.0 * i)) for i in range(3)}
    mem = ClusterMemory(8).with_taught(shots, 1e9)
    pm = PooledMoments.from_memory(mem)
    logits, labels = held_out_fold_logits(mem, pm, 0.5, 1.0, shots, 1e9, same_view=0.5)
    assert logits.shape == (0, 3) and labels.size == 0
    _, every = held_out_fold_logits(mem, pm, 0.5, 1.0, shots, 1e9)  # each copy a fold of its own
    assert every.size == 15


def test_folds_leave_out_whole_views(rng, monkeypatch):
    monkeypatch.setattr(calibration, "SHOT_EXPONENT", 0.0)
    shots = {f"c{i}": _views(rng, np.full(8, 3.0 * i), n_views=2, copies=3) for i in range(3)}
    mem = ClusterMemory(8).with_taught(shots, 1e9)
    pm = PooledMoments.from_memory(mem)
    logits, labels = held_out_fold_logits(mem, pm, 0.5, 1.0, shots, 1e9, same_view=0.5)
    assert labels.tolist() == [0, 1, 2, 0, 1, 2]  # one row per view, fold by fold
    assert np.isfinite(logits).all()
    # each class's own column wins for the view it lost (views lie far closer to their class than to others)
    assert (logits.argmax(axis=1) == labels).all()


def _learner(shots: dict) -> CBCLPRLearner:
    # a backbone without a distance prior estimates D from the first shots: copies would set it, so it is given
    learner = CBCLPRLearner(LearnerConfig(seed=0, distance_threshold=0.4), backbone="syn", feature_dim=8)
    learner.teach_increment(shots)
    return learner


def test_copies_of_one_view_keep_the_prior_temperature(rng, monkeypatch):
    centres = rng.normal(0.0, 1.0, (3, 8))
    copies = {f"c{i}": _views(rng, c, copies=5, spread=0.0) for i, c in enumerate(centres)}
    learner = _learner(copies)
    assert learner.temperature_weight_ == 0.0  # no held-out view: the fit did not run on copies
    monkeypatch.setattr(learner_module, "SAME_VIEW", 0.0)  # each copy its own fold: copies were rows
    assert _learner(copies).temperature_weight_ == 15
    # distinct views do give held-out rows (the benchmark sets' path keeps its fitted temperature)
    views = {f"c{i}": _views(rng, c, n_views=5, copies=1, spread=1.0) for i, c in enumerate(centres)}
    assert _learner(views).temperature_weight_ > 0


def test_one_view_prior_is_softer_than_the_plain_prior(rng, monkeypatch):
    copies = {f"c{i}": _views(rng, c, copies=5, spread=0.0) for i, c in enumerate(rng.normal(0.0, 1.0, (3, 8)))}
    monkeypatch.setattr(calibration, "ONE_VIEW_TEMPERATURE_SCALE", 1.0)
    plain = _learner(copies).temperature_
    monkeypatch.setattr(calibration, "ONE_VIEW_TEMPERATURE_SCALE", 4.0)
    assert _learner(copies).temperature_ == pytest.approx(4.0 * plain)


def test_calibration_is_deterministic(rng):
    shots = {f"c{i}": _views(rng, c, n_views=2, copies=3, spread=1.0) for i, c in enumerate(rng.normal(0.0, 1.0, (3, 8)))}
    a, b = _learner(shots), _learner(shots)
    assert a.temperature_ == b.temperature_ and a.temperature_weight_ == b.temperature_weight_
    probe = rng.normal(0.0, 1.0, (6, 8))
    assert [p.confidence for p in a.predict(probe)] == [p.confidence for p in b.predict(probe)]
