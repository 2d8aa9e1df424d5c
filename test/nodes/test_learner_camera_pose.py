"""The learner tracks in the base frame with camera_pose: ids stay while the camera moves, detections
keep camera-frame centroids and carry base-frame places, a stamp without a pose and a jumping pose fall back to the
camera frame. The node is built in-process and its callbacks are called directly (no timing)."""
from __future__ import annotations

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from ros_testing import fresh_domain, release_domain  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402
from std_msgs.msg import Header  # noqa: E402

from cbcl_pr_ros.perception import Proposal  # noqa: E402

DOWN = Rotation.from_euler("x", np.pi)  # optical z points down at the table
OBJECTS = np.array([[0.6, -0.3, -0.18], [0.68, -0.3, -0.18]])  # 8 cm apart, base frame


@pytest.fixture
def make_learner():
    from cbcl_pr_ros.nodes.learner import LearnerNode

    made = []

    def make(topic: str = "camera_pose"):
        dom = fresh_domain()
        ctx = rclpy.Context()
        rclpy.init(context=ctx, domain_id=dom)
        node = LearnerNode(feature_source=object(), context=ctx, parameter_overrides=[
            Parameter("memory_path", value=""), Parameter("backbone", value="test"), Parameter("feature_dim", value=8),
            Parameter("track_max_distance_m", value=0.05), Parameter("camera_pose_topic", value=topic)])
        made.append((node, ctx, dom))
        return node

    yield make
    for node, ctx, dom in made:
        node.destroy_node()
        rclpy.shutdown(context=ctx)
        release_domain(dom)


def _stamp(ns: int):
    h = Header(frame_id="camera")
    h.stamp.sec, h.stamp.nanosec = divmod(ns, 1_000_000_000)
    return h


def _pose(ns: int, x: float, frame: str = "base") -> PoseStamped:
    msg = PoseStamped(header=_stamp(ns))
    msg.header.frame_id = frame
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = x, -0.3, 0.3
    q = DOWN.as_quat()
    msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z, msg.pose.orientation.w = (float(v) for v in q)
    return msg


def _frame(node, ns: int, camera_x: float):
    """Send the objects as a camera at base x = camera_x sees them (boxes where they project);
    returns the published detections' ids and centroids in object order, and the true centroids."""
    from cbcl_pr_ros.nodes.detections_msgs import make_object_features_msg

    cam = DOWN.inv().apply(OBJECTS - [camera_x, -0.3, 0.3])
    u = [int(320 + 500 * c[0] / c[2]) for c in cam]
    props = [Proposal((x - 20, 220, x + 20, 260), None, c, np.full(3, 0.04), 0.9) for x, c in zip(u, cam)]
    node._on_objects(make_object_features_msg(_stamp(ns), "test", "", props, np.zeros((2, 8)), (480, 640)))  # noqa: SLF001
    det = node.session.last_detections[0]
    by_box = {o.x0: o for o in det.objects}
    objs = [by_box[x - 20] for x in u]
    return [o.id for o in objs], np.array([[o.centroid.x, o.centroid.y, o.centroid.z] for o in objs]), cam


def test_ids_stay_while_the_camera_moves_and_centroids_stay_in_the_camera_frame(make_learner):
    node = make_learner()
    assert node.camera_poses.sub is not None  # subscribed on activate
    first = None
    for f in range(5):  # 8 cm per frame: in the camera frame each object lands where its neighbour was
        ns = 1_000_000_000 + f * 250_000_000
        node.camera_poses._on_pose(_pose(ns, 0.5 + 0.08 * f))  # noqa: SLF001
        ids, centroids, cam = _frame(node, ns, 0.5 + 0.08 * f)
        first = first or ids
        assert ids == first
        assert np.allclose(centroids, cam, atol=1e-5)  # the message keeps the optical frame


def test_detections_carry_the_base_frame_places_and_the_pose(make_learner):
    """What the arm points at: each object's place in the pose's frame, the frame's name and the
    camera pose of the stamp; a frame without a pose says no frame (NaN places)."""
    node = make_learner()
    for f in range(3):
        ns = 1_000_000_000 + f * 250_000_000
        node.camera_poses._on_pose(_pose(ns, 0.5 + 0.08 * f))  # noqa: SLF001
        _frame(node, ns, 0.5 + 0.08 * f)
        det = node.session.last_detections[0]
        assert det.position_frame == "base"
        assert det.camera_pose.position.x == pytest.approx(0.5 + 0.08 * f)
        places = sorted((o.position.x, o.position.y, o.position.z) for o in det.objects)
        assert np.allclose(places, OBJECTS, atol=1e-5)
    _frame(node, 9_000_000_000, 0.5)  # no pose near that stamp
    det = node.session.last_detections[0]
    assert det.position_frame == "" and all(np.isnan(o.position.x) for o in det.objects)


def test_no_pose_for_a_stamp_or_a_jump_means_camera_frame(make_learner):
    node = make_learner()
    node.camera_poses._on_pose(_pose(1_000_000_000, 0.5))  # noqa: SLF001
    ids0, _, _ = _frame(node, 1_000_000_000, 0.5)
    ids1, _, _ = _frame(node, 3_000_000_000, 0.58)  # no pose near that stamp: camera frame, boxes decide
    assert ids1[1] == ids0[0]  # the right object now sits where the left one was in the image
    node.camera_poses._on_pose(_pose(3_100_000_000, 25.0))  # noqa: SLF001  (24 m in 0.1 s: refused)
    assert node.camera_poses.history.refused == 1
    assert node.camera_poses.history.pose_at(3_100_000_000) is None


def test_an_empty_topic_turns_the_pose_off(make_learner):
    node = make_learner(topic="")
    assert node.camera_poses.sub is None and node.camera_poses.pose_for(_stamp(1).stamp) is None
    node.camera_poses._on_pose(_pose(1_000_000_000, 0.5))  # noqa: SLF001  (even if one came: not used)
    ids0, _, _ = _frame(node, 1_000_000_000, 0.5)
    ids1, _, _ = _frame(node, 1_250_000_000, 0.58)
    assert ids1[1] == ids0[0]  # camera frame: the id went with the image position


def test_a_pose_delivered_but_not_yet_taken_is_found(make_learner):
    """The executor may run a frame's objects callback before its pose callback (one message per
    subscription per round, objects first): pose_for takes the waiting poses itself. Nothing spins
    here, so only that can bring the published pose into the history."""
    import time

    node = make_learner()
    pub = node.create_publisher(PoseStamped, "camera_pose", 10)
    deadline = time.monotonic() + 10.0
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    pub.publish(_pose(2_000_000_000, 0.5))
    pose = None
    while pose is None and time.monotonic() < deadline:  # delivery takes a moment; no spin in between
        pose = node.camera_poses.pose_for(_stamp(2_000_000_000).stamp)
        time.sleep(0.05)
    assert pose is not None and np.allclose(pose.position, [0.5, -0.3, 0.3])
    assert node.camera_poses.take_waiting() == 0  # taken once


def _info(publisher: int) -> dict:
    """A message info as rclpy passes it, naming one of two publishers."""
    return {"publisher_gid": {"implementation_identifier": "rmw_fastrtps_cpp", "data": bytes([publisher]) * 16}}


@pytest.mark.parametrize("rogue", ["elsewhere", "other_frame", "second_publisher"])
def test_a_rogue_pose_after_each_real_one_changes_no_id(make_learner, rogue):
    """43 frames of a camera moving 8 cm per frame (each object lands where its neighbour was in the
    image): after each real pose a rogue one arrives. Refused, it never becomes the reference, so
    every real pose is kept and no id changes (it used to be refused as a jump: 28 id changes)."""
    node = make_learner()
    first, changes = None, 0
    for f in range(43):
        ns, x = 1_000_000_000 + f * 250_000_000, 0.5 + 0.08 * f
        node.camera_poses._on_pose(_pose(ns, x), _info(1))  # noqa: SLF001
        bad = {"elsewhere": (_pose(ns + 10_000_000, -2.0), 1), "other_frame": (_pose(ns + 10_000_000, x, "odom"), 1),
               "second_publisher": (_pose(ns + 10_000_000, x + 0.3), 2)}[rogue]
        node.camera_poses._on_pose(bad[0], _info(bad[1]))  # noqa: SLF001
        ids, _, _ = _frame(node, ns, x)
        first = first or ids
        changes += sum(a != b for a, b in zip(ids, first))
    assert changes == 0
    assert node.camera_poses.history.refused == 43


def test_two_live_publishers_are_told_apart(make_learner):
    """The publisher's id reaches the history: a second publisher's pose is refused while the first
    one's are kept (delivery is waited for; nothing is timed)."""
    import time

    node = make_learner()
    node.camera_poses.history.relocalise_s = 3600.0  # however slow the delivery, the first one stays live
    real, rogue = (node.create_publisher(PoseStamped, "camera_pose", 10) for _ in range(2))
    deadline = time.monotonic() + 10.0
    while min(real.get_subscription_count(), rogue.get_subscription_count()) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    real.publish(_pose(2_000_000_000, 0.5))
    while node.camera_poses.history.received < 1 and time.monotonic() < deadline:
        node.camera_poses.take_waiting()
        time.sleep(0.05)
    rogue.publish(_pose(2_100_000_000, 0.52))
    while node.camera_poses.history.received < 2 and time.monotonic() < deadline:
        node.camera_poses.take_waiting()
        time.sleep(0.05)
    assert node.camera_poses.history.received == 2 and node.camera_poses.history.refused == 1
    assert node.camera_poses.history.pose_at(2_100_000_000) is None  # the rogue's stamp has no pose


def test_a_huge_object_frame_is_refused_on_receipt_with_one_warning(make_learner):
    """2,000 objects in one object_features message: refused whole before any work (no detections for
    it, no track), one warning; the next normal frame is answered."""
    from rclpy.serialization import serialize_message

    from cbcl_pr_ros.nodes.detections_msgs import make_object_features_msg

    node = make_learner(topic="")
    warnings = []
    real_logger = node.get_logger()

    class Logger:
        def warning(self, text, **kw):
            warnings.append((text, kw))

        def __getattr__(self, name):
            return getattr(real_logger, name)
    node.get_logger = lambda: Logger()  # noqa: E731
    props = [Proposal((i % 600, 20, i % 600 + 20, 60), None, np.array([0.0, 0.0, 0.5]), np.full(3, 0.04), 0.9)
             for i in range(2000)]
    for k in range(3):  # as the subscription delivers it (serialized), and as a built message
        msg = make_object_features_msg(_stamp(1_000_000_000 + k), "test", "", props, np.zeros((2000, 8)), (480, 640))
        node._on_objects(serialize_message(msg) if k < 2 else msg)
    assert node.session.detections_published == 0 and node.session.last_detections is None
    assert len(warnings) == 3 and all("a frame of 2000 objects" in w for w, _ in warnings)
    assert all(kw.get("throttle_duration_sec", 0) >= 1.0 for _, kw in warnings)  # rclpy logs one per period
    ids, _, _ = _frame(node, 2_000_000_000, 0.5)
    assert len(ids) == 2 and node.session.detections_published == 1
    small = make_object_features_msg(_stamp(2_100_000_000), "test", "", props[:2], np.zeros((2, 8)), (480, 640))
    node._on_objects(serialize_message(small))  # a normal frame, serialized: answered
    assert node.session.detections_published == 2


def test_frame_names_are_bounded_so_every_detection_fits_what_its_readers_take(make_learner):
    """The learner echoes the objects' frame_id and the pose's frame into every Detections: a name over
    the bound is refused on receipt (nothing published), and a message with both names at the bound and
    objects of the longest names is within LearnerClient's cap (and so the arm's)."""
    from rclpy.serialization import serialize_message

    from cbcl_pr_ros.nodes.detections_msgs import MAX_DETECTIONS_BYTES, make_object_features_msg
    from cbcl_pr_ros.nodes.learner_client import MAX_FRAME_NAME_CHARS, _learner_sized, learner_detections_bytes

    node = make_learner()
    warnings = []
    node.get_logger = lambda: type("L", (), {"warning": lambda self, t, **kw: warnings.append(t),
                                             "info": lambda self, t, **kw: None})()
    props = [Proposal((20, 220, 60, 260), None, np.array([0.0, 0.0, 0.5]), np.full(3, 0.04), 0.9)]
    huge = make_object_features_msg(_stamp(1_000_000_000), "test", "", props, np.zeros((1, 8)), (480, 640))
    huge.header.frame_id = "c" * 100_000
    node._on_objects(serialize_message(huge))  # noqa: SLF001
    assert node.session.detections_published == 0 and node.session.last_detections is None
    assert any("frame_id has 100000 characters" in w for w in warnings), warnings
    edge = "f" * MAX_FRAME_NAME_CHARS
    node.camera_poses._on_pose(_pose(2_000_000_000, 0.5, frame=edge))  # noqa: SLF001
    ok = make_object_features_msg(_stamp(2_000_000_000), "test", "", props, np.zeros((1, 8)), (480, 640))
    ok.header.frame_id = edge
    node._on_objects(ok)  # noqa: SLF001
    det = node.session.last_detections[0]
    assert det.position_frame == edge and det.header.frame_id == edge
    raw = serialize_message(det)
    assert len(raw) <= learner_detections_bytes() <= MAX_DETECTIONS_BYTES
    assert _learner_sized(raw).position_frame == edge


def test_no_pose_at_all_is_said_once_after_the_first_frames_not_at_the_first(make_learner):
    """A camera without poses is told once that its objects are tracked in its own frame; not at the
    first frame, which in a session with poses often comes before the first pose."""
    node = make_learner()
    lines: list[str] = []
    node.camera_poses.logger = type("Log", (), {"info": lambda self, t, **k: lines.append(t),
                                                "warning": lambda self, t, **k: lines.append(t)})()
    now = [0.0]
    node.camera_poses.grace.clock = lambda: now[0]
    said_at = []
    for f in range(12):  # 4 frames a second, no pose ever
        _frame(node, 1_000_000_000 + f * 250_000_000, 0.5)
        said_at += [f] * (len(lines) - len(said_at))
        now[0] += 0.25
    assert said_at == [8], lines  # 5 frames and 2 s without a pose: then once
    assert lines[0].startswith("no camera pose on 'camera_pose' (yet): objects are tracked in the camera's own frame")
