"""``teaching_page_node``: the teaching page (docs/teaching_page.md) as a client of the learner.

Serves http://127.0.0.1:8080 (parameters ``address``, ``port``, ``token``). It reads the camera
(``image``), the learner's ``detections`` and ``status``, and calls the learner's ``teach_class``
(by track id or box), ``rename_class``, ``forget_class``, ``list_classes`` and the arm's
``point_at``: all relative names, so a namespace or remapping applies as for the other nodes. No
logic lives here: the web application and its checks are :mod:`cbcl_pr_ros.teaching_page`.

A detection is drawn on the very frame it was made on: frames are kept by stamp until their
detections arrive (they come one extraction + classification later). Without detections for
``plain_after_s`` the picture goes on with the newest objects marked late (a loaded machine); after
30 s without any (no depth, object detection off) the page says that no detections come.

Examples::

    teaching_page_node                                       # then open http://127.0.0.1:8080
    teaching_page_node --ros-args -p port:=8090 -r __ns:=/robot1
    teaching_page_node --ros-args -p address:=0.0.0.0 -p token:=a-long-secret   # http://HOST:8080/?token=a-long-secret
"""
from __future__ import annotations

import errno
import math
import random
import sys
import threading
import time
from typing import Any

import cv2
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import Image, RegionOfInterest

from cbcl_pr_ros.msg import Detections, LearnerStatus
from cbcl_pr_ros.nodes.camera_hint import camera_hint, image_topics
from cbcl_pr_ros.nodes.cli_help import exit_on_help
from cbcl_pr_ros.nodes.ros_params import ParameterRefused, declare_read_only
from cbcl_pr_ros.settings.robot_params import PAGE_PARAMS
from cbcl_pr_ros.nodes.conversions import image_msg_to_rgb
from cbcl_pr_ros.nodes.detections_msgs import built_within_bounds, detections_from_serialized
from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.nodes.qos import image_qos, result_qos, service_qos, status_qos
from cbcl_pr_ros.nodes.service_call import ServiceUnavailable, call_service
from cbcl_pr_ros.nodes.spin import run_node
from cbcl_pr_ros.runtime.frame_buffer import FrameBuffer
from cbcl_pr_ros.srv import ForgetClass, ListClasses, LookAt, PlaceObject, PointAt, RenameClass, TeachClass
from cbcl_pr_ros.stamps import stamp_to_ns, stamp_to_s
from cbcl_pr_ros.teaching_page.app import PageConfig, PageServer
from cbcl_pr_ros.teaching_page.client import Box, Outcome
from cbcl_pr_ros.teaching_page.state import (MAX_SHOWN_CLASSES, DetectedBox, Frame, PageState, checked_classes,
                                             checked_status)
from cbcl_pr_ros.plurals import counted

__all__ = ["TeachingPageNode", "CAMERA_SILENT_S", "main"]

# What "put objects on the table" offers in the simulated world (robot/assets.py CATALOGUE, the
# everyday ones), three at a time
SIM_CATEGORIES = ("mug", "duck", "teddy", "bunny", "ball", "bottle", "can", "lemon", "bread", "milk")
PLACE_COUNT = 3
MOVED_M = 0.05  # the camera this far from where it looked at the table: "the view moved"
REHOME_S = 4.0  # after "look at the table", the pose this much later is the table view again
CAMERA_SILENT_S = 5.0  # no picture for this long: the page and the log say where it waits and why
# Detections this old are "late" (the objects of the newest ones are shown, marked so); older, or never
# any, "none" (the learner sends none: detection off, no depth, not running).
LATE_FOR_S = 30.0
MAX_OBJECTS = 100  # objects of one detections message the page shows (a message is a stranger's)
MAX_LABEL = 128  # characters of a detection's label the page keeps and shows
FRAME_BYTES = 256 * 1024 * 1024  # camera frames held for their detections, at most (the newest always)


def page_boxes(msg: Detections) -> tuple[DetectedBox, ...]:
    """What the page shows of a detections message: its first ``MAX_OBJECTS`` objects, labels cut to
    ``MAX_LABEL`` characters, confidences in [0, 1] (a non-finite one is 0: the page's JSON has no NaN)."""
    def conf(v: float) -> float:
        return min(max(float(v), 0.0), 1.0) if math.isfinite(v) else 0.0

    return tuple(DetectedBox(int(o.id), str(o.label)[:MAX_LABEL], bool(o.known), conf(o.confidence),
                             int(o.x0), int(o.y0), int(o.x1), int(o.y1)) for o in msg.objects[:MAX_OBJECTS])


def listen_refusal(address: str, port: int, exc: OSError) -> str:
    """Why the page cannot listen where its parameters say, and what to change, in one line: the
    socket's own error names neither the parameter nor the remedy."""
    where = f"{address}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (f"the teaching page cannot listen on {where}: another program (another teaching page?) "
                f"already uses port {port}. Stop it, or give the page another port: parameter port "
                f"(--ros-args -p port:=8081; port: in the page's YAML, --page-config or page_config:=; "
                f"0 = any free port)")
    return (f"the teaching page cannot listen on {where}: {exc.strerror or exc}. Check the parameters "
            f"address and port (address: an address of this machine, 127.0.0.1 for this machine only)")


class TeachingPageNode(Node):
    """ROS side of the page: feeds :class:`PageState`, implements the page's teaching client."""

    def __init__(self, *, node_name: str = "teaching_page", namespace: str | None = None,
                 start_server: bool = True, **kwargs: Any) -> None:
        super().__init__(node_name, namespace=namespace, **kwargs)
        g = declare_read_only(self, PAGE_PARAMS)  # read once, here (settings/robot_params.py)
        self.quality = int(g("jpeg_quality"))
        self.min_period = 1.0 / float(g("max_fps"))
        self.max_pixels = int(g("max_image_pixels"))
        self.plain_after = float(g("plain_after_s"))
        self.teach_timeout, self.call_timeout = float(g("teach_timeout_s")), float(g("call_timeout_s"))
        self.state = PageState()
        self._frames: FrameBuffer[Image] = FrameBuffer(capacity=64, max_bytes=FRAME_BYTES,
                                                       size=lambda m: len(m.data))  # a stranger's sizes
        self._last_sent = 0.0
        self._last_detections: float | None = None
        self._last_objects: tuple[DetectedBox, ...] = ()
        self._last_version = 0
        self._last_frame: float | None = None  # monotonic time of the newest camera message
        self._started = time.monotonic()
        self._camera_hint = ""
        self._send_lock = threading.Lock()
        self._listed_version = -1

        self._home: tuple[float, float, float] | None = None  # where the camera looked at the table
        self._rehome_after = 0.0
        self._subscribe()
        gc = lambda fn, what: guard_callback(self, fn, what)  # noqa: E731
        calls = ReentrantCallbackGroup()  # answers arrive while a page thread waits for them
        mk = lambda t, n: self.create_client(t, n, qos_profile=service_qos(), callback_group=calls)  # noqa: E731
        self.teach_cli = mk(TeachClass, "teach_class")
        self.rename_cli = mk(RenameClass, "rename_class")
        self.forget_cli = mk(ForgetClass, "forget_class")
        self.list_cli = mk(ListClasses, "list_classes")
        self.point_cli = mk(PointAt, "point_at")
        self.look_cli = mk(LookAt, "look_at")  # the arm: back to the table after pointing
        self.place_cli = mk(PlaceObject, "place_object")  # the simulated world only
        self._rng = random.Random()
        self.create_timer(2.0, gc(self._probe_robot, "robot probe"), callback_group=calls)
        self.create_timer(2.0, gc(self._watch_camera, "camera watch"), callback_group=calls)
        self.state.set_camera({"topic": self.camera_topic, "waiting": True, "hint": ""})
        self.server: PageServer | None = None
        if start_server:
            names = [n for n in str(g("host_names")).split(",") if n.strip()]
            self.server = PageServer(self.state, self, PageConfig(g("address"), int(g("port")), g("token"),
                                                                  host_names=names, max_pages=int(g("max_pages"))))
            try:
                self.server.start()
            except OSError as exc:  # a start value this machine cannot serve: one line, not a traceback
                raise ParameterRefused(listen_refusal(str(g("address")), int(g("port")), exc)) from None
            self.get_logger().info(f"teaching page on {self.server.url} (camera '{self.camera_topic}', "
                                   f"learner '{self.resolve_service_name('teach_class')}')")

    def _subscribe(self) -> None:
        """The topics spin on a single-threaded executor of their own (nodes/spin.py), the service
        clients and timers on the pool: there, frames, detections and poses at camera rate woke the
        pool's spin thread some 600 times a second (bench/bench_idle.py). None of these callbacks waits."""
        one = MutuallyExclusiveCallbackGroup
        sensors, detections, poses, status = one(), one(), one(), one()
        self.stream_callback_groups = (sensors, detections, poses, status)
        gc = lambda fn, what: guard_callback(self, fn, what)  # noqa: E731
        self.create_subscription(Image, "image", gc(self._on_image, "image"), image_qos(), callback_group=sensors)
        self.create_subscription(Detections, "detections", gc(self._on_detections, "detections"), result_qos(2),
                                 callback_group=detections, raw=True)  # counted, then built
        self.create_subscription(PoseStamped, "camera_pose", gc(self._on_camera_pose, "camera pose"), 2,
                                 callback_group=poses)
        self.create_subscription(LearnerStatus, "status", gc(self._on_status, "status"), status_qos(),
                                 callback_group=status)

    # ------------------------------------------------------------------ camera and detections
    @property
    def camera_topic(self) -> str:
        """The topic ``image`` resolves to (namespace and remaps applied)."""
        return self.resolve_topic_name("image")

    def _on_image(self, msg: Image) -> None:
        self._frames.put(stamp_to_ns(msg.header.stamp), msg)
        now = time.monotonic()
        if self._last_frame is None or now - self._last_frame > CAMERA_SILENT_S:
            self.state.set_camera({"topic": self.camera_topic, "waiting": False, "hint": ""})
            if self._camera_hint:
                self.get_logger().info(f"camera picture arrives on '{self.camera_topic}'")
            self._camera_hint = ""
        self._last_frame = now
        since = None if self._last_detections is None else now - self._last_detections
        if since is None or since > self.plain_after:
            # no detections for a while: the picture goes on; the objects last seen stay, marked late
            late = since is not None and since <= LATE_FOR_S
            how = "late" if late else "waiting" if since is None and now - self._started <= LATE_FOR_S else "none"
            self._send(msg, self._last_objects if late else (), self._last_version if late else 0, how, since or 0.0)

    def _on_detections(self, msg: Detections | bytes) -> None:
        msg = built_within_bounds(msg, detections_from_serialized, self.get_logger(), "detections")
        if msg is None:
            return
        objs = page_boxes(msg)
        self._last_detections = time.monotonic()
        self._last_objects, self._last_version = objs, int(msg.model_version)
        frame = self._frames.pop(stamp_to_ns(msg.header.stamp))
        if frame is None:  # the picture of these detections is gone (or never came): shown late with the next
            return
        self._send(frame, objs, int(msg.model_version))

    def _send(self, msg: Image, objs: tuple[DetectedBox, ...], version: int, detections: str = "fresh",
              age_s: float = 0.0) -> None:
        now = time.monotonic()
        with self._send_lock:
            if now - self._last_sent < self.min_period:
                return
            self._last_sent = now
        try:
            rgb = image_msg_to_rgb(msg, self.max_pixels)
        except (ValueError, TypeError) as exc:  # a publisher's bad frame: its mistake, said as a warning
            self.get_logger().warning(f"camera frame not shown: {exc}", throttle_duration_sec=1.0)
            return
        ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR),
                                [cv2.IMWRITE_JPEG_QUALITY, self.quality])
        if not ok:
            raise ValueError("JPEG encoding failed")
        stamp = stamp_to_s(msg.header.stamp)
        self.state.set_frame(Frame(jpeg.tobytes(), rgb.shape[1], rgb.shape[0], stamp, objs, version, 0, detections,
                                   age_s))

    def _watch_camera(self) -> None:
        """No picture for a while: tell the page and the log which topic the page waits on and which
        Image topics exist (with the remap to use); said again only when that changes."""
        now = time.monotonic()
        if now - (self._last_frame if self._last_frame is not None else self._started) < CAMERA_SILENT_S:
            return
        topic = self.camera_topic
        hint = camera_hint(topic, image_topics(self.get_topic_names_and_types(), exclude=topic,
                                               published=self.count_publishers))
        publishers = self.count_publishers(topic)
        if publishers:
            hint = (f"'{topic}' has {counted(publishers, 'publisher')} but no picture came for {CAMERA_SILENT_S:g} s: "
                    "is the camera streaming?")
        if hint != self._camera_hint:
            self._camera_hint = hint
            self.state.set_camera({"topic": topic, "waiting": True, "hint": hint})
            self.get_logger().warning(hint)

    def _on_camera_pose(self, msg: PoseStamped) -> None:
        """A camera on an arm (the simulated Baxter's hand camera) that moved away from where it looked
        at the table: the page says so and offers the way back, whoever moved it."""
        p = msg.pose.position
        pos = (float(p.x), float(p.y), float(p.z))
        if not all(math.isfinite(v) for v in pos):
            return
        if self._home is None or (self._rehome_after and time.monotonic() >= self._rehome_after):
            self._home, self._rehome_after = pos, 0.0
            return
        away = math.dist(pos, self._home) > MOVED_M
        at = self.state.snapshot()[1]["view"].get("at")
        if away and at not in ("pointing", "moved"):
            self.state.set_view({"at": "moved"})
        elif not away and at in ("pointing", "moved"):
            self.state.set_view({"at": "table"})

    # ------------------------------------------------------------------ learner status and classes
    def _on_status(self, msg: LearnerStatus) -> None:
        try:
            status = checked_status({"num_classes": int(msg.num_classes), "num_clusters": int(msg.num_clusters),
                                     "cluster_budget": int(msg.cluster_budget), "memory_bytes": int(msg.memory_bytes),
                                     "model_version": int(msg.model_version)}, msg.backbone,
                                    msg.class_names[:MAX_SHOWN_CLASSES])
        except ValueError as exc:
            self.get_logger().warning(f"status ignored: {exc}", throttle_duration_sec=10.0)
            return
        self.state.set_status({**status, "training": bool(msg.training)})
        if int(msg.model_version) != self._listed_version:
            self._listed_version = int(msg.model_version)
            self._refresh_classes()

    def _refresh_classes(self) -> None:
        if not self.list_cli.service_is_ready():
            # not listed: the next status asks again (a starting learner publishes its first status
            # just before it offers list_classes)
            self._listed_version = -1
            return
        fut = self.list_cli.call_async(ListClasses.Request())

        fut.add_done_callback(lambda f: self._on_class_list(f.result()))

    def _on_class_list(self, res: Any) -> None:
        if res is None:
            return
        try:
            rows = [(c.name, int(c.num_clusters), int(c.num_examples)) for c in res.classes[:MAX_SHOWN_CLASSES]]
            self.state.set_classes(checked_classes(rows), total=len(res.classes))
        except ValueError as exc:
            self.get_logger().warning(f"class list ignored: {exc}", throttle_duration_sec=10.0)

    def _probe_robot(self) -> None:
        robot = {"arm": self.point_cli.service_is_ready(), "look": self.look_cli.service_is_ready(),
                 "world": self.place_cli.service_is_ready()}
        if self.state.snapshot()[1]["robot"] != robot:
            self.state.set_robot(robot)
        if self._listed_version < 0 or not self.state.snapshot()[1]["classes"]:
            self._refresh_classes()

    # ------------------------------------------------------------------ the page's teaching client
    def _call(self, client: Any, request: Any, timeout: float, what: str) -> Any:
        try:
            return call_service(client, request, timeout, what)
        except ServiceUnavailable as exc:
            return Outcome(False, str(exc))

    def _answer(self, res: Any) -> Outcome:
        if isinstance(res, Outcome):
            return res
        if res.success:
            self._refresh_classes()
        track, roi = int(getattr(res, "taught_track_id", -1)), getattr(res, "taught_roi", None)
        box = None
        if roi is not None and roi.width > 0 and roi.height > 0:
            box = (int(roi.x_offset), int(roi.y_offset), int(roi.x_offset + roi.width), int(roi.y_offset + roi.height))
        return Outcome(bool(res.success), str(res.message), track, box)

    def teach_track(self, label: str, track_id: int) -> Outcome:
        req = TeachClass.Request(label=label, track_id=int(track_id))
        return self._answer(self._call(self.teach_cli, req, self.teach_timeout, "learner"))

    def teach_box(self, label: str, box: Box) -> Outcome:
        x, y, w, h = box
        req = TeachClass.Request(label=label,
                                 rois=[RegionOfInterest(x_offset=x, y_offset=y, width=w, height=h)])
        return self._answer(self._call(self.teach_cli, req, self.teach_timeout, "learner"))

    def rename(self, old: str, new: str) -> Outcome:
        req = RenameClass.Request(old_label=old, new_label=new)
        return self._answer(self._call(self.rename_cli, req, self.call_timeout, "learner"))

    def forget(self, label: str) -> Outcome:
        return self._answer(self._call(self.forget_cli, ForgetClass.Request(label=label), self.call_timeout,
                                       "learner"))

    def point_at(self, label: str) -> Outcome:
        out = self._answer(self._call(self.point_cli, PointAt.Request(label=label), self.call_timeout,
                                      "arm node"))
        if out.ok:  # the hand camera follows the arm: the page shows a close-up now
            self.state.set_view({"at": "pointing", "label": label})
        return out

    def look_at_table(self) -> Outcome:
        out = self._answer(self._call(self.look_cli, LookAt.Request(pose="table"), self.call_timeout, "arm node"))
        if out.ok:
            self.state.set_view({"at": "table"})
            self._rehome_after = time.monotonic() + REHOME_S  # the arm has got there by then
        return out

    def place_objects(self, count: int = PLACE_COUNT) -> Outcome:
        """A few random catalogue objects at free spots of the simulated table."""
        placed, refused = [], ""
        for category in self._rng.sample(SIM_CATEGORIES, k=min(int(count), len(SIM_CATEGORIES))):
            req = PlaceObject.Request(category=category, instance=self._rng.randint(0, 999), random_spot=True)
            res = self._call(self.place_cli, req, self.call_timeout, "simulated world")
            if isinstance(res, Outcome) or not res.success:
                refused = res.message if isinstance(res, Outcome) else str(res.message)
                break
            placed.append(category.replace("_", " "))
        if not placed:
            return Outcome(False, f"nothing put on the table: {refused[:200]}")
        return Outcome(True, f"put on the table: {', '.join(placed)}" + (f" (then: {refused[:120]})" if refused else ""))

    def destroy_node(self) -> None:
        try:
            if getattr(self, "server", None) is not None:  # None too when a start value was refused
                self.server.stop()
        finally:
            super().destroy_node()


def main(args: list[str] | None = None) -> int:
    exit_on_help(sys.argv if args is None else args, "teaching_page_node", __doc__, PAGE_PARAMS)
    return run_node(TeachingPageNode, threads=4, args=args)


if __name__ == "__main__":
    sys.exit(main())
