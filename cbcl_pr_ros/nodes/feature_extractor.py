"""Feature-extractor node: camera frames in, FeatureVector messages out, plus an extraction service.

* Subscribes to ``image`` (remappable; CompressedImage with ``compressed: true``) with sensor-data QoS
  by default. The callback only stores the newest frame; a worker thread extracts and publishes, so a
  slow backbone never queues frames up: stale frames are dropped and counted, the newest is kept.
* Publishes ``features`` (FeatureVector with the source header, backbone and preprocessing id).
* Serves ``extract_features`` for images sent in requests. A request image identical to a recent
  stream frame (same stamp, frame, size and bytes) is answered from the cache, so a vector is computed
  once.
* Logs a hint naming the topic, its QoS and the publishers seen when nothing arrives for a while.
* Every callback is guarded (:mod:`.guard`) and request images are size-checked before decoding
  (``max_images_per_request``, ``max_image_pixels``, ``max_image_bytes``; docs/security.md).
* Per-object perception (``detect_objects``): with ``depth`` and ``camera_info`` (or, when
  ``on``, from RGB alone) the frame's objects are proposed, and the frame and all object crops go
  through the backbone as ONE batch (:func:`cbcl_pr_ros.objects.extract.extract_objects`, without
  ROS); ``object_features`` (ObjectFeatures) carries every object's box, 3-D centroid, size and
  vector. ``features`` is published as before.
* A lifecycle node (:mod:`.lifecycle`): configure loads the backbone, activate subscribes to the
  camera, deactivate lets the camera go, cleanup frees the backbone; ``autostart`` (default true)
  does configure + activate at start. Every topic's QoS takes rclpy's ``qos_overrides.*`` parameters.
"""
from __future__ import annotations

import logging
import re
import sys
import threading
import time
import zlib
from dataclasses import replace
from typing import Any, Sequence

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos import ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, CompressedImage, Image

from cbcl_pr_ros.features import make_backbone
from cbcl_pr_ros.msg import FeatureVector, ObjectFeatures
from cbcl_pr_ros.nodes.camera_pose_input import CameraPoseInput
from cbcl_pr_ros.nodes.camera_hint import image_topics, other_topics_hint
from cbcl_pr_ros.nodes.cli_help import exit_on_help
from cbcl_pr_ros.nodes.conversions import (
    compressed_msg_to_rgb,
    image_msg_to_rgb,
    make_feature_msg,
    stamp_key,
    stamp_to_ns,
)
from cbcl_pr_ros.nodes.detections_msgs import depth_msg_to_array, make_object_features_msg
from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.nodes.lifecycle import ACTIVE, INACTIVE, ManagedNode, overridable
from cbcl_pr_ros.nodes.qos import describe_qos, feature_qos, image_qos
from cbcl_pr_ros.nodes.ros_params import ParameterRefused, declare_parameters, parameter, read_parameters
from cbcl_pr_ros.nodes.spin import run_node
from cbcl_pr_ros.objects import DepthPairing, ExtractSettings, ObjectReuse, PIECES, extract_objects
from cbcl_pr_ros.objects.extract import proposal_segmenter
from cbcl_pr_ros.perception import CameraIntrinsics
from cbcl_pr_ros.plurals import counted, noun
from cbcl_pr_ros.runtime.backbone_turns import BackboneTurns
from cbcl_pr_ros.runtime.frame_buffer import FrameBuffer
from cbcl_pr_ros.runtime.input_grace import InputGrace
from cbcl_pr_ros.runtime.stage_times import StageTimes, stop_lines
from cbcl_pr_ros.request_checks import RequestError, RequestLimits, check_count, check_image_fields
from cbcl_pr_ros.settings.params import EXTRACTOR, specs_for
from cbcl_pr_ros.srv import ExtractFeatures
from cbcl_pr_ros.stamps import check_frame_name, stamp_to_s

__all__ = ["FeatureExtractorNode", "frame_fingerprint", "no_frame_hint", "main"]

log = logging.getLogger(__name__)

#: depth messages held while they wait for their colour frame, at most together: 8 frames of a
#: 1280x720 16-bit camera are 15 MB, but whoever publishes on the depth topic chooses the sizes
DEPTH_BYTES = 128 * 1024 * 1024

#: what the extractor does for a frame without a camera pose (said in the warning)
WITHOUT_POSE = ("the table under the objects is found from the image alone (the largest flat surface is taken "
                "as level, so a wall can be mistaken for it)")


def frame_fingerprint(msg: Any) -> tuple:
    """Identity of an image message's content: stamp key, size, encoding and a CRC of the bytes."""
    data = msg.data
    crc = zlib.crc32(memoryview(data).cast("B")) if len(data) else 0
    enc = getattr(msg, "encoding", getattr(msg, "format", ""))
    return (stamp_key(msg.header), int(getattr(msg, "height", 0)), int(getattr(msg, "width", 0)),
            enc, len(data), crc)


def no_frame_hint(topic: str, waited_s: float, qos_text: str, msg_type: str,
                  publishers: list[tuple[str, str, str]], other_images: Sequence[str] = ()) -> str:
    """The log line for "no frames": topic, our QoS, and what the graph offers (type, reliability).

    ``publishers`` holds (node name, topic type, reliability) per publisher seen on the topic;
    ``other_images`` the other Image topics that exist (named, with the remap to use, when nobody
    publishes on ours).
    """
    head = f"no frame received on '{topic}' for {waited_s:.0f} s (subscribed as {msg_type}, QoS {qos_text})."
    if not publishers:
        where = other_topics_hint(other_images, executable="feature_extractor_node")
        return f"{head} Nobody publishes on it. {where}"
    types = {t for _, t, _ in publishers}
    if any(t != msg_type for t in types):
        return (f"{head} Publishers send {', '.join(sorted(types))}: type mismatch; set "
                f"compressed:={'true' if 'Compressed' in ''.join(types) else 'false'}.")
    if qos_text.startswith("reliable") and all(r == "best_effort" for _, _, r in publishers):
        return (f"{head} QoS mismatch: the publishers are best_effort and this subscription is "
                f"reliable; set qos_overrides.{topic}.subscription.reliability:=best_effort.")
    names = ", ".join(sorted({n for n, _, _ in publishers}))
    return f"{head} {counted(len(publishers), 'publisher')} ({names}) {noun(len(publishers), 'matches', 'match')} but send nothing: is the camera streaming?"


def start_segmenter(p: dict[str, Any], logger: Any) -> Any:
    """The segmenter of ``object_proposals`` learned or hybrid (None for depth), loaded at start; weights our loader
    refuses stop the start with one line (``ParameterRefused``), not on the first frame."""
    try:
        seg = proposal_segmenter(str(p["object_proposals"]), str(p["segmenter_weights"]))
    except ValueError as exc:
        raise ParameterRefused(f"parameter {exc}") from None
    if seg is not None:
        logger.info(f"object proposals: {p['object_proposals']} "
                    f"(segmenter {p['segmenter_weights'] or 'shipped with the package'})")
    return seg


class FeatureExtractorNode(ManagedNode):
    """Camera → feature vectors, as a lifecycle node. ``backbone`` may be injected (tests, the
    one-process session); then configure uses it and cleanup only drops the reference.

    configure: loads the backbone, creates the (lifecycle) publishers and starts the worker thread;
    activate: subscribes to the camera (image, depth, camera_info) and starts the no-frame hint;
    deactivate: releases the camera subscriptions (no frame is taken, nothing published);
    cleanup: stops the worker and frees the backbone. ``extract_features`` answers whenever a
    backbone is loaded (inactive or active): it changes nothing.
    """

    # The camera's subscriptions spin on their own single-threaded executor (``stream_callback_groups``,
    # nodes/spin.py: a pool's GIL churn lost 30 Hz frames); the service and the timer on a small pool,
    # so that an extract_features request, which takes its backbone turns between frames, never holds
    # up the camera's callbacks.
    spin_threads = 2

    def __init__(self, backbone: Any = None, *, node_name: str = "feature_extractor",
                 namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(node_name, namespace=namespace, **kwargs)
        declare_parameters(self, EXTRACTOR)
        p = read_parameters(self, EXTRACTOR)
        self.params = p
        self.segmenter = start_segmenter(p, self.get_logger())  # once: the learned proposals' network, or None
        self.proposal_referee = p["object_proposals"] == "hybrid"  # read-only, like the segmenter
        self._injected = backbone
        self.backbone: Any = None
        self.limits = RequestLimits.from_params(p)
        # Shared with an in-process learner (LocalFeatureSource): stream frames take it first, request
        # images take it a few at a time between frames (runtime/backbone_turns.py).
        self.backbone_lock = BackboneTurns(chunk=2)
        self.compressed = bool(p["compressed"])
        self._msg_type = CompressedImage if self.compressed else Image
        self._cache: FrameBuffer[FeatureVector] = FrameBuffer(capacity=32)

        self._sub_group = MutuallyExclusiveCallbackGroup()
        self._srv_group = MutuallyExclusiveCallbackGroup()
        self._timer_group = MutuallyExclusiveCallbackGroup()
        self._objects_group = MutuallyExclusiveCallbackGroup()
        # the camera's pose by stamp: the fixed frame's up tells the proposer where the table's normal is
        self.camera_poses = CameraPoseInput(p["camera_pose_topic"], self.get_logger(), note_once=False,
                                            without=WITHOUT_POSE)
        self.stream_callback_groups = (self._sub_group, self._objects_group, self.camera_poses.callback_group)
        self.image_sub: Any = None
        self.depth_sub: Any = None
        self.info_sub: Any = None
        self.features_pub: Any = None
        self.objects_pub: Any = None
        self.hint_timer: Any = None
        # depth messages, decoded once paired; a stranger's sizes: at most DEPTH_BYTES held (the newest always)
        self._depths: DepthPairing[Any] = DepthPairing(capacity=8, max_bytes=DEPTH_BYTES, size=lambda m: len(m.data))
        # a still picture keeps its proposals and crop features (objects/reuse.py); one worker uses it
        self._reuse = ObjectReuse(refresh_frames=int(p["crop_refresh_frames"]))
        self._camera_info: Any = None
        self._info_grace = InputGrace()  # the first frames often beat the first CameraInfo: not yet missing
        # newest-frame slot filled by the subscription, emptied by the worker
        self._slot_lock = threading.Condition()
        self._slot: Any = None
        self._slot_time = 0.0  # perf_counter when the frame in the slot arrived
        self._stop = False
        self._worker: threading.Thread | None = None
        self.received = 0
        self.processed = 0
        self.dropped = 0
        self.failed = 0
        self.objects_published = 0
        self.depth_rejected = 0
        self._depth_warned: dict[str, float] = {}  # problem kind -> when it was last warned (monotonic)
        self.times = StageTimes()  # where a frame's time goes (docs/nodes.md "Where the time goes")
        self._last_frame_time: float | None = None  # set at the first check: spinning may start late
        self._last_hint_time = 0.0
        self._hint_backoff = 1.0
        # offered once the autostart has loaded the backbone (ManagedNode.start), never before it can answer
        [self.extract_srv] = self.start(bool(p["autostart"]), [
            (ExtractFeatures, p["extract_service"], self._on_extract, self._srv_group)])

    # ------------------------------------------------------------------ life cycle
    def _configure(self) -> None:
        p = self.params
        backbone = self._injected
        if backbone is None:
            t0 = time.perf_counter()
            backbone = make_backbone(p["backbone"], runtime=p["runtime"], threads=p["threads"],
                                     device=p["device"], precision=p["precision"])
            self.get_logger().info(f"backbone {backbone!r} ready in {time.perf_counter() - t0:.1f} s")
        elif backbone.name != p["backbone"]:
            self.get_logger().warning(f"injected backbone '{backbone.name}' differs from parameter "
                                      f"backbone '{p['backbone']}'; using the injected one")
        self.backbone = backbone
        self.features_pub = self.create_lifecycle_publisher(
            FeatureVector, p["features_topic"], feature_qos("reliable", depth=10),
            qos_overriding_options=overridable())
        self.objects_pub = self.create_lifecycle_publisher(
            ObjectFeatures, p["object_features_topic"], feature_qos("reliable", depth=10),
            qos_overriding_options=overridable())
        with self._slot_lock:
            self._stop, self._slot = False, None
        self._worker = threading.Thread(target=self._work, name="feature_extractor_worker", daemon=True)
        self._worker.start()
        self.get_logger().info(f"configured: backbone {backbone.name} loaded, worker started")

    def _activate(self) -> None:
        p = self.params
        self._last_frame_time = None
        self._hint_backoff = 1.0
        self.image_sub = self.create_subscription(self._msg_type, p["image_topic"],
                                                  guard_callback(self, self._on_image, "camera frame"),
                                                  image_qos(),
                                                  callback_group=self._sub_group,
                                                  qos_overriding_options=overridable())
        self.depth_sub = self.create_subscription(Image, p["depth_topic"],
                                                  guard_callback(self, self._on_depth, "depth frame"),
                                                  image_qos(),
                                                  callback_group=self._objects_group,
                                                  qos_overriding_options=overridable())
        self.info_sub = self.create_subscription(CameraInfo, p["camera_info_topic"],
                                                 guard_callback(self, self._on_camera_info, "camera_info"),
                                                 image_qos(),
                                                 callback_group=self._objects_group,
                                                 qos_overriding_options=overridable())
        self.camera_poses.subscribe(self)
        # a timer runs on the node clock: under use_sim_time the hint follows a bag's /clock
        self.hint_timer = self.create_timer(1.0, guard_callback(self, self._check_frames, "frame check"),
                                            callback_group=self._timer_group)
        b = self.backbone
        self.get_logger().info(
            f"extracting {b.name} features ({b.feature_dim}-d, runtime {b.runtime}, device "
            f"{getattr(b, 'device', '?')}, precision {getattr(b, 'precision', '?')}) from "
            f"'{self.image_sub.topic_name}' ({self._msg_type.__name__}, QoS "
            f"{describe_qos(self.image_sub.qos_profile)}) to '{self.features_pub.topic_name}'; "
            f"service '{self.resolve_service_name(p['extract_service'])}' (active)")

    def _deactivate(self) -> None:
        self.release("image_sub", "depth_sub", "info_sub", "hint_timer")
        self.camera_poses.release(self)
        with self._slot_lock:
            self._slot = None  # a stream frame not yet taken: dropped, as a camera frame may be
        self._depths.clear()
        self._camera_info = None
        self._info_grace.reset()

    def _cleanup(self, final: bool) -> None:
        self._stop_worker()
        self.release("features_pub", "objects_pub")
        with self.backbone_lock:  # an in-process learner may be mid-batch on it
            self.backbone = None
        self._cache = FrameBuffer(capacity=32)
        self._depths.clear()
        self._reuse.reset()  # features of another backbone must not be reused

    def _stop_worker(self) -> None:
        with self._slot_lock:
            self._stop = True
            self._slot_lock.notify_all()
        if self._worker is not None:
            self._worker.join(timeout=5.0)
            self._worker = None

    def _now(self) -> float:
        """Node clock in seconds: with ``use_sim_time`` the no-frame hint follows a bag's /clock."""
        return self.get_clock().now().nanoseconds * 1e-9

    # ------------------------------------------------------------------ stream
    def _on_image(self, msg: Any) -> None:
        # stamp -> callback: transport plus executor wait (meaningful when the camera stamps with this host's clock)
        self.times.add("stamp_to_callback", time.time() - stamp_to_s(msg.header.stamp))
        with self._slot_lock:
            if self._slot is not None:
                self.dropped += 1  # the worker had not taken the previous frame yet
            self._slot = msg
            self._slot_time = time.perf_counter()
            self.received += 1
            self._last_frame_time = self._now()
            self._slot_lock.notify()

    def _work(self) -> None:
        while True:
            with self._slot_lock:
                while self._slot is None and not self._stop:
                    self._slot_lock.wait(0.5)
                if self._stop:
                    return
                msg, self._slot = self._slot, None
                self.times.add("queue", time.perf_counter() - self._slot_time)
            try:
                with self.times.stage("frame"):
                    self._process(msg)
            except Exception as exc:  # one bad frame must not stop the stream
                self.failed += 1
                self.get_logger().warning(f"frame skipped: {exc}", throttle_duration_sec=5.0)

    def _decode(self, msg: Any):
        most = self.limits.max_image_pixels  # a camera frame is a stranger's too: refused before any work
        return compressed_msg_to_rgb(msg, most) if self.compressed else image_msg_to_rgb(msg, most)

    def _process(self, msg: Any) -> None:
        backbone, pub = self.backbone, self.features_pub
        if backbone is None or pub is None or self.phase != ACTIVE:
            return  # deactivated or cleaned up while the frame waited: a stream frame, dropped
        check_frame_name(msg.header.frame_id)  # a learner refuses longer ones: no backbone pass for them
        times = self.times
        with times.stage("decode"):
            rgb = self._decode(msg)
        if self._objects_wanted():
            self._process_objects(msg, rgb, backbone)
            return
        with self.backbone_lock, times.stage("backbone"):
            vec = backbone.extract([rgb])[0]
        with times.stage("publish"):
            out = make_feature_msg(msg.header, backbone.name, backbone.preprocessing_id, vec)
            if not self.compressed:
                self._cache.put(frame_fingerprint(msg), out)
            pub.publish(out)
        self.processed += 1

    def _check_frames(self) -> None:
        """Hint after ``no_frame_warning_s`` without frames, then again at doubling intervals (≤ 60 s)."""
        limit = float(self.get_parameter("no_frame_warning_s").value)
        sub = self.image_sub
        if sub is None:
            return
        now = self._now()
        if self._last_frame_time is None:
            self._last_frame_time = self._last_hint_time = now
        silent = now - self._last_frame_time
        if limit <= 0 or silent < limit:
            self._hint_backoff = 1.0
            return
        if now - max(self._last_hint_time, self._last_frame_time) < min(60.0, limit * self._hint_backoff):
            return
        self._last_hint_time = now
        self._hint_backoff *= 2.0
        infos = self.get_publishers_info_by_topic(sub.topic_name)
        pubs = [(i.node_name, i.topic_type.replace("/msg/", "/"),
                 "best_effort" if i.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT else "reliable")
                for i in infos]
        msg_type = "sensor_msgs/CompressedImage" if self.compressed else "sensor_msgs/Image"
        others = (image_topics(self.get_topic_names_and_types(), exclude=sub.topic_name,
                               published=self.count_publishers) if not pubs else [])
        self.get_logger().warning(no_frame_hint(sub.topic_name, now - self._last_frame_time,
                                                describe_qos(sub.qos_profile), msg_type, pubs, others))

    # ------------------------------------------------------------------ objects
    def _on_depth(self, msg: Image) -> None:
        self._depths.put(stamp_to_ns(msg.header.stamp), msg)

    def _on_camera_info(self, msg: CameraInfo) -> None:
        self._camera_info = msg

    def _objects_wanted(self) -> bool:
        mode = str(parameter(self, "detect_objects"))  # YAML on/off booleans mean on/off
        return mode == "on" or (mode == "auto" and self._depths.seen)

    def _depth_for(self, header: Any) -> tuple[Any, Any, Any]:
        """(depth metres or None, intrinsics or None, their calibrated (width, height) or None: no
        CameraInfo yet) for an image: its depth message paired by stamp (objects/depth_pairing.py), decoded."""
        info = self._camera_info
        try:
            K = CameraIntrinsics.from_k(info.k) if info is not None else None
        except ValueError:
            K = None
        size = (info.width, info.height) if info is not None else None
        dmsg = self._depths.take(stamp_to_ns(header.stamp), float(self.get_parameter("depth_max_age_s").value))
        if dmsg is None:
            return None, K, size
        try:
            return depth_msg_to_array(dmsg, self.limits.max_image_pixels), K, size
        except ValueError as exc:  # a malformed depth frame: RGB-only proposals for this frame
            self.depth_rejected += 1
            self.get_logger().warning(f"depth frame ignored: {exc}", throttle_duration_sec=10.0)
            return None, K, size

    def _depth_warning(self, text: str) -> None:
        """Warn about unusable depth at most every 10 s per kind of problem. rclpy's throttle is per
        call site, so a second problem right after the first would go unsaid."""
        kind = re.sub(r"\d+(?:[.x]\d+)*", "#", text)
        now = time.monotonic()
        if now - self._depth_warned.get(kind, -1e9) >= 10.0:
            self._depth_warned[kind] = now
            self.get_logger().warning(text)

    def _process_objects(self, msg: Any, rgb: Any, backbone: Any) -> None:
        """The frame's objects (objects/extract.py, one backbone batch); publish both topics."""
        with self.times.stage("depth"):
            depth, K, size = self._depth_for(msg.header)
        settings = ExtractSettings(
            max_objects=int(self.get_parameter("max_objects").value),
            crop_margin=float(self.get_parameter("crop_margin").value),
            mask_crops=bool(parameter(self, "mask_crops")),
            reuse_still_crops=bool(parameter(self, "reuse_still_crops")),
            policy=replace(PIECES, join_candidates=int(parameter(self, "join_candidates"))),
            segmenter=self.segmenter, referee=self.proposal_referee)
        pose = self.camera_poses.pose_for(msg.header.stamp) if depth is not None else None
        out = extract_objects(rgb, depth, K, pose, backbone, self._reuse, settings, calibrated_size=size,
                              times=self.times, turn=self.backbone_lock)
        if out.depth_note:
            self.depth_rejected += int(out.depth_refused)
            info_late = size is None and not self._info_grace.missing()  # no CameraInfo yet, at start-up
            if not info_late:
                self._depth_warning(out.depth_note)
        name, prep, objects = backbone.name, backbone.preprocessing_id, out.objects
        pub, objects_pub = self.features_pub, self.objects_pub
        if pub is None or objects_pub is None:
            return
        with self.times.stage("publish"):
            feature_msg = make_feature_msg(msg.header, name, prep, out.frame_feature)
            if not self.compressed:
                self._cache.put(frame_fingerprint(msg), feature_msg)
            pub.publish(feature_msg)
            objects_pub.publish(make_object_features_msg(msg.header, name, prep, objects.proposals,
                                                         objects.features, rgb.shape, objects.joins))
        self.processed += 1
        self.objects_published += len(objects.proposals)

    # ------------------------------------------------------------------ service
    def _on_extract(self, req: Any, resp: Any) -> Any:
        refused = self.refusal("extract_features", need=INACTIVE)  # read-only: inactive answers too
        backbone = self.backbone
        if refused is None and backbone is None:
            refused = "no backbone loaded (the node is between transitions); nothing was computed"
        if refused:
            resp.success, resp.message = False, refused
            return resp
        if len(req.images) == 0:
            resp.success, resp.message = False, "no images in the request"
            return resp
        try:
            check_count(len(req.images), self.limits.max_images_per_request, "images")
            for i, img in enumerate(req.images):
                check_image_fields(img.width, img.height, img.step, len(img.data), self.limits, i, img.encoding)
        except RequestError as exc:
            resp.success, resp.message = False, str(exc)
            return resp
        out: list[Any] = [None] * len(req.images)
        todo, rgbs = [], []
        for i, img in enumerate(req.images):
            cached = self._cache.pop(frame_fingerprint(img))
            if cached is not None:
                self._cache.put(frame_fingerprint(img), cached)
                out[i] = cached
                continue
            try:
                rgbs.append(image_msg_to_rgb(img, self.limits.max_image_pixels))
            except (ValueError, TypeError) as exc:
                resp.success = False
                resp.message = (f"image {i} ({img.width}x{img.height}, encoding {img.encoding[:32]!r}) "
                                f"cannot be used: {exc}")
                return resp
            todo.append(i)
        if rgbs:  # a few images per turn, camera frames first: the stream keeps its rate during a teach
            feats = self.backbone_lock.extract(backbone, rgbs)
            for row, i in enumerate(todo):
                out[i] = make_feature_msg(req.images[i].header, backbone.name,
                                          backbone.preprocessing_id, feats[row])
        resp.features = out
        resp.success = True
        resp.message = (f"{counted(len(out), 'vector')} ({len(out) - len(todo)} from the stream cache, "
                        f"{len(todo)} computed)")
        return resp

    # ------------------------------------------------------------------ life cycle
    def stop_report(self) -> str:
        """What the node logs when it stops (:func:`~cbcl_pr_ros.runtime.stage_times.stop_lines`)."""
        stats = self.stats()
        frame = stats["stages"].get("frame")
        took = f"; a frame took {frame['p50_ms']:.0f} ms (median)" if frame else ""
        summary = (f"{counted(self.received, 'frame')} received, {self.processed} processed, {self.dropped} dropped "
                   f"(the previous one was still in work), {self.failed} failed; "
                   f"{counted(self.objects_published, 'object')} published{took}")
        return stop_lines("feature_extractor", summary, stats)

    def stats(self) -> dict[str, Any]:
        """Frame counters, and where the backbone runs (runtime, device, precision)."""
        return {"received": self.received, "processed": self.processed, "dropped": self.dropped,
                "failed": self.failed, "runtime": getattr(self.backbone, "runtime", ""),
                "device": getattr(self.backbone, "device", ""), "precision": getattr(self.backbone, "precision", ""),
                "objects": self.objects_published, "depth_rejected": self.depth_rejected,
                "stages": self.times.summary()}


def _log_stats(node: FeatureExtractorNode) -> None:
    # the ROS logger's context is gone by now (rosout), so plain logging
    log.warning(node.stop_report())


def main(args: list[str] | None = None) -> int:
    """``ros2 run cbcl_pr_ros feature_extractor_node [--ros-args ...]``."""
    exit_on_help(sys.argv if args is None else args, "feature_extractor_node", __doc__, specs_for(EXTRACTOR))
    return run_node(FeatureExtractorNode, threads=3, args=args, on_stop=_log_stats)


if __name__ == "__main__":
    sys.exit(main())
