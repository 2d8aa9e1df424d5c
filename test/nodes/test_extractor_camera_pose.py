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


class _Log:
    """A logger that keeps what it was told (throttling is rclpy's, not under test here)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def warning(self, text: str, **_kw) -> None:
        self.lines.append(("warning", text))

    def info(self, text: str, **_kw) -> None:
        self.lines.append(("info", text))


def _clocked(node) -> list[float]:
    """Make the node's waits for CameraInfo and the camera pose read ``now[0]`` (seconds, advanced by
    the caller)."""
    now = [0.0]
    node._info_grace.clock = node.camera_poses.grace.clock = lambda: now[0]
    return now


def test_the_first_frame_before_the_first_pose_is_no_warning_a_gap_later_is():
    """Start-up order: the first frame can come before the first pose (each subscription finds its
    publisher on its own). That said "no camera pose ... the table is found without gravity" at the
    start of every simulated session; now only poses that are really missing are warned about, in words
    that say what happens and what to do."""
    from extractor_table import MeanColourBackbone, extractor, show, two_objects

    rgb, depth, k = two_objects()
    looking_down = (1.0, 0.0, 0.0, 0.0)
    with extractor(MeanColourBackbone(), k, camera_pose_topic="camera_pose") as node:
        log = _Log()
        node.camera_poses.logger = log
        now = _clocked(node)
        node.camera_poses._on_pose(_pose_msg(1, looking_down))  # the first pose is of frame 1 ...
        show(node, rgb, depth, 0)  # ... frame 0 came before it
        for i in range(1, 4):
            now[0] += 0.1
            node.camera_poses._on_pose(_pose_msg(i, looking_down))
            show(node, rgb, depth, i)
        assert log.lines == []
        now[0] += 0.1
        show(node, rgb, depth, 20)  # no pose within 0.25 s of it: a real gap, said at once
    (kind, text), = log.lines
    assert kind == "warning" and text.startswith("no camera pose on 'camera_pose' for a frame's time stamp: "
                                                 "the table under the objects is found from the image alone")
    assert "publish the camera's pose on 'camera_pose' at least every 0.25 s" in text
    assert "gravity" not in text


def test_poses_that_never_fit_the_frames_are_warned_about_after_a_few_frames_and_seconds():
    """Poses stamped by another clock never fit a frame: warned once the grace (5 frames over 2 s) is over."""
    from extractor_table import MeanColourBackbone, extractor, show, two_objects

    rgb, depth, k = two_objects()
    with extractor(MeanColourBackbone(), k, camera_pose_topic="camera_pose") as node:
        log = _Log()
        node.camera_poses.logger = log
        now = _clocked(node)
        node.camera_poses._on_pose(_pose_msg(3000, (1.0, 0.0, 0.0, 0.0)))  # 100 s after the frames
        warned_at = []
        for i in range(12):
            show(node, rgb, depth, i)
            warned_at += [i] * (len(log.lines) - len(warned_at))
            now[0] += 0.25
    assert warned_at and warned_at[0] == 8  # frame 8: the 9th frame without a pose, 2 s after the first
    assert all(kind == "warning" and "no camera pose on 'camera_pose'" in text for kind, text in log.lines)


def test_a_frame_before_the_first_camera_info_is_no_warning():
    """The first colour frame can beat the first CameraInfo; the quickstart's table then told the user to
    check the topic name. Nothing is said while CameraInfo may still be on its way."""
    from extractor_table import MeanColourBackbone, extractor, show, two_objects

    rgb, depth, k = two_objects()
    with extractor(MeanColourBackbone(), k, camera_pose_topic="") as node:
        info, node._camera_info = node._camera_info, None  # started before the camera's CameraInfo came
        warned: list[str] = []
        node._depth_warning = warned.append
        now = _clocked(node)
        show(node, rgb, depth, 0)
        now[0] += 0.1
        node._on_camera_info(info)  # the camera's first CameraInfo
        show(node, rgb, depth, 1)
    assert warned == []


def test_a_camera_that_never_sends_camera_info_is_still_warned_about():
    from extractor_table import MeanColourBackbone, extractor, show, two_objects

    rgb, depth, k = two_objects()
    with extractor(MeanColourBackbone(), k, camera_pose_topic="") as node:
        node._camera_info = None
        warned_at: list[int] = []
        node._depth_warning = lambda text: warned_at.append(i) if "no CameraInfo" in text else None
        now = _clocked(node)
        for i in range(12):
            show(node, rgb, depth, i)
            now[0] += 0.25
    assert warned_at and warned_at[0] == 8  # once 5 frames and 2 s went by without one; then each frame
    assert warned_at == list(range(8, 12))  # (the node's own throttle is in _depth_warning)
