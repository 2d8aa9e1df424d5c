"""The extractor's object path keeps a still picture's frame vector and recomputes a changed one.

A still camera at a table costs the backbone only the crops due for a refresh (issue 25); the whole
frame's vector is kept while every cell of the picture stays the same (objects/reuse.py), and
one new object in view makes it computed again. The node's callbacks are called directly (no spin):
this checks the wiring, the rules are unit-tested in test/objects/test_reuse.py.
"""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")


def test_a_still_picture_keeps_its_frame_vector_and_a_change_recomputes_it():
    from extractor_table import MeanColourBackbone, extractor, show, two_objects

    rgb, depth, k = two_objects()
    backbone = MeanColourBackbone()
    with extractor(backbone, k, crop_refresh_frames=100) as node:
        sent = []
        node.features_pub.publish = sent.append  # what the learner would get, without a peer
        rng = np.random.default_rng(0)
        for i in range(4):  # the same picture with sensor noise
            show(node, np.clip(rgb + rng.normal(0, 2.0, rgb.shape), 0, 255).astype(np.uint8), depth, i)
        first = backbone.batches[0]
        assert first >= 3, backbone.batches  # the frame and at least two objects
        assert backbone.batches[1:] == [], f"a still picture went through the backbone again: {backbone.batches}"
        assert len(sent) == 4 and all(np.array_equal(s.values, sent[0].values) for s in sent)
        changed = rgb.copy()
        changed[10:40, 10:40] = 255  # something new in a corner, away from both objects
        show(node, changed, depth, 4)
        assert len(backbone.batches) == 2 and backbone.batches[1] >= 1, backbone.batches
        assert not np.array_equal(sent[-1].values, sent[0].values)  # the frame's vector was computed again


def test_a_frame_whose_frame_id_a_learner_refuses_costs_no_backbone_pass():
    """A camera frame named by more than 256 characters: every learner refuses its vectors, so the
    extractor skips it before the backbone (it used to spend a pass and publish it); the next frame
    goes through."""
    from extractor_table import MeanColourBackbone, extractor, messages, two_objects

    rgb, depth, k = two_objects()
    backbone = MeanColourBackbone()
    with extractor(backbone, k) as node:
        sent = []
        node.features_pub.publish = sent.append
        m, d = messages(rgb, depth, 0)
        m.header.frame_id = "c" * 10_000
        node._on_depth(d)
        with pytest.raises(ValueError, match="frame_id has 10000 characters"):
            node._process(m)  # the worker logs it, throttled, and takes the next frame
        assert backbone.batches == [] and sent == []
        m, d = messages(rgb, depth, 1)
        node._on_depth(d)
        node._process(m)
        assert len(sent) == 1 and backbone.batches
