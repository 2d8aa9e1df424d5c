"""Random and adversarial requests for every service of the learner and the extractor (hypothesis).

Shared by test/nodes/test_hardening_live.py (a bounded run in CI) and bench/bench_hardening.py
(thousands of requests, the kill -9 loop). In test/support, the helpers tests and bench share.

:class:`Fuzzer` sends one request per example to live nodes in child processes, keeps a shadow of
the classes the learner must hold (successful teach/forget/rename/load answers), and counts
crashes (the process ended), wedged calls (no answer within the call timeout) and lost classes.
"""
from __future__ import annotations

import array
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DIM = 1280  # efficientnet_lite0, the backbone of the fuzzed nodes
BACKBONE = "efficientnet_lite0"
ANCHORS = ("anchor_a", "anchor_b")
DEFAULT_FILE = "memory.safetensors"
IDEMPOTENT = frozenset({"classify", "list_classes", "extract_features"})  # safe to send again
LATE_S = 10.0  # an answer later than this counts as late (issue 22: 0 expected)

# ------------------------------------------------------------------ strategies
_NASTY_TEXT = ["", " ", "\x00", "a\x00b", "evil\nINFO [learner]: forged", "\u202emug", "x" * 300,
               "x" * 20_000, "🙂 mug", "anchor_a", "anchor_b", " anchor_a ", "$HOME", "~", "..", "%s%n",
               "\t", "mug\r"]
_NASTY_PATHS = ["", "../../etc/passwd", "/dev/zero", "/etc/passwd", "~/.ssh/authorized_keys",
                "$HOME/.bashrc", "a/b", ".hidden", "..", ".", "memory.safetensors", "copy.safetensors",
                "fifo", "link_out", "big.bin", "garbage.safetensors", "/tmp", "x" * 300, "nul\x00byte",
                "copy2.safetensors"]
_ENCODINGS = ["rgb8", "bgr8", "mono8", "rgba8", "bgra8", "mono16", "16UC1", "32FC1", "yuv422", "", "rgb8\x00",
              "bayer_rggb8", "8UC3"]


def text() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(_NASTY_TEXT), st.text(max_size=40),
                     st.text(alphabet="abcdefghij_ -", min_size=1, max_size=12))


def floats32() -> st.SearchStrategy[float]:
    return st.one_of(st.floats(width=32, allow_nan=True, allow_infinity=True),
                     st.sampled_from([0.0, 1e-3, 0.5, 2.0, 1e9, 1e10, 3e38, float("inf"), float("nan"), -1.0]))


@st.composite
def feature_vector(draw: Any) -> Any:
    from cbcl_pr_ros.msg import FeatureVector

    width = draw(st.sampled_from([DIM, DIM, DIM, 3, 0, 1, 512, 1281]))
    kind = draw(st.sampled_from(["normal", "normal", "huge", "nan", "inf", "zeros", "random"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    v = rng.normal(0, 1, width).astype(np.float32)
    if kind == "huge" and width:
        v[rng.integers(width)] = 3e38
    elif kind == "nan" and width:
        v[rng.integers(width)] = np.nan
    elif kind == "inf" and width:
        v[rng.integers(width)] = -np.inf
    elif kind == "zeros":
        v[:] = 0
    elif kind == "random" and width:
        v = rng.uniform(-1e6, 1e6, width).astype(np.float32)
    m = FeatureVector()
    m.backbone = draw(st.sampled_from([BACKBONE, BACKBONE, "", "resnet18", "x" * 100]))
    m.preprocessing = draw(st.sampled_from(["", "p", "\x00"]))
    m.dimension = draw(st.sampled_from([width, width, 0, 7, 2**32 - 1]))
    m.values = array.array("f", v.tobytes())
    return m


@st.composite
def image(draw: Any) -> Any:
    from sensor_msgs.msg import Image

    img = Image()
    img.encoding = draw(st.sampled_from(_ENCODINGS))
    consistent = draw(st.booleans())
    if consistent:
        h, w = draw(st.integers(1, 24)), draw(st.integers(1, 24))
        ch = {"mono8": 1, "mono16": 2, "16UC1": 2, "32FC1": 4, "rgba8": 4, "bgra8": 4}.get(img.encoding, 3)
        img.height, img.width, img.step = h, w, w * ch
        n = h * w * ch
    else:
        img.height = draw(st.sampled_from([0, 1, 5, 4096, 100_000, 2**32 - 1]))
        img.width = draw(st.sampled_from([0, 1, 5, 4096, 100_000, 2**32 - 1]))
        img.step = draw(st.sampled_from([0, 1, 3, 15, 2**32 - 1]))
        n = draw(st.integers(0, 300))
    img.is_bigendian = draw(st.sampled_from([0, 1]))
    img.data = array.array("B", np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
                           .integers(0, 256, n, dtype=np.uint8).tobytes())
    return img


def _uint32() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([0, 1, 3, 101, 2**31, 2**32 - 1]), st.integers(0, 2**32 - 1))


@st.composite
def teach_request(draw: Any) -> Any:
    from cbcl_pr_ros.srv import TeachClass

    r = TeachClass.Request()
    r.label = draw(text())
    source = draw(st.sampled_from(["features", "features", "images", "stream", "nothing"]))
    if source == "features":
        r.features = draw(st.lists(feature_vector(), min_size=0, max_size=4))
    elif source == "images":
        r.images = draw(st.lists(image(), min_size=1, max_size=3))
    elif source == "stream":
        r.num_frames = draw(_uint32())
        r.timeout_s = draw(floats32())
    return r


@st.composite
def request(draw: Any, kind: str | None = None) -> tuple[str, Any]:
    """(service name, request) for one of the learner's or the extractor's services (``kind``: that one)."""
    from cbcl_pr_ros.srv import (Classify, ExtractFeatures, ForgetClass, ListClasses, LoadMemory, RenameClass,
                                 SaveMemory)

    if kind is None:
        kind = draw(st.sampled_from(["teach_class"] * 4 + ["classify"] * 3 + PERCEPTION_SERVICES[2:]))
    if kind == "teach_class":
        return kind, draw(teach_request())
    if kind == "classify":
        r = Classify.Request()
        which = draw(st.sampled_from(["feature", "image", "latest"]))
        if which == "feature":
            r.feature = draw(feature_vector())
        elif which == "image":
            r.image = draw(image())
        r.top_k = draw(_uint32())
        return kind, r
    if kind == "forget_class":
        return kind, ForgetClass.Request(label=draw(text()))
    if kind == "rename_class":
        return kind, RenameClass.Request(old_label=draw(text()), new_label=draw(text()))
    if kind == "save_memory":
        return kind, SaveMemory.Request(path=draw(st.one_of(st.sampled_from(_NASTY_PATHS), text())))
    if kind == "load_memory":
        return kind, LoadMemory.Request(path=draw(st.one_of(st.sampled_from(_NASTY_PATHS), text())))
    if kind == "extract_features":
        r = ExtractFeatures.Request()
        r.images = draw(st.lists(image(), min_size=0, max_size=3))
        return kind, r
    return kind, ListClasses.Request()


# ------------------------------------------------------------------ the world, the arm, the topics (issue 22)
PERCEPTION_SERVICES = ["teach_class", "classify", "forget_class", "rename_class", "save_memory", "load_memory",
                       "list_classes", "extract_features"]
WORLD_SERVICES = ["place_object", "clear_objects", "point_at", "arrange_objects", "set_light", "render_view"]
ALL_SERVICES = PERCEPTION_SERVICES + WORLD_SERVICES
_OBJECT_NAMES = ["", "twin", "twin", "mug_1", "a", "b.c", "ok-name", " twin "] * 3 + [
    "evil\nINFO forged", "../x", "x" * 65, "x" * 100_000, "\x00"]
_CATEGORIES = ["mug", "duck", "ball", "can"] * 3 + ["spaceship", "", "x" * 10_000, " mug "]
WORLD_MAX_OBJECTS = 64  # cbcl_pr_ros.robot.world.MAX_OBJECTS (imported lazily: PyBullet)


@st.composite
def world_request(draw: Any, kind: str | None = None) -> tuple[str, Any]:
    """(service, request) for sim_world's scene services or the arm's point_at (``kind``: that one)."""
    from cbcl_pr_ros.srv import ClearObjects, PlaceObject, PointAt

    if kind is None:
        kind = draw(st.sampled_from(["place_object"] * 3 + ["clear_objects"] * 2 + ["point_at"]
                                    + ["arrange_objects", "set_light", "render_view"] * 2))
    if kind in ("arrange_objects", "set_light", "render_view"):
        return kind, draw(scene_request(kind))
    if kind == "place_object":
        r = PlaceObject.Request(category=draw(st.sampled_from(_CATEGORIES)),
                                instance=draw(st.one_of(st.integers(0, 5), _uint32())),
                                name=draw(st.one_of(st.sampled_from(_OBJECT_NAMES), st.sampled_from(_OBJECT_NAMES),
                                                    text())),
                                random_spot=draw(st.sampled_from([True, True, False])))
        spot = st.sampled_from([0.7, 0.62, 0.8, -0.1, -0.2, 3.0, float("nan"), float("inf"), 1e300])
        r.x, r.y, r.yaw = (float(draw(spot)) for _ in range(3))
        r.seed = draw(st.one_of(st.just([]), st.just([]), st.lists(st.integers(-3, 2**40), max_size=9)))
        return kind, r
    if kind == "clear_objects":
        return kind, ClearObjects.Request(names=draw(st.lists(st.sampled_from(_OBJECT_NAMES + ["mug_0", "duck_3"]),
                                                              max_size=4)))
    return kind, PointAt.Request(label=draw(text()))


@st.composite
def scene_request(draw: Any, kind: str) -> Any:
    """arrange_objects / set_light / render_view requests (issue 23), wild numbers and lengths included."""
    from geometry_msgs.msg import Vector3

    from cbcl_pr_ros.srv import ArrangeObjects, RenderView, SetLight

    num = st.sampled_from([0.7, 0.62, -0.2, 0.5, 0.0, 1.0, 3.0, -1.0, float("nan"), float("inf"), 1e300])
    if kind == "render_view":
        return RenderView.Request(min_visible_px=draw(st.one_of(st.integers(0, 500), _uint32())))
    if kind == "set_light":
        return SetLight.Request(direction=Vector3(x=float(draw(num)), y=float(draw(num)), z=float(draw(num))),
                                ambient=float(draw(num)), diffuse=float(draw(num)), specular=float(draw(num)))
    names = draw(st.lists(st.sampled_from(_OBJECT_NAMES + ["mug_0", "duck_3"]), max_size=4))
    n = draw(st.sampled_from([0, len(names), len(names), len(names) + 1]))
    return ArrangeObjects.Request(names=names, x=[float(draw(num)) for _ in range(n)],
                                  y=[float(draw(num)) for _ in range(n)], yaw=[float(draw(num)) for _ in range(n)],
                                  region=[float(draw(num)) for _ in range(4)], min_gap=float(draw(num)),
                                  seed=draw(st.lists(st.integers(-5, 2**40), max_size=10)))


TOPICS = {  # topic: (message type path, subscribers)
    "features": ("cbcl_pr_ros.msg.FeatureVector", "learner"),
    "object_features": ("cbcl_pr_ros.msg.ObjectFeatures", "learner"),
    "image": ("sensor_msgs.msg.Image", "extractor"),
    "depth": ("sensor_msgs.msg.Image", "extractor"),
    "camera_info": ("sensor_msgs.msg.CameraInfo", "extractor, arm"),
    "camera_pose": ("geometry_msgs.msg.PoseStamped", "arm, learner"),
    "prediction": ("cbcl_pr_ros.msg.Prediction", "none of ours (a user's node)"),
    "detections": ("cbcl_pr_ros.msg.Detections", "arm"),
    "joint_states": ("sensor_msgs.msg.JointState", "arm"),
    "joint_command": ("sensor_msgs.msg.JointState", "sim_world"),
    "joint_trajectory": ("trajectory_msgs.msg.JointTrajectory", "sim_world"),
}


@st.composite
def topic_message(draw: Any, topic: str | None = None) -> tuple[str, Any]:
    """("publish:<topic>", message) with random and adversarial fields for a topic some node reads
    (``topic``: that topic, else any)."""
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import CameraInfo, JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from cbcl_pr_ros.msg import DetectedObject, Detections, ObjectFeatures, Prediction

    topic = topic if topic is not None else draw(st.sampled_from(sorted(TOPICS)))
    f = draw(floats32())
    if topic == "features":
        msg = draw(feature_vector())
    elif topic == "object_features":
        msg = ObjectFeatures(backbone=draw(st.sampled_from([BACKBONE, "", "other"])), dimension=draw(
            st.sampled_from([DIM, 0, 3, 2**32 - 1])), image_width=draw(_uint32()), image_height=draw(_uint32()))
        n = draw(st.integers(0, 3))
        msg.objects = [DetectedObject(x0=draw(st.integers(-5, 5000)), y0=draw(st.integers(-5, 5000)),
                                      x1=draw(st.integers(-5, 5000)), y1=draw(st.integers(-5, 5000))) for _ in range(n)]
        for o in msg.objects:
            o.centroid.x, o.centroid.y, o.centroid.z = f, 0.5, draw(floats32())
        width = draw(st.sampled_from([n * DIM, n * DIM, 7, 0]))
        vals = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).normal(0, 1, width).astype(np.float32)
        if width and draw(st.booleans()):
            vals[0] = draw(st.sampled_from([3e38, float("nan"), 1e7]))
        msg.values = array.array("f", vals.tobytes())
        k = draw(st.integers(0, 2))  # candidate joins: indices in and out of range, sizes that disagree
        msg.join_first = [draw(st.sampled_from([0, 1, 2, 2**32 - 1])) for _ in range(k)]
        msg.join_second = [draw(st.sampled_from([0, 1, 5])) for _ in range(draw(st.sampled_from([k, k, 1])))]
        msg.joins = [DetectedObject(x0=draw(st.integers(-5, 5000)), x1=draw(st.integers(-5, 99999))) for _ in range(k)]
        msg.join_values = array.array("f", np.full(draw(st.sampled_from([k * DIM, 3])), f, np.float32).tobytes())
    elif topic in ("image", "depth"):
        msg = draw(image())
    elif topic == "camera_info":
        msg = CameraInfo(width=draw(_uint32()), height=draw(_uint32()))
        msg.k = [float(draw(floats32())) for _ in range(9)]
    elif topic == "camera_pose":
        msg = PoseStamped()
        msg.pose.position.x, msg.pose.orientation.w = float(f), float(draw(floats32()))
    elif topic == "prediction":
        msg = Prediction(label=draw(text()), confidence=float(f), known=draw(st.booleans()))
    elif topic == "detections":
        msg = Detections()
        msg.objects = [DetectedObject(id=draw(_uint32()), label=draw(text()), x0=-3, x1=draw(st.integers(-5, 99999)))
                       for _ in range(draw(st.integers(0, 3)))]
    elif topic in ("joint_states", "joint_command"):
        names = draw(st.lists(st.sampled_from(["right_s0", "right_e1", "left_w2", "nope", "", "x" * 1000]), max_size=8))
        msg = JointState(name=names, position=[float(draw(floats32())) for _ in range(draw(st.integers(0, 8)))])
    else:
        msg = JointTrajectory(joint_names=draw(st.lists(st.sampled_from(["right_s0", "right_e1", "nope"]), max_size=4)))
        msg.points = [JointTrajectoryPoint(positions=[float(draw(floats32())) for _ in range(draw(st.integers(0, 4)))])
                      for _ in range(draw(st.integers(0, 2)))]
    return f"publish:{topic}", msg


def cover_every_service() -> list[Any]:
    """For :meth:`Fuzzer.run`'s ``cover``: one strategy per service."""
    return [request_all(service=name) for name in ALL_SERVICES]


def cover_every_topic() -> list[Any]:
    """For :meth:`Fuzzer.run`'s ``cover``: one strategy per topic a node reads. Left to the mixed
    strategy, which topics a few hundred examples reach changed with the modules loaded (Hypothesis
    draws constants from the code under test), so a run could miss some."""
    return [topic_message(topic=name) for name in sorted(TOPICS)]


@st.composite
def request_all(draw: Any, service: str | None = None) -> tuple[str, Any]:
    """One request or message for any service or topic of the four nodes (``service``: that service)."""
    if service in PERCEPTION_SERVICES:
        return draw(request(kind=service))
    if service in WORLD_SERVICES:
        return draw(world_request(kind=service))
    kind = draw(st.sampled_from(["perception"] * 5 + ["world"] * 2 + ["topic"] * 2))
    if kind == "perception":
        return draw(request())
    return draw(world_request() if kind == "world" else topic_message())


# ------------------------------------------------------------------ driver
def describe(req: Any) -> str:
    """A short summary of a request for notes (field sizes, not contents)."""
    parts = []
    for f in req.get_fields_and_field_types():
        v = getattr(req, f)
        if isinstance(v, str):
            parts.append(f"{f}={v[:30]!r}({len(v)})")
        elif hasattr(v, "__len__") and not hasattr(v, "get_fields_and_field_types"):
            parts.append(f"{f}[{len(v)}]")
        elif hasattr(v, "get_fields_and_field_types"):
            parts.append(f"{f}:{describe(v)}")
        else:
            parts.append(f"{f}={v!r}")
    return "{" + ", ".join(parts)[:400] + "}"


def on_the_wire(label: str) -> str:
    """The label the node receives and keeps: rclpy's C conversion ends a string at its first NUL
    (before the request leaves the client, so the node cannot see or refuse it), then it is stripped."""
    return label.split("\x00", 1)[0].strip()


def path_on_the_wire(path: str) -> str:
    """A file name as the node receives it: cut at the first NUL like every string, not stripped."""
    return path.split("\x00", 1)[0]


def _list_request() -> Any:
    from cbcl_pr_ros.srv import ListClasses

    return ListClasses.Request()


def good_features(seed: int, n: int = 4, centre: float = 0.0) -> list:
    from cbcl_pr_ros.msg import FeatureVector

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        m = FeatureVector(backbone=BACKBONE, dimension=DIM)
        m.values = array.array("f", (rng.normal(centre, 1.0, DIM)).astype(np.float32).tobytes())
        out.append(m)
    return out


@dataclass
class Tally:
    requests: int = 0
    by_service: dict = field(default_factory=dict)
    successes: int = 0
    wedged: int = 0
    lost_replies: int = 0  # an idempotent call unanswered, answered at once when sent again
    crashes: int = 0
    classes_lost: int = 0
    errors_internal: int = 0
    late: int = 0  # answered, but later than LATE_S
    successes_by_service: dict = field(default_factory=dict)
    contrary: int = 0  # an answer the shadow model says cannot be right
    published: int = 0
    notes: list = field(default_factory=list)


class Fuzzer:
    """Sends fuzzed requests through ``client`` (conftest Client) and keeps the shadow of classes."""

    def __init__(self, client: Any, procs: dict[str, Any], call_timeout: float = 30.0) -> None:
        self.client = client
        self.procs = procs  # name -> conftest Proc
        self.call_timeout = call_timeout
        self.tally = Tally()
        self.expected: set[str] = set()
        self.saved: dict[str, set[str]] = {}
        self.objects: set[str] = set()  # shadow of sim_world's table
        # successful class mutations, newest last: (request number, service, what it asked, answer, labels)
        self.events: list[tuple[int, str, str, str, frozenset]] = []
        self._reported_lost: set[str] = set()
        self._clients: dict[str, Any] = {}
        self._publishers: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _srv_type(self, name: str) -> Any:
        from cbcl_pr_ros import srv

        return {"teach_class": srv.TeachClass, "classify": srv.Classify, "forget_class": srv.ForgetClass,
                "rename_class": srv.RenameClass, "save_memory": srv.SaveMemory, "load_memory": srv.LoadMemory,
                "list_classes": srv.ListClasses, "extract_features": srv.ExtractFeatures,
                "place_object": srv.PlaceObject, "clear_objects": srv.ClearObjects, "point_at": srv.PointAt,
                "arrange_objects": srv.ArrangeObjects, "set_light": srv.SetLight, "render_view": srv.RenderView}[name]

    def publish(self, topic: str, msg: Any) -> None:
        """Publish one message on ``topic`` (a publisher per topic, made on first use)."""
        with self._lock:
            pub = self._publishers.get(topic)
            if pub is None:
                pub = self.client.node.create_publisher(type(msg), topic, 10)
                self._publishers[topic] = pub
        pub.publish(msg)

    def call(self, name: str, req: Any, late_s: float = 0.0) -> Any:
        """The response, or None when none came within the call timeout (a wedged call).

        With ``late_s`` > 0 a missing answer is waited for that much longer, and how late it came
        (or that it never came) is noted, to tell a slow node from a lost response.
        """
        with self._lock:
            cli = self._clients.get(name)
            if cli is None:
                from cbcl_pr_ros.nodes.qos import service_qos

                # the documented client QoS (docs/security.md): a deep reply history
                cli = self.client.node.create_client(self._srv_type(name), name, qos_profile=service_qos())
                self._clients[name] = cli
        from cbcl_pr_ros.nodes.service_call import wait_ready

        if not wait_ready(cli, self.call_timeout):
            self.tally.notes.append(f"{name}: service not discovered within {self.call_timeout} s")
            return None
        done = threading.Event()
        t0 = time.monotonic()
        fut = cli.call_async(req)
        fut.add_done_callback(lambda _f: done.set())
        answered = done.wait(self.call_timeout)
        if answered and time.monotonic() - t0 > LATE_S:
            self.tally.late += 1
            self.tally.notes.append(f"{name}: answered after {time.monotonic() - t0:.1f} s")
        if not answered:
            if late_s > 0:
                t0 = time.monotonic()
                came = done.wait(late_s)
                self.tally.notes.append(f"{name}: answer {'came %.1f s late' % (self.call_timeout + time.monotonic() - t0) if came else 'never came'}; request {describe(req)}")
            cli.remove_pending_request(fut)
            if name in IDEMPOTENT:
                # A reply can be lost on the client's side (every client of a service reads every
                # reply; docs/security.md): send it again, as the documented client does.
                again = cli.call_async(req)
                done2 = threading.Event()
                again.add_done_callback(lambda _f: done2.set())
                if done2.wait(self.call_timeout):
                    self.tally.lost_replies += 1
                    self.tally.notes.append(f"{name}: reply lost, answered when sent again")
                    return again.result()
                cli.remove_pending_request(again)
            return None
        return fut.result()

    def alive(self) -> bool:
        return all(p.popen.poll() is None for p in self.procs.values())

    def seed_anchors(self) -> None:
        from cbcl_pr_ros.srv import TeachClass

        for i, label in enumerate(ANCHORS):
            r = self.call("teach_class", TeachClass.Request(label=label, features=good_features(i, 4, 3.0 * i)))
            assert r is not None and r.success, getattr(r, "message", "no answer")
            self.expected.add(label)

    def step(self, name: str, req: Any) -> None:
        t = self.tally
        t.requests += 1
        t.by_service[name] = t.by_service.get(name, 0) + 1
        if name.startswith("publish:"):
            self.publish(name.split(":", 1)[1], req)
            t.published += 1
            if not self.alive():
                t.crashes += 1
                t.notes.append(f"crash after {name}")
                raise AssertionError(f"a node ended after a message on {name}")
            return
        resp = self.call(name, req, late_s=90.0)
        if resp is None:
            if self.alive():
                t.wedged += 1
                probe = self.call("list_classes", _list_request(), late_s=0.0)
                t.notes.append(f"wedged: {name}; the learner answers list_classes afterwards: {probe is not None}")
            else:
                t.crashes += 1
                t.notes.append(f"crash after {name}")
                raise AssertionError(f"a node ended after a {name} request")
            return
        ok = bool(getattr(resp, "success", True))
        t.successes += ok
        t.successes_by_service[name] = t.successes_by_service.get(name, 0) + ok
        if name in ("place_object", "clear_objects"):
            self._world_shadow(name, req, resp)
        if "internal error" in getattr(resp, "message", ""):
            t.errors_internal += 1
            t.notes.append(f"internal error: {name}: {resp.message[:120]}")
        if not ok:
            return
        if name in ("teach_class", "forget_class", "rename_class", "save_memory", "load_memory"):
            asked = {k: getattr(req, k) for k in ("label", "old_label", "new_label", "path") if hasattr(req, k)}
            labels = frozenset(on_the_wire(v) for k, v in asked.items() if k != "path")
            self.events.append((t.requests, name, repr(asked)[:120], str(getattr(resp, "message", ""))[:160], labels))
        if name == "teach_class":
            self.expected.add(on_the_wire(req.label))
        elif name == "forget_class":
            self.expected.discard(on_the_wire(req.label))
        elif name == "rename_class":
            self.expected.discard(on_the_wire(req.old_label))
            self.expected.add(on_the_wire(req.new_label))
        elif name == "save_memory" and resp.path != DEFAULT_FILE:
            self.saved[resp.path] = set(self.expected)
        elif name == "load_memory" and path_on_the_wire(req.path) not in ("", DEFAULT_FILE):
            # the default file is autosaved after every change: loading it changes nothing. The
            # name is the one the node received ('a\x00b' arrives as 'a' and loads file 'a').
            self.expected = set(self.saved.get(path_on_the_wire(req.path), self.expected))

    def _contrary(self, what: str) -> None:
        self.tally.contrary += 1
        self.tally.notes.append(f"contrary to the shadow model: {what[:200]}")

    def _world_shadow(self, name: str, req: Any, resp: Any) -> None:
        """sim_world's answers against the shadow of the table (what was placed and not cleared)."""
        import re

        if name == "place_object":
            wanted = on_the_wire(req.name or "")
            if resp.success:
                if resp.name in self.objects or len(self.objects) >= WORLD_MAX_OBJECTS \
                        or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", resp.name) \
                        or (wanted and resp.name != wanted):
                    self._contrary(f"place succeeded: {resp.name!r} (table {sorted(self.objects)[:8]})")
                self.objects.add(resp.name)
            elif wanted in self.objects and "already" not in resp.message and "most placed" not in resp.message:
                pass  # refused for another reason (category, position): nothing to check
            return
        asked = list(dict.fromkeys(req.names))
        if resp.success:
            expected = asked or sorted(self.objects)
            if sorted(resp.removed) != sorted(expected) or not set(expected) <= self.objects:
                self._contrary(f"clear {asked[:4]} removed {list(resp.removed)[:4]} (table {sorted(self.objects)[:8]})")
            self.objects -= set(resp.removed)
        elif asked and set(asked) <= self.objects and len(asked) <= WORLD_MAX_OBJECTS:
            self._contrary(f"clear {asked[:4]} refused although all are on the table: {resp.message[:120]}")

    def check_world(self) -> int:
        """Clear the whole table: exactly the shadow's objects must come off (contrary answers counted)."""
        from cbcl_pr_ros.srv import ClearObjects

        before = self.tally.contrary
        r = self.call("clear_objects", ClearObjects.Request(names=[]))
        if r is None:
            self.tally.wedged += 1
            return -1
        if sorted(r.removed) != sorted(self.objects):
            self._contrary(f"table held {sorted(r.removed)[:8]}, shadow {sorted(self.objects)[:8]}")
        self.objects.clear()
        return self.tally.contrary - before

    def check_classes(self) -> int:
        """Classes the learner should hold but does not (0 is the target); updates the tally."""
        from cbcl_pr_ros.srv import ListClasses

        r = self.call("list_classes", ListClasses.Request())
        if r is None:
            self.tally.wedged += 1
            return -1
        held = {c.name for c in r.classes}
        lost = self.expected - held
        if lost:
            self.tally.notes.append(f"lost {sorted(lost)[:5]} (held {sorted(held)[:10]})")
            self.tally.notes.extend(self.explain(lost))
        self.tally.classes_lost += len(lost)
        return len(lost)

    def audit(self) -> None:
        """Between requests: note (once per class) a class the learner should hold but does not, with the
        successful mutations that touched it since it was taught, so a loss is found where it happened."""
        from cbcl_pr_ros.srv import ListClasses

        r = self.call("list_classes", ListClasses.Request())
        if r is None:
            return
        lost = self.expected - {c.name for c in r.classes} - self._reported_lost
        if lost:
            self._reported_lost |= lost
            self.tally.notes.append(f"audit after request {self.tally.requests}: missing {sorted(lost)[:5]}")
            self.tally.notes.extend(self.explain(lost))

    def explain(self, lost: set[str]) -> list[str]:
        """The events since each lost class was last taught: which mutation or load dropped it."""
        out = []
        for label in sorted(lost)[:5]:
            since = [i for i, e in enumerate(self.events) if e[1] == "teach_class" and label in e[4]]
            first = since[-1] if since else 0
            later = [e for e in self.events[first:] if e[1] in ("load_memory", "save_memory") or label in e[4]]
            out.append(f"  {label!r}: " + " | ".join(f"#{n} {name} {asked} -> {msg}" for n, name, asked, msg, _ in later[:12]))
        return out

    def run(self, examples: int, seed: int | None = None,
            on_example: Callable[[int], None] | None = None, strategy: Any = None,
            cover: Sequence[Any] = ()) -> Tally:
        """``examples`` hypothesis-generated requests, one per example (no shrinking: the nodes keep state);
        ``strategy``: :func:`request` (learner and extractor, default) or :func:`request_all`; each of
        ``cover`` (strategies, e.g. :func:`cover_every_service`) gives one of the examples first, so a
        sample of a few hundred reaches every service for sure."""
        count = [0]
        strategy = strategy if strategy is not None else request()
        cover = list(cover)[:examples]
        plan = [(s, 1) for s in cover] + [(strategy, examples - len(cover))]
        for strat, n in plan:
            if n <= 0:
                continue

            @settings(max_examples=n, deadline=None, database=None, derandomize=seed is not None,
                      suppress_health_check=list(HealthCheck), phases=["generate"], print_blob=False)
            @given(strat)
            def one(item: tuple[str, Any]) -> None:
                name, req = item
                self.step(name, req)
                count[0] += 1
                if on_example is not None:
                    on_example(count[0])

            one()
        return self.tally


def prepare_memory_dir(mem: Any, outside: Any) -> None:
    """Traps in the memory directory: a FIFO, a link out of it, a big file, a garbage file."""
    import os

    mem.mkdir(parents=True, exist_ok=True)
    outside.write_text("must never change")
    os.mkfifo(mem / "fifo")
    (mem / "link_out").symlink_to(outside)
    (mem / "big.bin").write_bytes(b"\0" * (2 * 1024 * 1024))
    (mem / "garbage.safetensors").write_bytes(os.urandom(4096))


def learner_params(mem: Any) -> dict[str, Any]:
    return {"memory_dir": str(mem), "memory_path": "memory.safetensors", "teach_timeout_s": 0.5,
            "max_teach_timeout_s": 2.0, "extract_timeout_s": 10.0, "status_period_s": 0.5,
            "max_memory_file_bytes": 1024 * 1024}



# ------------------------------------------------------------------ lifecycle race (issue 22)
def lifecycle_race(client: Any, proc: Any, transitions: int, vectors: Callable[[int, int], list],
                   seed: int = 0, node: str = "learner") -> dict:
    """Drive ``transitions`` random lifecycle transitions of a live learner while a second thread
    teaches without pause (feature requests and stream teaches, for which a third thread publishes
    ``features`` at ~30 Hz). ``vectors(seed, n)`` gives n FeatureVector messages of the learner's
    backbone. Counts: successes answered, classes lost (answered success but not held once the node
    is active again: a false success), answers without a reason, transitions that failed.
    """
    import random

    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    from cbcl_pr_ros.msg import FeatureVector
    from cbcl_pr_ros.nodes.qos import service_qos
    from cbcl_pr_ros.srv import ListClasses, TeachClass

    rnd = random.Random(seed)
    change = client.node.create_client(ChangeState, f"/{node}/change_state")
    get = client.node.create_client(GetState, f"/{node}/get_state")
    teach = client.node.create_client(TeachClass, "teach_class", qos_profile=service_qos())
    pub = client.node.create_publisher(FeatureVector, "features", 10)
    stop = threading.Event()
    out = {"transitions_asked": 0, "transitions_done": 0, "transitions_failed": 0, "teaches": 0,
           "teach_successes": 0, "stream_teaches": 0, "refusals": 0, "refusals_without_reason": 0,
           "unanswered_teaches": 0, "refusal_reasons": {}}
    confirmed: set[str] = set()
    refused: set[str] = set()

    def publish() -> None:
        i = 0
        while not stop.is_set():
            for m in vectors(10_000 + i, 1):
                pub.publish(m)
            i += 1
            time.sleep(0.033)

    def teach_loop() -> None:
        j = 0
        while not stop.is_set():
            label = f"race_{j}"
            stream = j % 3 == 2
            req = (TeachClass.Request(label=label, num_frames=3, timeout_s=1.0) if stream
                   else TeachClass.Request(label=label, features=vectors(j, 4)))
            try:
                r = client.request(teach, req, timeout=60.0)
            except TimeoutError:
                out["unanswered_teaches"] += 1
                j += 1
                continue
            out["teaches"] += 1
            out["stream_teaches"] += stream
            if r.success:
                out["teach_successes"] += 1
                confirmed.add(label)
            else:
                refused.add(label)
                out["refusals"] += 1
                out["refusals_without_reason"] += not r.message.strip()
                key = r.message.split(":")[0][:60]
                out["refusal_reasons"][key] = out["refusal_reasons"].get(key, 0) + 1
            j += 1

    def state_now() -> str:
        """get_state, sent again when a reply is lost (idempotent; docs/security.md, lost replies)."""
        for attempt in range(4):
            try:
                return client.request(get, GetState.Request(), timeout=15.0).current_state.label
            except TimeoutError:
                out["get_state_resent"] = out.get("get_state_resent", 0) + 1
        raise TimeoutError("get_state unanswered 4 times")

    threads = [threading.Thread(target=f, daemon=True) for f in (publish, teach_loop)]
    for t in threads:
        t.start()
    try:
        while out["transitions_asked"] < transitions:
            state = state_now()
            label = {"active": "deactivate", "unconfigured": "configure"}.get(
                state, rnd.choice(["cleanup", "activate"]) if state == "inactive" else None)
            if label is None:
                time.sleep(0.05)  # mid-transition
                continue
            ok = client.request(change, ChangeState.Request(transition=Transition(label=label)), timeout=120.0).success
            out["transitions_asked"] += 1
            out["transitions_done" if ok else "transitions_failed"] += 1
            time.sleep(rnd.uniform(0.0, 0.15))
    finally:
        stop.set()
        for t in threads:
            t.join(90)
    # back to active, then every class answered success must be there
    for _ in range(4):
        state = state_now()
        if state == "active":
            break
        nxt = {"unconfigured": "configure", "inactive": "activate"}[state]
        client.request(change, ChangeState.Request(transition=Transition(label=nxt)), timeout=120.0)
    held = {c.name for c in client.call(ListClasses, "list_classes", ListClasses.Request(), timeout=60.0).classes}
    out["classes_confirmed"] = len(confirmed)
    out["classes_held"] = len(held)
    out["false_successes"] = len(confirmed - held)
    out["refused_but_held"] = len(refused & held)
    out["confirmed"] = confirmed
    out["alive"] = proc.popen.poll() is None
    return out


def start_world_and_arm(h: Any, domain_id: int, log_dir: Any) -> dict[str, Any]:
    """sim_world (1 Hz, 64x48, no shadows: cheap) and the arm as child processes, for the fuzzer.
    ``h``: the ros_testing module."""
    import sys

    import yaml

    over = log_dir / "robot_nodes.params.yaml"
    over.write_text(yaml.safe_dump({
        "/**/sim_world": {"ros__parameters": {"rate_hz": 1.0, "width": 64, "height": 48, "shadows": False}},
        "/**/arm": {"ros__parameters": {"backend": "sim"}}}))
    out = {}
    for node, exe in (("sim_world", "sim_world_node"), ("arm", "arm_node")):
        args = [sys.executable, str(h.installed_executable(exe)), "--ros-args", "--params-file", str(over)]
        out[node] = h.Proc(args, h.ros_env(domain_id), log_dir / f"{exe}.log")
    return out
