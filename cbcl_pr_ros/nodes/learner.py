"""Learner node: the ROS face of the CBCL-PR memory (teach, classify, forget, rename, save, load, merge).

A thin adapter: each callback turns a message into a plain request, calls one ROS-free object
(:class:`~cbcl_pr_ros.service.controller.LearnerController` for the memory,
:class:`~cbcl_pr_ros.service.teaching.Teacher` for TeachClass's plan,
:class:`~cbcl_pr_ros.service.object_stream.ObjectStream` for tracks) and fills the response.

Topics: ``features`` in, ``prediction`` out (one per vector, at most ``max_prediction_rate`` Hz);
``object_features`` in, ``detections`` and ``detection_markers`` out; ``status`` (latched);
``debug_image`` (:mod:`.learner_debug`, camera frames read only while someone looks). Fleet mode
(parameter ``fleet``, :mod:`.fleet`): class updates on ``fleet_topic``.

Concurrency: under a MultiThreadedExecutor the stream, the objects, mutations (serialised), queries
(reentrant), the extractor client and the timers each have a callback group, so a teach retrains
while predictions and Classify answer from the previous classifier snapshot.

Lifecycle (:mod:`.lifecycle`, docs/nodes.md "Lifecycle"): every change is committed under the
commit lock after checking the state again, so a transition never overtakes one, and a teach
waiting for frames is woken and refused. Hardening (docs/security.md): every callback is guarded
(:mod:`.guard`), every field checked (:mod:`cbcl_pr_ros.service.validation`), memory files stay in
``memory_dir``, and the feature width comes from the backbone, never from a request.
"""
from __future__ import annotations

import json
import logging
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from cbcl_pr_ros.nodes.spin import run_node
from cbcl_pr_ros.msg import Detections, FeatureVector, LearnerStatus, ObjectFeatures
from cbcl_pr_ros.msg import Prediction as PredictionMsg
from cbcl_pr_ros.service.controller import NOTHING_LEARNED, LearnerController, Outcome, TeachOutcome
from cbcl_pr_ros.nodes.conversions import (
    class_info_msgs,
    features_from_msgs,
    fill_classify_from_detections,
    fill_classify_response,
    fill_teach_response,
    make_status_msg,
    prediction_to_msg,
    rgb_to_image_msg,
    teach_request_from_msg,
)
from cbcl_pr_ros.nodes.learner_debug import DebugImage
from cbcl_pr_ros.nodes.camera_pose_input import CameraPoseInput
from cbcl_pr_ros.nodes.fleet import make_fleet_link
from cbcl_pr_ros.nodes.feature_source import FeatureSourceError, ServiceFeatureSource
from cbcl_pr_ros.nodes.frame_collector import StreamWaiters
from cbcl_pr_ros.nodes.guard import guard_callback, guard_service
from cbcl_pr_ros.nodes.lifecycle import ACTIVE, INACTIVE, ManagedNode, overridable
from cbcl_pr_ros.nodes.ros_params import declare_parameters, read_parameters
from cbcl_pr_ros.service.object_stream import ObjectStream
from cbcl_pr_ros.service.teaching import TeachSettings, Teacher
from cbcl_pr_ros.service.memory_files import MemoryStore, memory_dir_for
from cbcl_pr_ros.settings.params import LEARNER, feature_dim_for, learner_factory
from cbcl_pr_ros.stamps import stamp_to_s
from cbcl_pr_ros.service.rate_limit import RateLimiter
from cbcl_pr_ros.service.stage_times import StageTimes
from cbcl_pr_ros.service.validation import (
    RequestLimits,
    check_count,
    check_image_fields,
)
from cbcl_pr_ros.nodes.qos import feature_qos, result_qos, service_qos, status_qos
from cbcl_pr_ros.srv import (
    Classify,
    ForgetClass,
    ListClasses,
    LoadMemory,
    MergeMemory,
    RenameClass,
    SaveMemory,
    TeachClass,
)

__all__ = ["LearnerNode", "main"]


class LearnerNode(ManagedNode):
    """The CBCL-PR learner on the ROS graph, as a lifecycle node; ``feature_source`` may be injected
    (one process).

    configure: builds the learner and loads the memory file (a file that exists but cannot be
    served fails the configure and is left untouched); activate: subscribes to the feature stream
    and publishes (predictions, status, detections, debug image); deactivate: lets the stream go,
    keeps every class; cleanup: saves if the last autosave failed (refused while it cannot), frees.
    Services: classify, list_classes and save_memory answer while inactive (they change no class);
    teach_class, forget_class, rename_class and load_memory need the node active.
    """

    def __init__(self, feature_source: Any = None, *, node_name: str = "learner",
                 namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(node_name, namespace=namespace, **kwargs)
        declare_parameters(self, LEARNER)
        p = read_parameters(self, LEARNER)
        self.params = p
        self.backbone_name = p["backbone"]
        self.limits = RequestLimits.from_params(p)
        self.controller: LearnerController | None = None
        self.fleet: Any = None  # nodes.fleet.FleetLink in fleet mode (parameter fleet)

        self._stream_group = MutuallyExclusiveCallbackGroup()
        self._mutate_group = MutuallyExclusiveCallbackGroup()
        self._query_group = ReentrantCallbackGroup()
        self._client_group = MutuallyExclusiveCallbackGroup()
        self._debug_group = MutuallyExclusiveCallbackGroup()
        self._objects_group = MutuallyExclusiveCallbackGroup()

        if feature_source is None:
            feature_source = ServiceFeatureSource(self, p["extract_service"], p["extract_timeout_s"],
                                                  callback_group=self._client_group)
        self.feature_source = feature_source
        self.features_sub: Any = None
        self.objects_sub: Any = None
        self.prediction_pub: Any = None
        self.status_pub: Any = None
        self.detections_pub: Any = None
        self.markers_pub: Any = None
        self.status_timer: Any = None
        self.debug_timer: Any = None
        self._status_lock = threading.Lock()

        def s(srv_type: Any, name: str, fn: Any, group: Any) -> None:
            self.create_service(srv_type, name, guard_service(self, fn, name), qos_profile=service_qos(),
                                callback_group=group)

        s(TeachClass, "teach_class", self._on_teach, self._mutate_group)
        s(ForgetClass, "forget_class", self._on_forget, self._mutate_group)
        s(RenameClass, "rename_class", self._on_rename, self._mutate_group)
        s(SaveMemory, "save_memory", self._on_save, self._mutate_group)
        s(LoadMemory, "load_memory", self._on_load, self._mutate_group)
        s(MergeMemory, "merge_memory", self._on_merge, self._mutate_group)
        s(Classify, "classify", self._on_classify, self._query_group)
        s(ListClasses, "list_classes", self._on_list, self._query_group)

        self._latest_features: FeatureVector | None = None
        self.waiters = StreamWaiters("features", "objects")  # TeachClass requests waiting for frames
        self._rate_limit = RateLimiter()  # on the node clock: use_sim_time follows a bag's /clock
        self.predictions_published = 0
        self.times = StageTimes()  # where a frame's time goes (docs/nodes.md "Where the time goes")
        self.debug = DebugImage(self, p, self._debug_group)
        self._init_objects(p)
        self.start(bool(p["autostart"]))

    # ------------------------------------------------------------------ life cycle
    def _configure(self) -> None:
        p = self.params
        store = None
        if p["memory_path"]:
            memory_dir, default_name = memory_dir_for(p["memory_dir"], p["memory_path"])
            store = MemoryStore(memory_dir, default_name, allow_absolute=p["allow_absolute_paths"],
                                max_bytes=p["max_memory_file_bytes"])
        controller = LearnerController(
            make_learner=learner_factory(p), backbone=p["backbone"], feature_dim=feature_dim_for(p),
            store=store, cluster_budget=p["max_clusters"], on_change=self._on_change,
            limits=self.limits)
        started = controller.load_at_startup(move_aside=True)  # MemoryLoadError (not movable): FAILURE
        if controller.moved_aside_:
            self.get_logger().warning(f"MEMORY FILE REFUSED: {started}; load it again with LoadMemory "
                                      f"'{controller.moved_aside_}' once repaired")
        else:
            self.get_logger().info(started)
        over = overridable
        self.prediction_pub = self.create_lifecycle_publisher(PredictionMsg, "prediction", result_qos(),
                                                              qos_overriding_options=over())
        self.status_pub = self.create_lifecycle_publisher(LearnerStatus, "status", status_qos(),
                                                          qos_overriding_options=over())
        self.debug.publisher = self.create_lifecycle_publisher(Image, "debug_image", result_qos(depth=2),
                                                               qos_overriding_options=over())
        self.detections_pub = self.create_lifecycle_publisher(Detections, "detections", result_qos(),
                                                              qos_overriding_options=over())
        from visualization_msgs.msg import MarkerArray

        self.markers_pub = self.create_lifecycle_publisher(MarkerArray, "detection_markers",
                                                           result_qos(depth=2), qos_overriding_options=over())
        self.controller = controller
        self.fleet = make_fleet_link(self, controller, p)
        self.get_logger().info(f"configured: {len(controller.classes)} classes loaded")

    def _activate(self) -> None:
        p = self.params
        self.features_sub = self.create_subscription(
            FeatureVector, p["features_topic"], guard_callback(self, self._on_features, "feature vector"),
            feature_qos(p["reliability"], depth=10), callback_group=self._stream_group,
            qos_overriding_options=overridable())
        self.objects_sub = self.create_subscription(
            ObjectFeatures, p["object_features_topic"],
            guard_callback(self, self._on_object_features, "object features"),
            feature_qos(p["reliability"], depth=10), callback_group=self._objects_group,
            qos_overriding_options=overridable())
        self.camera_poses.subscribe()
        # timers run on the node clock (a bag's /clock under use_sim_time)
        self.status_timer = self.create_timer(p["status_period_s"],
                                              guard_callback(self, self.publish_status, "status"),
                                              callback_group=self._debug_group)
        self.debug_timer = self.create_timer(0.5, guard_callback(self, self.debug.update, "debug subscription"),
                                             callback_group=self._debug_group)
        self.phase = ACTIVE  # (set again by ManagedNode) so that the first status goes out now
        self.debug.update()
        self.publish_status()
        if self.fleet is not None:
            self.fleet.start()
        c = self.controller
        self.get_logger().info(
            f"learner ready (active): {len(c.classes)} classes, backbone {self.backbone_name}, "
            f"features from '{self.features_sub.topic_name}', memory '{c.memory_path}'")

    def _interrupt(self) -> None:
        """Wake every TeachClass waiting for frames: the node leaves the active state."""
        self.waiters.cancel_all()

    def _deactivate(self) -> None:
        self.release("features_sub", "objects_sub", "status_timer", "debug_timer")
        self.camera_poses.release()
        self.debug.release()
        if self.fleet is not None:
            self.fleet.stop()
        self._latest_features = None  # a classify while paused must not answer an old frame

    def _cleanup(self, final: bool) -> None:
        c = self.controller
        if c is not None:
            ok, message = c.save_if_unsaved()
            if not ok:
                if not final:
                    raise RuntimeError(f"{message}; cleanup refused so that no class is lost: fix the "
                                       f"memory file or directory, then cleanup again (SaveMemory to "
                                       f"another name keeps a copy meanwhile)")
                self.get_logger().error(f"{message}; the memory is lost with this process")
            else:
                self.get_logger().info(f"memory freed: {message}")
            c.close()
        self.release("prediction_pub", "status_pub", "detections_pub", "markers_pub")
        if self.debug.publisher is not None:
            self.destroy_lifecycle_publisher(self.debug.publisher)
            self.debug.publisher = None
        if self.fleet is not None:
            self.fleet.close()
            self.fleet = None
        self.controller = None
        self.objects.reset()
        self._last_detections = None

    @contextmanager
    def _committing(self, what: str, need: str = ACTIVE, expected: Any = None) -> Iterator[tuple[Any, str | None]]:
        """(controller, refusal) under the commit lock: a change made inside is done before any
        transition goes on; ``expected``: the controller the request started with (a request that
        waited across cleanup/configure is refused rather than taught into a freed memory)."""
        with self.committing(what, need) as refused:
            c = self.controller
            if refused is None and c is None:
                refused = f"{what} refused: the memory is not loaded (the node is between transitions)"
            if refused is None and expected is not None and c is not expected:
                refused = (f"{what} refused: the node was cleaned up and configured again while the request "
                           "gathered its examples; nothing was changed, send it again")
            yield c, refused

    def _gate(self, what: str, need: str) -> tuple[Any, str | None]:
        """(controller, None) when the node's state allows ``what``, else (controller or None, refusal)."""
        refused = self.refusal(what, need)
        c = self.controller
        if refused is None and c is None:
            refused = f"{what} refused: the memory is not loaded (the node is between transitions)"
        return c, refused

    # ------------------------------------------------------------------ status
    def _on_change(self) -> None:
        self.publish_status()

    def publish_status(self) -> None:
        c, pub = self.controller, self.status_pub
        if c is None or pub is None or self.phase != ACTIVE:
            return  # nothing is published while inactive
        msg = make_status_msg(c.status())
        msg.header.stamp = self.get_clock().now().to_msg()
        with self._status_lock:
            pub.publish(msg)

    # ------------------------------------------------------------------ stream
    def _on_features(self, msg: FeatureVector) -> None:
        ctl, pub = self.controller, self.prediction_pub
        if ctl is None or pub is None or self.phase != ACTIVE:
            return  # a message already queued when the stream was paused
        self._stamp_age("stamp_to_callback", msg.header)
        self._latest_features = msg
        self.waiters.offer("features", msg)
        rate = float(self.get_parameter("max_prediction_rate").value)
        if not self._rate_limit.allow(self._clock_s(), rate):
            return
        if not ctl.classes:
            return
        times = self.times
        with times.stage("predict"):
            try:
                feats = features_from_msgs([msg], self.backbone_name, ctl.feature_dim)
            except ValueError as exc:
                self.get_logger().warning(f"feature vector ignored: {exc}", throttle_duration_sec=10.0)
                return
            out = ctl.classify(feats, top_k=len(ctl.classes))
        if not out.success:
            return
        pred = out.predictions[0]
        with times.stage("publish"):
            pub.publish(prediction_to_msg(msg.header, pred, out.model_version))
        self.predictions_published += 1
        if self.debug.on and not self._objects_streaming():
            with times.stage("debug_image"):
                self.debug.publish_prediction(msg.header, pred)  # with objects, the debug image shows their boxes instead

    # ------------------------------------------------------------------ feature gathering
    def extract_images(self, images: list) -> Any:
        """(n, d) vectors for Image messages via the feature source; FeatureSourceError on failure.

        The images are size-checked first (RequestError), and the wait uses the current
        ``extract_timeout_s`` (it may be changed at run time).
        """
        check_count(len(images), self.limits.max_images_per_request, "images")
        for i, img in enumerate(images):
            check_image_fields(img.width, img.height, img.step, len(img.data), self.limits, i)
        if hasattr(self.feature_source, "timeout_s"):
            self.feature_source.timeout_s = float(self.get_parameter("extract_timeout_s").value)
        ex = self.feature_source.extract_images(images)
        if ex.backbone != self.backbone_name:
            raise FeatureSourceError(f"the extractor uses backbone '{ex.backbone}', this learner "
                                     f"'{self.backbone_name}': set the same 'backbone' parameter on both")
        return ex.features

    # ------------------------------------------------------------------ services
    def _features_topic(self) -> str:
        """The feature topic's resolved name (also while the subscription is released)."""
        return self.resolve_topic_name(self.params["features_topic"])

    def _on_teach(self, req: Any, resp: Any) -> Any:
        c, refused = self._gate("teach_class", ACTIVE)
        if refused:
            return fill_teach_response(resp, c.refused(refused) if c is not None else TeachOutcome(False, refused))
        return fill_teach_response(resp, self.teacher.teach(c, teach_request_from_msg(req)))

    # ------------------------------------------------------------------ the Teacher's port (service/teaching.py)
    def teach_settings(self) -> TeachSettings:
        settable = ("teach_from", "crop_margin", "teach_num_frames", "teach_timeout_s", "teach_views", "teach_view_spread")
        return TeachSettings.from_params({**self.params, **{n: self.get_parameter(n).value for n in settable}})

    def extract(self, rgbs: list) -> Any:
        return self.extract_images([rgb_to_image_msg(x) for x in rgbs])

    def collect(self, n: int, timeout_s: float, stream: str) -> list[Any]:
        return self.waiters.collect(stream, n, timeout_s, lambda: self.phase == ACTIVE, now=self._clock_s)

    def now_s(self) -> float:
        return self._clock_s()

    def topic(self, stream: str) -> str:
        if stream == "objects":
            return self.resolve_topic_name(self.params["object_features_topic"])
        return self._features_topic()

    def commit(self, c: LearnerController, label: str, feats: Any, source: str, views: Any) -> TeachOutcome:
        """Teach under the commit lock, after checking that the node still serves this memory."""
        with self._committing("teach_class", expected=c) as (_, refused):
            if refused:
                return c.refused(f"nothing learned: {refused}")
            outcome = c.teach(label, feats, source, views)
        self.get_logger().info(outcome.message)
        return outcome

    # ------------------------------------------------------------------ objects (issue 12)
    def _init_objects(self, p: dict[str, Any]) -> None:
        """Object stream state and the teaching plan (the topics are made by configure and activate)."""
        self.detections_published = 0
        self.objects = ObjectStream(p["track_window"], p["track_max_missed"], p["track_max_distance_m"])
        self.camera_poses = CameraPoseInput(self, p["camera_pose_topic"])  # tracks in its fixed frame (issue 20)
        self.teacher = Teacher(self, self.objects, self.backbone_name, self.limits)
        self._last_detections: tuple[Detections, tuple[int, int]] | None = None  # what Classify answers by default

    def _stamp_age(self, stage: str, header: Header) -> None:
        """Record image stamp -> now (host wall clock) as ``stage``: the path up to this callback."""
        self.times.add(stage, time.time() - stamp_to_s(header.stamp))

    def stop_report(self) -> str:
        """The line logged when the node stops: counters and stage times as JSON (read by the benches)."""
        return "learner stopping: " + json.dumps({"predictions": self.predictions_published,
                                                 "detections": self.detections_published,
                                                 "stages": self.times.summary()})

    def _clock_s(self) -> float:
        """Seconds on the node clock (a bag's /clock under use_sim_time)."""
        return self.get_clock().now().nanoseconds * 1e-9

    def _objects_streaming(self) -> bool:
        """True while the extractor sends objects (an ObjectFeatures within the last 2 s)."""
        return self.objects.streaming(self._clock_s())

    def _on_object_features(self, msg: ObjectFeatures) -> None:
        """Classify every object of the frame in one batch, track, publish detections/markers/image."""
        from cbcl_pr_ros.nodes.detections_msgs import make_detections_msg, make_marker_array, object_frame_from_msg

        ctl, det_pub, markers_pub = self.controller, self.detections_pub, self.markers_pub
        if ctl is None or det_pub is None or markers_pub is None or self.phase != ACTIVE:
            return  # a message already queued when the stream was paused
        self._stamp_age("objects_stamp_to_callback", msg.header)
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            frame = object_frame_from_msg(msg, self.backbone_name, ctl.feature_dim or None, self.limits.max_feature_abs)
        except ValueError as exc:
            self.get_logger().warning(f"object features ignored: {exc}", throttle_duration_sec=10.0)
            return
        self.objects.arrived(frame, self._clock_s())
        self.waiters.offer("objects", frame)
        version, predictions = ctl.model_version, None
        if frame.proposals and ctl.classes:
            out = ctl.classify(frame.features, top_k=len(ctl.classes))
            if out.success:
                version, predictions = out.model_version, out.predictions
        tracks = self.objects.update(frame, predictions, stamp_to_s(msg.header.stamp),
                                     self.camera_poses.pose_for(msg.header.stamp))
        det = make_detections_msg(msg.header, tracks, version)
        self._last_detections = (det, frame.shape)
        det_pub.publish(det)
        markers_pub.publish(make_marker_array(det))
        self.detections_published += 1
        self.times.add("objects", time.perf_counter() - t0, time.thread_time() - c0)
        if self.debug.on:
            with self.times.stage("debug_image"):
                self.debug.publish_detections(det)

    def _on_classify(self, req: Any, resp: Any) -> Any:
        from cbcl_pr_ros.service.classify_scope import ClassifyRequest, classify_vectors, plan_classify

        c, refused = self._gate("classify", INACTIVE)  # read-only: answers while inactive too
        if refused or not c.classes:
            return fill_classify_response(resp, success=False, message=refused or NOTHING_LEARNED)
        question = ClassifyRequest(int(req.scope), req.feature, req.image, int(req.top_k))
        try:
            plan = plan_classify(question.scope, question.has_feature, question.has_image, self._objects_streaming())
            if plan.target == "objects" and self._last_detections is not None:
                return fill_classify_from_detections(resp, *self._last_detections, top_k=question.top_k)
            feats, origin, box, plan = classify_vectors(question, plan, self, self.backbone_name, c.feature_dim,
                                                        self.limits, float(self.get_parameter("crop_margin").value))
        except (ValueError, TypeError, FeatureSourceError) as exc:
            return fill_classify_response(resp, success=False, message=str(exc), model_version=c.model_version)
        out = c.classify(feats, top_k=question.top_k)
        return fill_classify_response(resp, success=out.success, message=out.message + plan.note,
                                      pred=out.predictions[0] if out.predictions else None,
                                      header=origin.header, model_version=out.model_version, box=box)

    # ------------------------------------------------------------------ the Classify port (service/classify_scope.py)
    def latest_features(self) -> Any:
        return self._latest_features

    def no_frame_reason(self) -> str:
        if self.phase != ACTIVE:
            return "the node is inactive, so it reads no camera frames: send an image or a feature vector"
        return (f"no camera frame received on '{self._features_topic()}' yet: send an image, or start the camera "
                "and feature_extractor")

    def _on_list(self, req: Any, resp: Any) -> Any:
        c, refused = self._gate("list_classes", INACTIVE)
        if refused:  # an empty list that says why (the classes are on disk, not lost)
            resp.message = refused
            return resp
        resp.classes = class_info_msgs(c.class_info())
        resp.model_version = c.model_version
        return resp

    def _on_forget(self, req: Any, resp: Any) -> Any:
        return self._change("forget_class", lambda c: c.forget(req.label), resp)

    def _on_rename(self, req: Any, resp: Any) -> Any:
        return self._change("rename_class", lambda c: c.rename(req.old_label, req.new_label), resp)

    # rclpy binds a severity to each logging call site: success and failure log from separate lines
    def _on_save(self, req: Any, resp: Any) -> Any:
        with self._committing("save_memory", INACTIVE) as (c, refused):  # changes no class: also inactive
            if refused:
                resp.success, resp.message = False, refused
                return resp
            ok, message, path, size = c.save(req.path)
        if ok:
            self.get_logger().info(message)
        else:  # a refused name or a full disk: the answer says what to do
            self.get_logger().warning(message)
        resp.success, resp.message, resp.path, resp.bytes_written = ok, message, path, size
        return resp

    def _on_load(self, req: Any, resp: Any) -> Any:
        return self._change("load_memory", lambda c: c.load(req.path), resp)

    def _on_merge(self, req: Any, resp: Any) -> Any:
        return self._change("merge_memory", lambda c: c.merge(req.path), resp)

    def _change(self, what: str, call: Any, resp: Any) -> Any:
        """Forget, rename, load, merge: ``call(controller)`` while active, committed before the answer."""
        with self._committing(what) as (c, refused):
            if refused:
                state = (c.model_version, len(c.classes)) if c is not None else (0, 0)
                out = Outcome(False, refused, *state)
            else:
                out = call(c)
        if not refused and out.success:  # rclpy binds a severity to each logging call site: one per line
            self.get_logger().info(out.message)
        elif not refused:  # a user's mistake (unknown class, refused file): the answer says what to do
            self.get_logger().warning(out.message)
        resp.success, resp.message, resp.model_version = out.success, out.message, out.model_version
        if hasattr(resp, "num_classes"):  # RenameClass has none
            resp.num_classes = out.num_classes
        return resp


def _log_stats(node: LearnerNode) -> None:
    # the ROS logger's context is gone by now (rosout), so plain logging
    logging.getLogger(__name__).warning(node.stop_report())


def main(args: list[str] | None = None) -> int:
    """``ros2 run cbcl_pr_ros learner_node [--ros-args ...]``."""
    from cbcl_pr_ros.nodes.cli_help import exit_on_help
    from cbcl_pr_ros.settings.params import LEARNER, specs_for

    exit_on_help(sys.argv if args is None else args, "learner_node", __doc__, specs_for(LEARNER))
    return run_node(LearnerNode, threads=6, args=args, on_stop=_log_stats)


if __name__ == "__main__":
    sys.exit(main())
