"""An extractor node fed a synthetic RGB-D table by direct callback calls (no spin, no peer), shared
by the node tests of the extractor's object path."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

# the shared scene maker; TABLE_RGB is for the tests that use this module
from synthetic import TABLE_RGB, SynthObject, scene  # noqa: F401


class MeanColourBackbone:
    """A backbone that keeps what it was given: ``batches`` (pictures per call) and ``pictures``; its
    vector is the picture's mean colour, repeated to ``feature_dim``."""
    name, feature_dim, runtime, preprocessing_id = "tiny", 6, "numpy", "mean-rgb"

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.pictures: list[list[np.ndarray]] = []

    def extract(self, rgbs: list) -> np.ndarray:
        self.batches.append(len(rgbs))
        self.pictures.append([np.asarray(r).copy() for r in rgbs])
        return np.stack([np.resize(np.asarray(r, np.float32).mean(axis=(0, 1)), self.feature_dim) for r in rgbs])


def two_objects() -> tuple[np.ndarray, np.ndarray, Any]:
    """(rgb, depth in metres, intrinsics) of a 640x480 table with a red and a blue box on it."""
    rgb, depth, k, _ = scene([SynthObject((100, 250, 220, 370), 0.06, (200, 40, 40)),
                              SynthObject((380, 260, 500, 380), 0.05, (40, 60, 200))], width=640, height=480)
    return rgb, depth, k


def messages(rgb: np.ndarray, depth: np.ndarray, i: int) -> tuple[Any, Any]:
    """The i-th frame's colour Image and 16UC1 depth Image (one stamp, 30 frames a second)."""
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.conversions import rgb_to_image_msg

    m = rgb_to_image_msg(rgb, Header(frame_id="camera"))
    m.header.stamp.sec, m.header.stamp.nanosec = 100 + i // 30, (i % 30) * 33_333_333
    d = Image(height=depth.shape[0], width=depth.shape[1], encoding="16UC1", step=2 * depth.shape[1])
    d.header = m.header
    d.data = np.clip(np.round(depth * 1000), 0, 65535).astype("<u2").tobytes()
    return m, d


@contextmanager
def extractor(backbone: Any, k: Any, **params: Any) -> Iterator[Any]:
    """A FeatureExtractorNode with ``backbone``, objects on, the camera's intrinsics ``k`` received and
    ``params`` set; its publishers write nowhere (replace ``publish`` to see what it sends)."""
    import rclpy
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import CameraInfo

    from cbcl_pr_ros.nodes.feature_extractor import FeatureExtractorNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=0)  # nothing is published to a peer: the domain is not used
    try:
        node = FeatureExtractorNode(backbone, context=ctx, parameter_overrides=[
            Parameter("detect_objects", value="on"), Parameter("no_frame_warning_s", value=0.0),
            *(Parameter(n, value=v) for n, v in params.items())])
        node.features_pub.publish = lambda msg: None
        node.objects_pub.publish = lambda msg: None
        node._on_camera_info(CameraInfo(height=480, width=640, k=[k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0]))
        try:
            yield node
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)


def show(node: Any, rgb: np.ndarray, depth: np.ndarray, i: int) -> None:
    """Give the node frame ``i``: its depth, then its colour image."""
    m, d = messages(rgb, depth, i)
    node._on_depth(d)
    node._process(m)
