"""Learner node: the ROS face of the CBCL-PR memory (teach, classify, forget, rename, save, load, merge).

Each callback turns a message into a plain request, calls the ROS-free
:class:`~cbcl_pr_ros.service.learner_session.LearnerSession` and fills the response or publishes;
the node is the session's port (backbone, clock, parameters, lifecycle gate, outputs).

Topics: ``features`` in, ``prediction`` out (one per vector, at most ``max_prediction_rate`` Hz);
``object_features`` in, ``detections`` and ``detection_markers`` out; ``status`` (latched);
``debug_image`` (camera frames read only while someone looks). Fleet mode (parameter ``fleet``):
class updates on ``fleet_topic``.

Concurrency: under a MultiThreadedExecutor the stream, the objects, mutations (serialised), queries
(reentrant), the extractor client and the timers each have a callback group, so a teach retrains
while predictions and Classify answer from the previous classifier snapshot.

Lifecycle (:mod:`.lifecycle`, docs/nodes.md "Lifecycle"): a change is committed under the commit
lock after checking the state again; a teach waiting for frames is woken and refused. Hardening
(docs/security.md): every callback is guarded (:mod:`.guard`), every field checked by the session.
"""
from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.event_handler import PublisherEventCallbacks
from sensor_msgs.msg import Image
from visualization_msgs.msg import MarkerArray

from cbcl_pr_ros.msg import ClassUpdate as ClassUpdateMsg
from cbcl_pr_ros.msg import Detections, FeatureVector, LearnerStatus, ObjectFeatures
from cbcl_pr_ros.msg import Prediction as PredictionMsg
from cbcl_pr_ros.nodes.camera_hint import upstream_text
from cbcl_pr_ros.nodes.camera_pose_input import CameraPoseInput
from cbcl_pr_ros.nodes.cli_help import exit_on_help
from cbcl_pr_ros.nodes.conversions import (classify_request_from_msg, fill_classify_answer, fill_list_response,
                                           fill_outcome_response, fill_save_response, fill_teach_response,
                                           make_status_msg, prediction_to_msg, teach_request_from_msg)
from cbcl_pr_ros.nodes.detections_msgs import (built_within_bounds, make_detections_msg, make_marker_array,
                                               object_features_from_serialized, object_frame_from_msg)
from cbcl_pr_ros.nodes.feature_source import ServiceFeatureSource
from cbcl_pr_ros.nodes.fleet import (class_update_msg, class_update_received, fleet_line, fleet_qos, fleet_timers,
                                     log_received)
from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.nodes.learner_debug import DebugImage, debug_wanted
from cbcl_pr_ros.nodes.lifecycle import ACTIVE, ManagedNode, overridable
from cbcl_pr_ros.nodes.qos import feature_qos, result_qos, status_qos
from cbcl_pr_ros.nodes.ros_params import declare_parameters, read_parameters
from cbcl_pr_ros.nodes.spin import run_node
from cbcl_pr_ros.plurals import counted
from cbcl_pr_ros.runtime.heap import keep_heap_flat
from cbcl_pr_ros.service.learner_session import LearnerSession
from cbcl_pr_ros.settings.params import LEARNER, specs_for
from cbcl_pr_ros.srv import (Classify, ForgetClass, ListClasses, LoadMemory, MergeMemory, RenameClass, SaveMemory,
                             TeachClass)

__all__ = ["LearnerNode", "main"]


class LearnerNode(ManagedNode):
    """The CBCL-PR learner on the ROS graph, as a lifecycle node (``feature_source``: one process).

    configure: builds the memory and loads its file (a file that exists but cannot be served fails
    the configure and is left untouched); activate: subscribes to the feature stream and publishes
    (predictions, status, detections, debug image); deactivate: lets the stream go, keeps every
    class; cleanup: saves what is unsaved, peers' changes too (refused while it cannot), frees.
    classify, list_classes and save_memory answer while inactive; the services that change classes
    need the node active. The streams spin on their own thread (``stream_callback_groups``, spin.py).
    """

    def __init__(self, feature_source: Any = None, *, node_name: str = "learner",
                 namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(node_name, namespace=namespace, **kwargs)
        declare_parameters(self, LEARNER)
        self.params = p = read_parameters(self, LEARNER)
        one = MutuallyExclusiveCallbackGroup  # queries are reentrant; every other group runs one at a time
        self._stream_group, self._objects_group, self._mutate_group = one(), one(), one()
        self._client_group, self._debug_group, self._fleet_group = one(), one(), one()
        self._query_group = ReentrantCallbackGroup()
        self.feature_source = feature_source if feature_source is not None else ServiceFeatureSource(
            self, p["extract_service"], p["extract_timeout_s"], callback_group=self._client_group)
        # made by configure and activate, freed by cleanup and deactivate (ManagedNode.release)
        self.prediction_pub = self.status_pub = self.debug_pub = self.detections_pub = self.markers_pub = None
        self.fleet_pub = self.features_sub = self.objects_sub = self.fleet_sub = None
        self.status_timer = self.fleet_timer = self.fleet_save_timer = None
        self._status_lock = threading.Lock()

        self.session = LearnerSession(self, p)
        self.camera_poses = CameraPoseInput(p["camera_pose_topic"], self.get_logger())  # tracks in its frame
        self.stream_callback_groups = (self._stream_group, self._objects_group, self.camera_poses.callback_group)
        self.debug = DebugImage(p["compressed"], p["image_topic"], self.get_logger(), self._debug_group,
                                int(p["max_image_pixels"]))
        self.add_post_set_parameters_callback(
            lambda changed: self._update_debug() if any(c.name == "debug_image" for c in changed) else None)
        s, mutate, query = self.session, self._mutate_group, self._query_group
        # offered once the autostart has loaded the memory (ManagedNode.start), never before it can answer
        self.start(bool(p["autostart"]), [
            (TeachClass, "teach_class", self._on_teach, mutate),
            (ForgetClass, "forget_class", lambda q, r: fill_outcome_response(r, s.forget(q.label)), mutate),
            (RenameClass, "rename_class", lambda q, r: fill_outcome_response(r, s.rename(q.old_label, q.new_label)),
             mutate),
            (SaveMemory, "save_memory", lambda q, r: fill_save_response(r, *s.save(q.path)), mutate),
            (LoadMemory, "load_memory", lambda q, r: fill_outcome_response(r, s.load(q.path)), mutate),
            (MergeMemory, "merge_memory", lambda q, r: fill_outcome_response(r, s.merge(q.path)), mutate),
            (Classify, "classify", self._on_classify, query),
            (ListClasses, "list_classes", lambda q, r: fill_list_response(r, *s.class_list()), query),
        ])

    # ------------------------------------------------------------------ life cycle
    def _configure(self) -> None:
        p = self.params
        self.session.configure(self.get_namespace())  # MemoryLoadError (file not movable): FAILURE
        self.create_publishers([
            ("prediction_pub", PredictionMsg, "prediction", result_qos()),
            ("status_pub", LearnerStatus, "status", status_qos()),
            ("detections_pub", Detections, "detections", result_qos()),
            ("markers_pub", MarkerArray, "detection_markers", result_qos(depth=2)),
        ])
        self.debug_pub = self.create_lifecycle_publisher(
            Image, "debug_image", result_qos(depth=2), qos_overriding_options=overridable(),
            event_callbacks=PublisherEventCallbacks(matched=lambda _info: self._update_debug()),
            callback_group=self._debug_group)
        if self.session.fleet is not None:
            qos = fleet_qos(p["fleet_history_depth"])
            self.fleet_pub = self.create_publisher(ClassUpdateMsg, p["fleet_topic"], qos)
            self.get_logger().info(fleet_line(self.session.fleet.settings, self.fleet_pub.topic_name))
        self.get_logger().info(f"configured: {counted(len(self.session.controller.classes), 'class')} loaded")

    def _activate(self) -> None:
        p, fleet = self.params, self.session.fleet
        self.features_sub = self.create_subscription(
            FeatureVector, p["features_topic"], guard_callback(self, self._on_features, "feature vector"),
            feature_qos(depth=10), callback_group=self._stream_group, qos_overriding_options=overridable())
        self.objects_sub = self.create_subscription(
            ObjectFeatures, p["object_features_topic"], guard_callback(self, self._on_objects, "object features"),
            feature_qos(depth=10), callback_group=self._objects_group, raw=True,  # raw: counted before it is built
            qos_overriding_options=overridable())
        self.camera_poses.subscribe(self)
        # timers run on the node clock (a bag's /clock under use_sim_time)
        self.status_timer = self.create_timer(p["status_period_s"], guard_callback(
            self, lambda: self.publish_status(self.session.status()), "status"), callback_group=self._debug_group)
        self.phase = ACTIVE  # (set again by ManagedNode) so that the first status goes out now
        self._update_debug()
        self.publish_status(self.session.status())
        if fleet is not None:
            self.fleet_sub = self.create_subscription(
                ClassUpdateMsg, p["fleet_topic"], guard_callback(self, self._on_class_update, "class update"),
                fleet_qos(p["fleet_history_depth"]), callback_group=self._fleet_group, raw=True)  # sized first
            self.fleet_timer, self.fleet_save_timer = fleet_timers(self, fleet.settings, fleet.tick,
                                                                  self.session.flush_fleet, self._fleet_group)
        self.session.activate()
        c = self.session.controller
        self.get_logger().info(
            f"learner ready (active): {counted(len(c.classes), 'class')}, backbone {self.session.backbone}, "
            f"features from '{self.features_sub.topic_name}', memory '{c.memory_path}'")

    def _interrupt(self) -> None:
        self.session.interrupt()  # the node leaves the active state: wake the teaches waiting for frames

    def _deactivate(self) -> None:
        self.release("features_sub", "objects_sub", "status_timer", "fleet_sub", "fleet_timer", "fleet_save_timer")
        self.camera_poses.release(self)
        self.debug.release(self)
        self.session.pause()

    def _cleanup(self, final: bool) -> None:
        released = self.session.cleanup(final)  # RuntimeError (nothing freed) when a class would be lost
        if released is not None and released[0]:  # rclpy binds a severity to each logging call site
            self.get_logger().info(released[1])
        elif released is not None:
            self.get_logger().error(released[1])
        self.release("prediction_pub", "status_pub", "detections_pub", "markers_pub", "debug_pub", "fleet_pub")

    def stop_report(self) -> str:
        """The line logged when the node stops (:meth:`LearnerSession.stop_report`)."""
        return self.session.stop_report()

    def _update_debug(self) -> None:
        """Read camera frames only while someone looks at the debug image (frames are large)."""
        self.debug.update(self, lambda: debug_wanted(self.phase == ACTIVE, self.debug_pub,
                                                     self.get_parameter("debug_image").value))

    # ------------------------------------------------------------------ services
    def _on_teach(self, req: Any, resp: Any) -> Any:
        return fill_teach_response(resp, self.session.teach(teach_request_from_msg(req)))

    def _on_classify(self, req: Any, resp: Any) -> Any:
        return fill_classify_answer(resp, self.session.classify(classify_request_from_msg(req)), int(req.top_k))

    # ------------------------------------------------------------------ topics in
    def _on_features(self, msg: FeatureVector) -> None:
        try:
            self.session.on_features(msg)
        except ValueError as exc:
            self.get_logger().warning(f"feature vector ignored: {exc}", throttle_duration_sec=10.0)

    def _on_objects(self, msg: ObjectFeatures | bytes) -> None:
        """The subscription delivers serialized bytes: a frame of more objects than an extractor sends is
        refused before its message is built."""
        if self.detections_pub is None or self.phase != ACTIVE:
            return  # a message already queued when the stream was paused
        msg = built_within_bounds(msg, object_features_from_serialized, self.get_logger(), "object features")
        if msg is None:
            return
        try:
            self.session.on_objects(msg, object_frame_from_msg, self.camera_poses.pose_for)
        except ValueError as exc:
            self.get_logger().warning(f"object features ignored: {exc}", throttle_duration_sec=10.0)

    def _on_class_update(self, msg: ClassUpdateMsg | bytes) -> None:
        update = class_update_received(msg, self.session.fleet.settings.max_update_bytes, self.get_logger())
        res = self.session.receive(update) if update is not None else None
        if res is not None:
            log_received(self.get_logger(), res)

    # ------------------------------------------------------------------ the session's port (LearnerPort)
    def extract(self, rgbs: list) -> Any:
        if hasattr(self.feature_source, "timeout_s"):  # extract_timeout_s may be changed at run time
            self.feature_source.timeout_s = float(self.get_parameter("extract_timeout_s").value)
        return self.feature_source.extract(rgbs)

    def now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def setting(self, name: str) -> Any:
        return self.get_parameter(name).value

    def active(self) -> bool:
        return self.phase == ACTIVE

    def topic(self, stream: str) -> str:
        """A stream's resolved topic name (also while the subscription is released)."""
        name = self.params["object_features_topic" if stream == "objects" else "features_topic"]
        return self.resolve_topic_name(name)

    def upstream(self, stream: str) -> str:
        topic = self.topic(stream)
        return upstream_text(topic, self.get_publishers_info_by_topic(topic),
                             self.get_subscriber_names_and_types_by_node)

    def log(self, line: str, warning: bool = False) -> None:
        if warning:  # rclpy binds a severity to each logging call site: one per line
            self.get_logger().warning(line)
        else:
            self.get_logger().info(line)

    def publish_prediction(self, frame: Any, prediction: Any, model_version: int) -> None:
        pub = self.prediction_pub
        if pub is not None:
            pub.publish(prediction_to_msg(frame.header, prediction, model_version))

    def publish_detections(self, header: Any, tracks: list, model_version: int, pose: Any) -> Any:
        pub, markers = self.detections_pub, self.markers_pub
        det = make_detections_msg(header, tracks, model_version, pose)
        if pub is not None:
            pub.publish(det)
        if markers is not None and markers.get_subscription_count():  # ~2 ms a frame to build: only for a viewer
            markers.publish(make_marker_array(det))
        return det

    def show_prediction(self, header: Any, prediction: Any) -> bool:
        return self.debug.show(self.debug_pub, self.debug.prediction_image, header, prediction)

    def show_detections(self, detections: Any) -> bool:
        return self.debug.show(self.debug_pub, self.debug.detections_image, detections)

    def publish_status(self, status: Any) -> None:
        """The latched ``status``: on every change of the memory and every ``status_period_s``."""
        pub = self.status_pub
        if status is None or pub is None or self.phase != ACTIVE:
            return  # nothing is published while inactive
        msg = make_status_msg(status)
        msg.header.stamp = self.get_clock().now().to_msg()
        with self._status_lock:
            pub.publish(msg)

    def publish_class_update(self, update: Any) -> None:
        pub = self.fleet_pub
        if pub is not None:
            pub.publish(class_update_msg(update, self.get_clock().now().to_msg()))


def _log_stats(node: LearnerNode) -> None:
    # the ROS logger's context is gone by now (rosout), so plain logging
    logging.getLogger(__name__).warning(node.stop_report())


def main(args: list[str] | None = None) -> int:
    """``ros2 run cbcl_pr_ros learner_node [--ros-args ...]``."""
    exit_on_help(sys.argv if args is None else args, "learner_node", __doc__, specs_for(LEARNER))
    keep_heap_flat()  # before the executor's threads exist (runtime/heap.py)
    return run_node(LearnerNode, threads=6, args=args, on_stop=_log_stats)


if __name__ == "__main__":
    sys.exit(main())
