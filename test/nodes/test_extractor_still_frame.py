"""The extractor's object path keeps a still picture's frame vector and recomputes a changed one.

A still camera at a table costs the backbone only the crops due for a refresh (issue 25); the whole
frame's vector is kept while every cell of the picture stays the same (perception/crop_reuse.py), and
one new object in view makes it computed again. The node's callbacks are called directly (no spin):
this checks the wiring, the rules are unit-tested in test/perception/test_crop_reuse.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perception"))
D = 6


class _CountingBackbone:
    """A backbone that says how many pictures each call got (its vector: the picture's mean colour)."""
    name, feature_dim, runtime, preprocessing_id = "tiny", D, "numpy", "mean-rgb"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def extract(self, rgbs: list) -> np.ndarray:
        self.batches.append(len(rgbs))
        return np.stack([np.resize(np.asarray(r, np.float32).mean(axis=(0, 1)), D) for r in rgbs])


def _messages(rgb: np.ndarray, depth: np.ndarray, i: int):
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.conversions import rgb_to_image_msg

    m = rgb_to_image_msg(rgb, Header(frame_id="camera"))
    m.header.stamp.sec, m.header.stamp.nanosec = 100 + i // 30, (i % 30) * 33_333_333
    d = Image(height=depth.shape[0], width=depth.shape[1], encoding="16UC1", step=2 * depth.shape[1])
    d.header = m.header
    d.data = np.clip(np.round(depth * 1000), 0, 65535).astype("<u2").tobytes()
    return m, d


def test_a_still_picture_keeps_its_frame_vector_and_a_change_recomputes_it():
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import CameraInfo
    from synthetic import SynthObject, scene

    from cbcl_pr_ros.nodes.feature_extractor import FeatureExtractorNode

    rgb, depth, k, _ = scene([SynthObject((100, 250, 220, 370), 0.06, (200, 40, 40)),
                              SynthObject((380, 260, 500, 380), 0.05, (40, 60, 200))], width=640, height=480)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=0)  # nothing is published to a peer: the domain is not used
    try:
        backbone = _CountingBackbone()
        node = FeatureExtractorNode(backbone, context=ctx, parameter_overrides=[
            Parameter("detect_objects", value="on"), Parameter("no_frame_warning_s", value=0.0),
            Parameter("crop_refresh_frames", value=100)])
        sent = []
        node.features_pub.publish = sent.append  # what the learner would get, without a peer
        node.objects_pub.publish = lambda msg: None
        node._on_camera_info(CameraInfo(height=480, width=640, k=[k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0]))
        rng = np.random.default_rng(0)
        for i in range(4):  # the same picture with sensor noise
            noisy = np.clip(rgb + rng.normal(0, 2.0, rgb.shape), 0, 255).astype(np.uint8)
            m, d = _messages(noisy, depth, i)
            node._on_depth(d)
            node._process(m)
        first = backbone.batches[0]
        assert first >= 3, backbone.batches  # the frame and at least two objects
        assert backbone.batches[1:] == [], f"a still picture went through the backbone again: {backbone.batches}"
        assert len(sent) == 4 and all(np.array_equal(s.values, sent[0].values) for s in sent)
        changed = rgb.copy()
        changed[10:40, 10:40] = 255  # something new in a corner, away from both objects
        m, d = _messages(changed, depth, 4)
        node._on_depth(d)
        node._process(m)
        assert len(backbone.batches) == 2 and backbone.batches[1] >= 1, backbone.batches
        assert not np.array_equal(sent[-1].values, sent[0].values)  # the frame's vector was computed again
        node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
