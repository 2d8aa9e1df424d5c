"""The object stream's frame step without ROS: classify a frame's objects in one batch, then track.

``ObjectStream.classify_and_track`` is what the learner node's ``object_features`` callback calls;
the node only converts the message and publishes the tracks it returns.
"""
from __future__ import annotations

import numpy as np

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.perception import Proposal
from cbcl_pr_ros.service.controller import LearnerController
from cbcl_pr_ros.service.object_stream import ObjectFrame, ObjectStream

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


def test_a_frame_without_objects_tracks_nothing():
    c = _controller()
    c.teach("mug", np.random.default_rng(1).normal(3, 0.2, (8, D)))
    version, tracks = _stream().classify_and_track(_frame(np.zeros((0, D))), c, 1.0)
    assert version == c.model_version and tracks == []
