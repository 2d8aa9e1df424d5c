"""The extractor takes the camera's pose of a frame's stamp to the proposer (the table's up from gravity).

The node's callbacks are called directly (no spin); the proposer's use of the up direction is
unit-tested in test/objects/test_extract.py and the perception tests.
"""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")


def _pose_msg(i: int, quaternion: tuple[float, float, float, float]):
    from geometry_msgs.msg import PoseStamped

    m = PoseStamped()
    m.header.frame_id = "base"
    m.header.stamp.sec, m.header.stamp.nanosec = 100 + i // 30, (i % 30) * 33_333_333
    m.pose.position.x, m.pose.position.y, m.pose.position.z = 0.0, 0.0, 0.8
    m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w = quaternion
    return m


def test_a_frame_with_a_pose_is_proposed_with_the_fixed_frames_up(monkeypatch):
    from extractor_table import MeanColourBackbone, extractor, show, two_objects

    import cbcl_pr_ros.nodes.feature_extractor as fx
    from cbcl_pr_ros.objects.extract import up_axis

    seen = []
    real = fx.extract_objects

    def recording(rgb, depth, K, pose, *args, **kwargs):
        seen.append(pose)
        return real(rgb, depth, K, pose, *args, **kwargs)

    monkeypatch.setattr(fx, "extract_objects", recording)
    rgb, depth, k = two_objects()
    # an optical frame looking straight down: its z is the base's -z, so the base's up is -z in the camera
    looking_down = (1.0, 0.0, 0.0, 0.0)  # 180° about x
    with extractor(MeanColourBackbone(), k, camera_pose_topic="camera_pose") as node:
        sent = []
        node.objects_pub.publish = sent.append
        show(node, rgb, depth, 0)  # no pose yet: the table is found without gravity
        node.camera_poses._on_pose(_pose_msg(1, looking_down))
        show(node, rgb, depth, 1)
    assert seen[0] is None
    assert seen[1] is not None and seen[1].frame == "base"
    assert np.allclose(up_axis(seen[1]), (0.0, 0.0, -1.0), atol=1e-9)
    assert [len(m.objects) for m in sent] == [2, 2]  # both boxes found with and without the pose


def test_an_empty_topic_never_asks_for_a_pose(monkeypatch):
    from extractor_table import MeanColourBackbone, extractor, show, two_objects

    import cbcl_pr_ros.nodes.feature_extractor as fx

    seen = []
    real = fx.extract_objects
    monkeypatch.setattr(fx, "extract_objects", lambda rgb, depth, K, pose, *a, **kw: (seen.append(pose), real(
        rgb, depth, K, pose, *a, **kw))[1])
    rgb, depth, k = two_objects()
    with extractor(MeanColourBackbone(), k, camera_pose_topic="") as node:
        node.camera_poses._on_pose(_pose_msg(0, (1.0, 0.0, 0.0, 0.0)))
        show(node, rgb, depth, 0)
    assert seen == [None]
