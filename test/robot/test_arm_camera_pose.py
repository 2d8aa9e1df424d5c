"""The arm locates detections with the camera pose of their stamp, kept in the same checked history the
learner uses (perception/camera_pose.CameraPoses): a pose that is not finite, not a rotation, or that
jumps is refused, and the detections of that instant are ignored rather than placed wrongly."""
from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
from ros_testing import domain, isolated_context  # noqa: E402


def _pose(stamp_s: float, x: float, qw: float = 1.0):
    from geometry_msgs.msg import PoseStamped

    msg = PoseStamped()
    msg.header.frame_id = "base"
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp_s), int(round((stamp_s % 1) * 1e9))
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = x, 0.0, 0.5
    msg.pose.orientation.w = qw
    return msg


def _detections(stamp_s: float):
    from cbcl_pr_ros.msg import DetectedObject, Detections

    msg = Detections()
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp_s), int(round((stamp_s % 1) * 1e9))
    obj = DetectedObject(id=1, label="mug", known=True, confidence=0.9)
    obj.centroid.x, obj.centroid.y, obj.centroid.z = 0.0, 0.0, 0.6
    msg.objects.append(obj)
    return msg


def test_detections_use_only_checked_poses_of_their_stamp():
    from cbcl_pr_ros.nodes.arm import ArmNode

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            node._remember_pose(_pose(10.0, 0.7, qw=math.nan))  # not finite: refused
            node._on_detections(_detections(10.0))
            assert node.detections_used == 0
            node._remember_pose(_pose(11.0, 0.7))
            node._remember_pose(_pose(11.1, 5.7))  # 5 m in 0.1 s: a jump, refused
            node._on_detections(_detections(11.1))  # the kept pose at 11.0 is within 0.3 s of it
            assert node.detections_used == 1
            seen = node.logic.detected.best("mug")
            assert seen is not None and seen.centre == pytest.approx([0.7, 0.0, 1.1])  # with the 11.0 pose
            node._on_detections(_detections(20.0))  # no pose anywhere near: ignored
            assert node.detections_used == 1
        finally:
            node.destroy_node()


def test_a_rogue_pose_after_each_real_one_does_not_blind_the_arm():
    """The arm keeps its poses by the learner's rule: a far-off pose after each real one is refused and
    never judged against, so every detection still finds the real pose of its stamp."""
    from cbcl_pr_ros.nodes.arm import ArmNode

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            for f in range(20):
                t = 10.0 + 0.25 * f
                node._remember_pose(_pose(t, 0.5 + 0.05 * f))
                node._remember_pose(_pose(t + 0.01, -3.0))  # rogue: 3.5 m away in 10 ms
                node._on_detections(_detections(t))
            assert node.detections_used == 20
            assert node._poses.refused == 20
        finally:
            node.destroy_node()


def test_point_at_refuses_an_oversized_label_without_echoing_it():
    from cbcl_pr_ros.nodes.arm import ArmNode
    from cbcl_pr_ros.srv import PointAt

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            for label, why in (("m" * 1_000_000, "the most is 128"), ("mug\x1b[2J", "unprintable"), ("  ", "empty")):
                res = node._on_point_at(PointAt.Request(label=label), PointAt.Response())
                assert not res.success and why in res.message and len(res.message) < 300, res.message[:300]
            assert node.commands_sent == 0
        finally:
            node.destroy_node()
