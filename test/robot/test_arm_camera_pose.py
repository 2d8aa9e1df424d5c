"""The arm points at the base-frame positions the learner's detections carry (the learner placed them
with its checked camera-pose history): it keeps no pose history of its own, and detections that
carry no base-frame positions (the learner had no pose for their stamp) are ignored, not guessed."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
from ros_testing import domain, isolated_context  # noqa: E402


def _detections(stamp_s: float, frame: str = "base", track: int = 1, x: float = 0.7):
    from cbcl_pr_ros.msg import DetectedObject, Detections

    msg = Detections()
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp_s), int(round((stamp_s % 1) * 1e9))
    msg.position_frame = frame
    msg.camera_pose.position.x, msg.camera_pose.position.z = 0.7, 0.5
    msg.camera_pose.orientation.w = 1.0
    obj = DetectedObject(id=track, label="mug", known=True, confidence=0.9)
    obj.centroid.x, obj.centroid.y, obj.centroid.z = 0.0, 0.0, 0.6  # optical frame: not what the arm reads
    obj.position.x, obj.position.y, obj.position.z = (x, 0.0, 1.1) if frame else (math.nan,) * 3
    msg.objects.append(obj)
    return msg


def test_the_arm_uses_the_base_frame_positions_of_the_detections():
    from cbcl_pr_ros.nodes.arm import ArmNode

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            assert not hasattr(node, "_poses")  # no camera-pose history of its own
            node._on_detections(_detections(10.0))
            assert node.detections_used == 1
            seen = node.logic.detected.best("mug")
            assert seen is not None and seen.centre == pytest.approx([0.7, 0.0, 1.1]) and seen.track_id == 1
            node._on_detections(_detections(10.5, x=0.85))  # the same track, moved 15 cm: the same object
            assert len(node.logic.detected.objects_) == 1
            assert node.logic.detected.best("mug").centre == pytest.approx([0.85, 0.0, 1.1])
        finally:
            node.destroy_node()


def test_detections_without_a_base_frame_are_ignored():
    from cbcl_pr_ros.nodes.arm import ArmNode

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            node._on_detections(_detections(10.0, frame=""))
            assert node.detections_used == 0 and node.logic.detected.objects_ == []
        finally:
            node.destroy_node()


def test_detections_in_another_frame_are_ignored_with_a_throttled_warning():
    """Only positions in the arm's base_frame are pointed at: a stranger's (or a mis-set learner's)
    detections in 'map' or 'odom' change nothing, one throttled warning names the frame; with
    base_frame set to that frame they are used, and point_at answers in it."""
    from rclpy.parameter import Parameter

    from cbcl_pr_ros.nodes.arm import ArmNode

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            log = _Warnings()
            node.get_logger = lambda: log
            for frame in ("map", "base_link", "Base", "base ", "\x1b[2Jbase"):
                node._on_detections(_detections(10.0, frame=frame))
            assert node.detections_used == 0 and node.logic.detected.objects_ == []
            assert len(log.said) == 5 and "'map'" in log.said[0] and "base_frame 'base'" in log.said[0]
            assert all("\x1b" not in text for text in log.said)  # a control character is shown escaped
            assert all(kw >= 1.0 for kw in log.throttles)
        finally:
            node.destroy_node()
        node = ArmNode(context=ctx, parameter_overrides=[Parameter("base_frame", value="map")])
        try:
            node._on_detections(_detections(10.0, frame="map"))
            node._on_detections(_detections(10.5, frame="base", x=0.2))
            assert node.detections_used == 1
            assert node.logic.detected.best("mug").centre == pytest.approx([0.7, 0.0, 1.1])
        finally:
            node.destroy_node()


def test_an_unusable_base_frame_is_refused_at_start():
    from cbcl_pr_ros.settings import robot_params

    specs = robot_params.ARM_PARAMS
    for bad, why in (("", "must not be empty"), ("b" * 300, "the most is 256"), ("base\n", "unprintable")):
        values = {s.name: s.default for s in specs} | {"base_frame": bad}
        with pytest.raises(ValueError, match=why):
            robot_params.check_parameters(specs, values.__getitem__)


class _Warnings:
    def __init__(self) -> None:
        self.said: list[str] = []
        self.throttles: list[float] = []

    def warning(self, text: str, **kw) -> None:
        self.said.append(text)
        self.throttles.append(kw.get("throttle_duration_sec", 0.0))


def test_the_warning_for_unplaced_detections_says_what_happened():
    """Detections with no position_frame: from a learner (NaN positions) it had no camera pose for the
    stamp; with positions but no frame, the sender is not a learner, and the warning says so instead of
    blaming the learner's camera pose."""
    from cbcl_pr_ros.nodes.arm import ArmNode

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            log = _Warnings()
            node.get_logger = lambda: log
            node._on_detections(_detections(10.0, frame=""))  # as a learner without a pose sends them
            stranger = _detections(11.0, frame="")
            stranger.objects[0].position.x, stranger.objects[0].position.y, stranger.objects[0].position.z = 0.7, 0, 1
            node._on_detections(stranger)
            assert node.detections_used == 0 and node.logic.detected.objects_ == []
            learner_said, stranger_said = log.said
            assert "camera pose" in learner_said and "position_frame" in learner_said
            assert "camera pose" not in stranger_said and "not placed by a learner" in stranger_said
            assert "position_frame" in stranger_said
            # the first frames of a start (an empty table, before the first camera pose): no warning
            empty = _detections(12.0, frame="")
            del empty.objects[:]
            node._on_detections(empty)
            assert len(log.said) == 2 and node.detections_used == 0
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


def test_the_arm_takes_detections_as_bytes_and_refuses_an_oversized_message_unbuilt():
    """The arm's subscription delivers serialized bytes: a message is built only after its object count
    is read, so a publisher of thousands of objects costs the arm nothing and changes nothing."""
    from rclpy.serialization import serialize_message

    from cbcl_pr_ros.msg import DetectedObject
    from cbcl_pr_ros.nodes.arm import ArmNode
    from cbcl_pr_ros.nodes.detections_msgs import MAX_FRAME_OBJECTS

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            node._on_detections(serialize_message(_detections(10.0)))  # as the raw subscription delivers it
            assert node.detections_used == 1
            flood = _detections(10.5, x=0.2)
            flood.objects = [DetectedObject(id=i + 2, label="junk") for i in range(MAX_FRAME_OBJECTS + 1)]
            node._on_detections(serialize_message(flood))
            assert node.detections_used == 1 and node.logic.detected.best("junk") is None
            seen = node.logic.detected.best("mug")
            assert seen is not None and seen.centre == pytest.approx([0.7, 0.0, 1.1])
        finally:
            node.destroy_node()


def test_joint_states_keep_only_this_arms_joints():
    """The IK seed reads the arm's own joints: a JointState of 20,000 invented names used to grow the
    arm's joint table by 20,000 entries per message (and NaN positions are not taken)."""
    from sensor_msgs.msg import JointState

    from cbcl_pr_ros.nodes.arm import ArmNode

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            own = list(node.logic.joint_names)
            junk = [f"junk_{i}" for i in range(20_000)]
            node._on_joints(JointState(name=[*junk, *own], position=[0.1] * len(junk) + [0.2] * len(own)))
            node._on_joints(JointState(name=own[:1], position=[math.nan]))
            assert node._joints == {n: pytest.approx(0.2) for n in own}
        finally:
            node.destroy_node()


@pytest.mark.parametrize("quat, pos", [((0.0, 0.0, 0.0, 0.0), (0.7, 0.0, 0.5)), ((0.0, 0.0, 0.0, 50.0), (0.7, 0.0, 0.5)),
                                       ((0.0, 0.0, 0.0, math.nan), (0.7, 0.0, 0.5)), ((0.0, 0.0, 0.0, 1.0), (1e9, 0, 0))])
def test_detections_with_a_camera_pose_that_is_no_pose_change_nothing(quat, pos):
    """A camera pose that is no rotation (a zero or scaled quaternion reads as looking straight up at the
    mug), not finite, or 1e9 m away was taken: an empty message with it wiped the mug, which the real
    camera (looking down, away from it) had never seen leave. Now such a message is ignored, warned."""
    from cbcl_pr_ros.nodes.arm import ArmNode

    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            log = _Warnings()
            node.get_logger = lambda: log
            node._camera = (np.array([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]]), (640, 480))
            seen = _detections(10.0)
            seen.camera_pose.orientation.x, seen.camera_pose.orientation.w = 1.0, 0.0  # looking down
            node._on_detections(seen)
            bad = _detections(10.5)
            bad.objects = []
            c = bad.camera_pose
            c.orientation.x, c.orientation.y, c.orientation.z, c.orientation.w = quat
            c.position.x, c.position.y, c.position.z = pos
            node._on_detections(bad)
            assert node.detections_used == 1 and node.logic.detected.best("mug") is not None
            assert len(log.said) == 1 and "camera" in log.said[0]
        finally:
            node.destroy_node()


@pytest.mark.parametrize("k", [
    [1e-300, 0.0, 320.0, 0.0, 1e-300, 240.0, 0.0, 0.0, 1.0],  # every point in front at the principal point
    [500.0, 0.0, 1e12, 0.0, 500.0, 240.0, 0.0, 0.0, 1.0],
])
def test_a_camera_info_no_camera_has_wipes_no_object_out_of_view(k):
    """The arm drops a remembered object whose place is in view and not detected. A CameraInfo of fx
    1e-300 (finite, positive: it was taken) put every place in front of the camera in view, so an empty
    detections message wiped a mug the real camera had never seen leave. Now such a K is not taken
    (as the extractor takes none), and the last good one stays."""
    from sensor_msgs.msg import CameraInfo

    from cbcl_pr_ros.nodes.arm import ArmNode

    good = [500.0, 0.0, 320.0, 0.0, 500.0, 240.0, 0.0, 0.0, 1.0]
    with domain() as dom, isolated_context(dom) as ctx:
        node = ArmNode(context=ctx)
        try:
            node._on_info(CameraInfo(width=640, height=480, k=good))
            seen = _detections(10.0, x=2.0)
            seen.objects[0].position.z = -0.2  # in front of the camera below, far outside its view
            seen.camera_pose.orientation.x, seen.camera_pose.orientation.w = 1.0, 0.0  # looking down
            node._on_detections(seen)
            node._on_info(CameraInfo(width=640, height=480, k=k))
            empty = _detections(10.5)
            empty.objects = []
            empty.camera_pose.orientation.x, empty.camera_pose.orientation.w = 1.0, 0.0
            node._on_detections(empty)
            assert node.logic.detected.best("mug") is not None
            k, size = node._camera
            assert k[0, 0] == 500.0 and k[0, 2] == 320.0 and size == (640, 480)
        finally:
            node.destroy_node()
