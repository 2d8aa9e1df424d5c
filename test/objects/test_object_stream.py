"""The object stream's frame step without ROS: classify a frame's objects in one batch, then track.

``ObjectStream.classify_and_track`` is what the learner node's ``object_features`` callback calls;
the node only converts the message and publishes the tracks it returns.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.objects.frame import ObjectFrame
from cbcl_pr_ros.objects.stream import ObjectStream
from cbcl_pr_ros.perception import Proposal
from cbcl_pr_ros.service.controller import LearnerController

D = 8


def _controller() -> LearnerController:
    return LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0), backbone="synthetic", feature_dim=d),
                             "synthetic", D)


def _frame(rows: np.ndarray) -> ObjectFrame:
    props = [Proposal((10 + 50 * i, 10, 40 + 50 * i, 40), None, np.array([0.2 * i, 0.0, 0.8]),
                      np.array([0.05] * 3), 0.9) for i in range(len(rows))]
    return ObjectFrame(props, rows.astype(np.float32).reshape(len(rows), D), (480, 640))


def _stream() -> ObjectStream:
    return ObjectStream(window=5, max_missed=3, max_distance_m=0.1)


def test_objects_are_tracked_unlabelled_before_anything_is_taught():
    version, tracks = _stream().classify_and_track(_frame(np.zeros((2, D))), _controller(), 1.0)
    assert version == 0 and len(tracks) == 2
    assert all(t.label == "" and not t.known for t in tracks)


def test_taught_objects_are_labelled_with_the_version_that_answered():
    rng = np.random.default_rng(0)
    c = _controller()
    c.teach("mug", rng.normal(3, 0.2, (8, D)))
    c.teach("box", rng.normal(-3, 0.2, (8, D)))
    stream = _stream()
    version, tracks = stream.classify_and_track(_frame(np.stack([np.full(D, 3.0), np.full(D, -3.0)])), c, 1.0)
    assert version == c.model_version > 0
    assert [t.nearest_label for t in sorted(tracks, key=lambda t: t.proposal.box[0])] == ["mug", "box"]
    first = tracks[0].id
    assert len(stream.track_views(first, 5).rows) == 1  # the track keeps its vector for TeachClass by track


def test_with_one_class_taught_a_stranger_is_reported_unknown_and_unsure():
    """What the Detections (and a script's LearnerClient) show of an object never taught: unknown, and a
    confidence below one half over the track's frames, not the lone class's softmax of 1."""
    rng = np.random.default_rng(3)
    c = _controller()
    c.teach("mug", rng.normal(3, 0.2, (8, D)))
    stream = _stream()
    for t in range(6):
        _, tracks = stream.classify_and_track(_frame(np.stack([np.full(D, 3.0), np.full(D, -3.0)])), c, 1.0 + t)
    mug, stranger = sorted(tracks, key=lambda t: t.proposal.box[0])
    assert mug.known and mug.label == "mug" and mug.confidence > 0.5
    assert not stranger.known and stranger.label == "" and stranger.top_labels == ["mug"]
    assert stranger.confidence < 0.5 and all(s < 0.5 for s in stranger.top_scores)


def test_a_frame_without_objects_tracks_nothing():
    c = _controller()
    c.teach("mug", np.random.default_rng(1).normal(3, 0.2, (8, D)))
    version, tracks = _stream().classify_and_track(_frame(np.zeros((0, D))), c, 1.0)
    assert version == c.model_version and tracks == []


def _joined_frame(rows: np.ndarray, union_row: np.ndarray) -> ObjectFrame:
    """Two touching pieces (a large one on the left, a small one right of it) and their union."""
    from cbcl_pr_ros.objects.frame import ObjectJoins
    from cbcl_pr_ros.objects.pieces import union_proposal

    big = Proposal((100, 100, 200, 200), None, np.array([0.0, 0.0, 0.8]), np.array([0.08, 0.08, 0.08]), 0.9)
    small = Proposal((200, 140, 230, 170), None, np.array([0.06, 0.0, 0.8]), np.array([0.03, 0.03, 0.03]), 0.9)
    joins = ObjectJoins(((0, 1),), (union_proposal(big, small),), union_row.astype(np.float32).reshape(1, D))
    return ObjectFrame([big, small], rows.astype(np.float32).reshape(2, D), (480, 640), joins)


def test_pieces_are_joined_where_their_union_looks_more_like_the_taught_object():
    rng = np.random.default_rng(2)
    c = _controller()
    c.teach("duck", rng.normal(3, 0.2, (8, D)))
    c.teach("box", rng.normal(-3, 0.2, (8, D)))
    head, beak, whole = np.full(D, 3.0), np.full(D, 3.0), np.full(D, 3.0)
    head[: D // 2] += 0.6  # the head alone is a poorer duck than the whole
    beak[D // 2:] -= 4.0  # the beak alone is no duck
    version, tracks = _stream().classify_and_track(_joined_frame(np.stack([head, beak]), whole), c, 1.0)
    assert len(tracks) == 1 and tracks[0].label == "duck" and tracks[0].proposal.box == (100, 100, 230, 200)
    # two ducks side by side: together they are a poorer duck than the larger one alone: two tracks
    apart = whole.copy()
    apart[: D // 2] += 1.5
    version, tracks = _stream().classify_and_track(_joined_frame(np.stack([head, head]), apart), c, 1.0)
    assert len(tracks) == 2


def test_nothing_is_joined_before_anything_is_taught():
    rows = np.stack([np.full(D, 3.0), np.full(D, 3.0)])
    version, tracks = _stream().classify_and_track(_joined_frame(rows, np.full(D, 3.0)), _controller(), 1.0)
    assert len(tracks) == 2


def _said(label: str, distance: float) -> SimpleNamespace:
    """A core Prediction as far as the stream reads it."""
    return SimpleNamespace(label=label, known=True, distance=distance, top_labels=[label], top_scores=[0.9])


def test_a_join_is_held_through_a_near_tie_and_let_go_when_the_union_looks_clearly_worse():
    rows = np.zeros((2, D))
    pieces = [_said("teddy", 0.72), _said("ball", 0.6)]  # the teddy's body and a small piece named otherwise
    held = _stream()
    assert len(held.update(_joined_frame(rows, rows[0]), pieces, 1.0, None, [_said("teddy", 0.70)])) == 1
    tie = [_said("teddy", 0.73)]  # a hair farther than the body alone: the last frame's join holds
    assert len(held.update(_joined_frame(rows, rows[0]), pieces, 1.1, None, tie)) == 1
    assert len(_stream().update(_joined_frame(rows, rows[0]), pieces, 1.1, None, tie)) == 2  # nothing to hold
    assert len(held.update(_joined_frame(rows, rows[0]), pieces, 1.2, None, [_said("teddy", 0.8)])) == 2
    assert len(held.update(_joined_frame(rows, rows[0]), pieces, 1.3, None, tie)) == 2  # let go: not held again


def test_a_stranger_beside_the_taught_object_is_not_named_after_it():
    """One teach, then the taught object and a stranger that the gate alone would accept as it stand
    in one frame: the stranger's track is unknown and unsure (``CBCLPRLearner.seen_together``)."""
    c = LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0, transform="none"), backbone="synthetic",
                                                  feature_dim=d), "synthetic", D)
    c.teach("mug", np.full((1, D), 3.0, np.float32))
    gate = c.learner_._served.gate
    u = np.eye(D)[0]
    mug = np.full(D, 3.0) + 0.3 * gate.distance_threshold * u
    strangers = [np.full(D, 3.0) - t * gate.distance_threshold * u for t in np.linspace(0.05, 3.0, 120)]
    alone = [s for s in strangers if c.classify(s[None]).predictions[0].known
             and np.linalg.norm(s - mug) > 1.0 * gate.distance_threshold]
    assert alone, "no stranger the gate alone accepts lies farther than D_gate from the mug's view"
    _, tracks = _stream().classify_and_track(_frame(np.stack([alone[0], mug])), c, 1.0)
    stranger, taught = sorted(tracks, key=lambda t: t.proposal.box[0])
    assert taught.known and taught.label == "mug"
    assert not stranger.known and stranger.label == "" and stranger.confidence < 0.5
