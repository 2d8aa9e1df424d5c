"""Learner node: the ROS face of the CBCL-PR memory (teach, classify, forget, rename, save, load, merge).

A thin adapter: each callback turns a message into a plain request, calls one ROS-free object
(:class:`~cbcl_pr_ros.service.controller.LearnerController` for the memory,
:class:`~cbcl_pr_ros.service.teaching.Teacher` for TeachClass's plan,
:class:`~cbcl_pr_ros.objects.stream.ObjectStream` for tracks) and fills the response. This
module holds the life cycle, TeachClass and Classify; :mod:`.memory_services` the other services,
:mod:`.learner_streams` the stream callbacks, :mod:`.learner_port` what the Teacher and Classify ask
of the node (backbone, frames, clock, commit), :mod:`.learner_debug` the debug image.

Topics: ``features`` in, ``prediction`` out (one per vector, at most ``max_prediction_rate`` Hz);
``object_features`` in, ``detections`` and ``detection_markers`` out; ``status`` (latched);
``debug_image`` (camera frames read only while someone looks). Fleet mode (parameter ``fleet``,
:mod:`.fleet`): class updates on ``fleet_topic``.

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

import logging
import sys
import threading
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup

from cbcl_pr_ros.msg import Detections, FeatureVector, LearnerStatus, ObjectFeatures
from cbcl_pr_ros.msg import Prediction as PredictionMsg
from cbcl_pr_ros.nodes.camera_pose_input import CameraPoseInput
from cbcl_pr_ros.nodes.cli_help import exit_on_help
from cbcl_pr_ros.nodes.conversions import (
    fill_classify_from_detections,
    fill_classify_response,
    fill_teach_response,
    make_status_msg,
    teach_request_from_msg,
)
from cbcl_pr_ros.nodes.feature_source import FeatureSourceError, ServiceFeatureSource
from cbcl_pr_ros.nodes.fleet import make_fleet_link
from cbcl_pr_ros.nodes.frame_collector import StreamWaiters
from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.nodes.learner_debug import DebugImage
from cbcl_pr_ros.nodes.learner_port import LearnerPort
from cbcl_pr_ros.nodes.learner_streams import StreamAnswers
from cbcl_pr_ros.nodes.lifecycle import ACTIVE, INACTIVE, ManagedNode, overridable
from cbcl_pr_ros.nodes.memory_services import MemoryServices
from cbcl_pr_ros.nodes.qos import feature_qos, result_qos, status_qos
from cbcl_pr_ros.nodes.ros_params import declare_parameters, read_parameters
from cbcl_pr_ros.nodes.spin import run_node
from cbcl_pr_ros.runtime.heap import keep_heap_flat
from cbcl_pr_ros.service.classify_scope import ClassifyRequest, classify_vectors, plan_classify
from cbcl_pr_ros.service.controller import NOTHING_LEARNED, LearnerController, TeachOutcome
from cbcl_pr_ros.service.memory_files import earlier_memory_note, store_from_params
from cbcl_pr_ros.objects.stream import ObjectStream
from cbcl_pr_ros.service.teaching import Teacher
from cbcl_pr_ros.service.validation import RequestLimits
from cbcl_pr_ros.settings.params import LEARNER, feature_dim_for, learner_factory, specs_for
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
    """The CBCL-PR learner on the ROS graph, as a lifecycle node (``feature_source``: one process).

    configure: builds the learner and loads the memory file (a file that exists but cannot be
    served fails the configure and is left untouched); activate: subscribes to the feature stream
    and publishes (predictions, status, detections, debug image); deactivate: lets the stream go,
    keeps every class; cleanup: saves if the last autosave failed (refused while it cannot), frees.
    classify, list_classes and save_memory answer while inactive; the services that change classes
    need the node active. The streams spin on their own thread (``stream_callback_groups``, spin.py).
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
        # made by configure and activate, freed by cleanup and deactivate (ManagedNode.release)
        self.prediction_pub: Any = None
        self.status_pub: Any = None
        self.debug_pub: Any = None
        self.detections_pub: Any = None
        self.markers_pub: Any = None
        self.features_sub: Any = None
        self.objects_sub: Any = None
        self.status_timer: Any = None
        self._status_lock = threading.Lock()

        self.waiters = StreamWaiters("features", "objects")  # TeachClass requests waiting for frames
        objects = ObjectStream(p["track_window"], p["track_max_missed"], p["track_max_distance_m"])
        self.camera_poses = CameraPoseInput(self, p["camera_pose_topic"])  # tracks in its fixed frame
        self.stream_callback_groups = (self._stream_group, self._objects_group, self.camera_poses.callback_group)
        self.streams = StreamAnswers(self, objects)
        self.port = LearnerPort(self)  # what Teacher and classify_vectors ask of the node
        self.teacher = Teacher(self.port, objects, self.backbone_name, self.limits)
        self.debug = DebugImage(self, p, self._debug_group)
        self.memory_services = MemoryServices(self)
        self._serve()
        self.start(bool(p["autostart"]))

    def _serve(self) -> None:
        """The services: TeachClass and Classify here, the memory's in :mod:`.memory_services`."""
        m, mutate, query = self.memory_services, self._mutate_group, self._query_group
        self.create_services([
            (TeachClass, "teach_class", self._on_teach, mutate),
            (ForgetClass, "forget_class", m.on_forget, mutate),
            (RenameClass, "rename_class", m.on_rename, mutate),
            (SaveMemory, "save_memory", m.on_save, mutate),
            (LoadMemory, "load_memory", m.on_load, mutate),
            (MergeMemory, "merge_memory", m.on_merge, mutate),
            (Classify, "classify", self._on_classify, query),
            (ListClasses, "list_classes", m.on_list, query),
        ])

    # ------------------------------------------------------------------ life cycle
    def _configure(self) -> None:
        p = self.params
        store = store_from_params(p, self.get_namespace())
        controller = LearnerController(
            make_learner=learner_factory(p), backbone=p["backbone"], feature_dim=feature_dim_for(p),
            store=store, cluster_budget=p["max_clusters"], on_change=self.publish_status,
            limits=self.limits)
        started = controller.load_at_startup(move_aside=True)  # MemoryLoadError (not movable): FAILURE
        if controller.moved_aside_:
            self.get_logger().warning(f"MEMORY FILE REFUSED: {started}; load it again with LoadMemory "
                                      f"'{controller.moved_aside_}' once repaired")
        else:
            self.get_logger().info(started + earlier_memory_note(p, self.get_namespace()))
        from visualization_msgs.msg import MarkerArray

        self.create_publishers([
            ("prediction_pub", PredictionMsg, "prediction", result_qos()),
            ("status_pub", LearnerStatus, "status", status_qos()),
            ("detections_pub", Detections, "detections", result_qos()),
            ("markers_pub", MarkerArray, "detection_markers", result_qos(depth=2)),
        ])
        self.debug_pub = self.debug.make_publisher()
        self.controller = controller
        self.fleet = make_fleet_link(self, controller, p)
        self.get_logger().info(f"configured: {len(controller.classes)} classes loaded")

    def _activate(self) -> None:
        p, streams = self.params, self.streams
        self.features_sub = self.create_subscription(
            FeatureVector, p["features_topic"], guard_callback(self, streams.on_features, "feature vector"),
            feature_qos(depth=10), callback_group=self._stream_group,
            qos_overriding_options=overridable())
        self.objects_sub = self.create_subscription(
            ObjectFeatures, p["object_features_topic"],
            guard_callback(self, streams.on_objects, "object features"),  # raw: counted before it is built
            feature_qos(depth=10), callback_group=self._objects_group, raw=True,
            qos_overriding_options=overridable())
        self.camera_poses.subscribe()
        # timers run on the node clock (a bag's /clock under use_sim_time)
        self.status_timer = self.create_timer(p["status_period_s"],
                                              guard_callback(self, self.publish_status, "status"),
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
        self.release("features_sub", "objects_sub", "status_timer")
        self.camera_poses.release()
        self.debug.release()
        if self.fleet is not None:
            self.fleet.stop()
        self.streams.forget_frame()

    def _cleanup(self, final: bool) -> None:
        c = self.controller
        if c is not None:
            ok, line = c.release(final)  # RuntimeError (nothing freed) when a class would be lost
            if ok:  # rclpy binds a severity to each logging call site: one per line
                self.get_logger().info(line)
            else:
                self.get_logger().error(line)
        self.release("prediction_pub", "status_pub", "detections_pub", "markers_pub", "debug_pub")
        if self.fleet is not None:
            self.fleet.close()
            self.fleet = None
        self.controller = None
        self.streams.reset()

    def publish_status(self) -> None:
        """The latched ``status``: on every change of the memory and every ``status_period_s``."""
        c, pub = self.controller, self.status_pub
        if c is None or pub is None or self.phase != ACTIVE:
            return  # nothing is published while inactive
        msg = make_status_msg(c.status())
        msg.header.stamp = self.get_clock().now().to_msg()
        with self._status_lock:
            pub.publish(msg)

    def stop_report(self) -> str:
        """The line logged when the node stops (:meth:`.StreamAnswers.stop_report`)."""
        return self.streams.stop_report()

    def now_s(self) -> float:
        """Seconds on the node clock (a bag's /clock under use_sim_time)."""
        return self.get_clock().now().nanoseconds * 1e-9

    # ------------------------------------------------------------------ TeachClass
    def _on_teach(self, req: Any, resp: Any) -> Any:
        c, refused = self.memory_services.controller_for("teach_class", ACTIVE)
        if refused:
            outcome = c.refused(refused) if c is not None else TeachOutcome(False, refused)
            return fill_teach_response(resp, outcome)
        return fill_teach_response(resp, self.teacher.teach(c, teach_request_from_msg(req)))

    # ------------------------------------------------------------------ Classify
    def _on_classify(self, req: Any, resp: Any) -> Any:
        c, refused = self.memory_services.controller_for("classify", INACTIVE)  # read-only: also inactive
        if refused or not c.classes:
            return fill_classify_response(resp, success=False, message=refused or NOTHING_LEARNED)
        question = ClassifyRequest(int(req.scope), req.feature, req.image, int(req.top_k))
        try:
            plan = plan_classify(question.scope, question.has_feature, question.has_image,
                                 self.streams.objects_streaming())
            last_detections = self.streams.last_detections
            if plan.target == "objects" and last_detections is not None:
                return fill_classify_from_detections(resp, *last_detections, top_k=question.top_k)
            margin = float(self.get_parameter("crop_margin").value)
            feats, origin, box, plan = classify_vectors(question, plan, self.port, self.backbone_name,
                                                        c.feature_dim, self.limits, margin)
        except (ValueError, TypeError, FeatureSourceError) as exc:
            return fill_classify_response(resp, success=False, message=str(exc),
                                          model_version=c.model_version)
        out = c.classify(feats, top_k=question.top_k)
        return fill_classify_response(resp, success=out.success, message=out.message + plan.note,
                                      pred=out.predictions[0] if out.predictions else None,
                                      header=origin.header, model_version=out.model_version, box=box)


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
