"""Objects seen together in one view: two that look unlike each other are not both one taught object.

After one teach the gate alone accepts a stranger that looks a little like the taught object; seen
beside the taught object, the stranger is answered unknown (and unsure), while twins of one kind and
the different objects of a class taught from several keep their name.
"""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core import one_place

D = 16


def _learner() -> CBCLPRLearner:
    return CBCLPRLearner(LearnerConfig(seed=0, transform="none"), backbone="synthetic", feature_dim=D)


def _mug_and_stranger(learner: CBCLPRLearner) -> tuple[np.ndarray, np.ndarray]:
    """The taught mug's view and a stranger the gate alone accepts as the mug, farther than
    ``TWIN`` D_gate from that view (found along one direction from the mug's centroid)."""
    gate = learner._served.gate
    centre = np.asarray(gate.centroids[0], np.float64)[0]
    u = np.zeros(D)
    u[0] = 1.0
    mug = centre + 0.3 * gate.distance_threshold * u
    for t in np.linspace(0.05, 3.0, 120):
        stranger = centre - t * gate.distance_threshold * u
        if not learner.predict(stranger[None].astype(np.float32))[0].known:
            break
        if np.linalg.norm(stranger - mug) > one_place.TWIN * gate.distance_threshold:
            return mug.astype(np.float32), stranger.astype(np.float32)
    pytest.fail("no stranger accepted alone lies farther than TWIN D_gate from the mug's view")


@pytest.fixture
def taught():
    rng = np.random.default_rng(0)
    learner = _learner()
    learner.teach("mug", (np.full(D, 2.0) + rng.normal(0, 0.05, (1, D))).astype(np.float32))
    learner.teach("ball", (np.full(D, -2.0) + rng.normal(0, 0.05, (1, D))).astype(np.float32))
    return learner


def test_a_stranger_beside_the_taught_object_is_unknown_and_unsure(taught):
    mug, stranger = _mug_and_stranger(taught)
    x = np.stack([stranger, mug])
    alone = taught.predict(x)
    assert [p.label for p in alone] == ["mug", "mug"]  # the gate alone names both
    together = taught.seen_together(x, alone)
    assert together[1] == alone[1]  # the nearer keeps its answer untouched
    assert together[0].label == "" and not together[0].known and together[0].nearest_label == "mug"
    assert together[0].confidence < 0.5 and together[0].confidence < alone[0].confidence
    assert together[0].top_scores[0] == pytest.approx(together[0].confidence)


def test_the_answer_does_not_depend_on_the_order_of_the_objects(taught):
    mug, stranger = _mug_and_stranger(taught)
    a = taught.seen_together(np.stack([stranger, mug]), taught.predict(np.stack([stranger, mug])))
    b = taught.seen_together(np.stack([mug, stranger]), taught.predict(np.stack([mug, stranger])))
    assert (a[0], a[1]) == (b[1], b[0])


def test_twins_of_one_kind_both_keep_the_name(taught):
    mug, _ = _mug_and_stranger(taught)
    twin = mug.copy()
    twin[1] += 0.2 * taught._served.gate.distance_threshold  # well within TWIN D_gate of the other
    x = np.stack([mug, twin])
    assert [p.label for p in taught.seen_together(x, taught.predict(x))] == ["mug", "mug"]


def test_a_class_taught_from_two_different_objects_names_both():
    rng = np.random.default_rng(1)
    learner = _learner()
    red, blue = np.full(D, 2.0), np.concatenate([np.full(D // 2, 2.0), np.full(D // 2, -2.0)])
    learner.teach("mug", np.concatenate([red + rng.normal(0, 0.05, (3, D)),
                                         blue + rng.normal(0, 0.05, (3, D))]).astype(np.float32))
    learner.teach("ball", (np.full(D, -2.0) + rng.normal(0, 0.05, (3, D))).astype(np.float32))
    x = np.stack([red, blue]).astype(np.float32)
    alone = learner.predict(x)
    assert [p.label for p in alone] == ["mug", "mug"]
    assert [p.label for p in learner.seen_together(x, alone)] == ["mug", "mug"]  # one per cluster


def test_different_classes_and_single_objects_are_left_as_they_are(taught):
    x = np.stack([np.full(D, 2.0), np.full(D, -2.0)]).astype(np.float32)
    alone = taught.predict(x)
    assert taught.seen_together(x, alone) == alone
    assert taught.seen_together(x[:1], alone[:1]) == alone[:1]


def test_the_rule_turned_off_or_nothing_taught_changes_nothing(taught, monkeypatch):
    mug, stranger = _mug_and_stranger(taught)
    x = np.stack([stranger, mug])
    alone = taught.predict(x)
    monkeypatch.setattr(one_place, "TWIN", None)
    assert taught.seen_together(x, alone) == alone
    fresh = _learner()
    none = fresh.predict(x)
    assert fresh.seen_together(x, none) == none


def test_bad_input_is_refused(taught):
    x = np.stack([np.full(D, 2.0), np.full(D, -2.0)]).astype(np.float32)
    alone = taught.predict(x)
    with pytest.raises(ValueError, match="2 predictions for 1 vectors"):
        taught.seen_together(x[:1], alone)
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError):
        taught.seen_together(bad, alone)


def test_more_shots_of_one_view_do_not_shrink_what_counts_as_a_twin():
    """Five near-identical shots take ``D_gate`` to its floor (0.9 of the prior); two objects 0.95
    prior apart, both inside the gate, are twins by the prior all the same."""
    rng = np.random.default_rng(2)
    learner = CBCLPRLearner(LearnerConfig(seed=0, transform="none", distance_prior=1.0), backbone="synthetic",
                            feature_dim=D)
    learner.teach("mug", (np.full(D, 2.0) + rng.normal(0, 0.001, (5, D))).astype(np.float32))
    learner.teach("ball", (np.full(D, -2.0) + rng.normal(0, 0.001, (5, D))).astype(np.float32))
    assert learner._served.gate.distance_threshold == pytest.approx(0.9)  # shrunk to the floor
    u = np.eye(D)[0]
    x = np.stack([np.full(D, 2.0) + 0.45 * u, np.full(D, 2.0) - 0.5 * u]).astype(np.float32)  # 0.95 apart
    alone = learner.predict(x)
    assert [p.label for p in alone] == ["mug", "mug"]
    assert [p.label for p in learner.seen_together(x, alone)] == ["mug", "mug"]
    far = np.stack([np.full(D, 2.0) + 0.5 * u, np.full(D, 2.0) - 0.55 * u]).astype(np.float32)  # 1.05 apart
    assert [p.label for p in learner.seen_together(far, learner.predict(far))] == ["mug", ""]


def test_a_tracks_earlier_view_is_the_taught_object_only_where_nothing_of_its_frame_looks_more_like_it():
    """The guard on a track's earlier views (a tracker may have switched objects): a view is kept where
    no other object of its own frame lies nearer the shot ("frame"); "nearest" against the teach's
    other objects; "twin" within TWIN units; "all" keeps every view."""
    shot = np.zeros((1, 2))
    views = np.array([[0.5, 0.0], [0.0, 2.0], [3.0, 0.0]])
    rivals = [np.array([[2.0, 0.0]]), np.array([[0.0, 1.0]]), np.zeros((0, 2))]
    np.testing.assert_array_equal(one_place.one_object(shot, views, rivals, 1.0, "frame"), [True, False, True])
    np.testing.assert_array_equal(one_place.one_object(shot, views, np.array([[2.5, 0.0]]), 1.0, "nearest"),
                                  [True, True, False])
    np.testing.assert_array_equal(one_place.one_object(shot, views, None, 1.0, "twin"), [True, False, False])
    assert one_place.one_object(shot, views, None, 1.0, "all").all()
    assert one_place.one_object(shot, np.zeros((0, 2)), [], 1.0).shape == (0,)
    with pytest.raises(ValueError):
        one_place.one_object(shot, views, rivals[:2], 1.0, "frame")
    with pytest.raises(ValueError):
        one_place.one_object(shot, views, None, 1.0, "closest")


def test_the_learner_judges_earlier_views_in_its_own_space(taught):
    """``CBCLPRLearner.one_object``: the same guard on raw vectors, bad input refused."""
    mug = np.full((1, D), 2.0, np.float32)
    views = np.stack([np.full(D, 1.9), np.full(D, -1.9)]).astype(np.float32)
    keep = taught.one_object(mug, views, [np.full((1, D), -2.0, np.float32), np.full((1, D), 2.0, np.float32)])
    np.testing.assert_array_equal(keep, [True, False])  # the second: the mug stood elsewhere in its frame
    assert taught.one_object(mug, np.zeros((0, D), np.float32)).shape == (0,)
    with pytest.raises(ValueError):
        taught.one_object(mug, np.full((1, D + 1), 1.0, np.float32), [None])
