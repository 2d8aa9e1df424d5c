"""The learner's answers to its two input streams, and where the time of each frame goes.

``features`` (one vector per camera frame) gets a ``prediction``, at most ``max_prediction_rate``
per second on the node clock; ``object_features`` (the objects of a frame) gets ``detections`` and
``detection_markers``: the objects are classified in one batch and tracked by the ROS-free
:class:`~cbcl_pr_ros.objects.stream.ObjectStream`. Each frame is also offered to the
TeachClass requests waiting for frames (the node's ``waiters``), kept for Classify's default answer,
and drawn on the debug image while someone looks (:mod:`.learner_debug`).

The callbacks read the node's controller, publishers and state when a message comes, so a message
already queued when the node left the active state is dropped.
"""
from __future__ import annotations

import json
import time
from typing import Any

from std_msgs.msg import Header

from cbcl_pr_ros.msg import Detections, FeatureVector, ObjectFeatures
from cbcl_pr_ros.nodes.conversions import features_from_msgs, prediction_to_msg
from cbcl_pr_ros.nodes.detections_msgs import (make_detections_msg, make_marker_array,
                                               object_features_from_serialized, object_frame_from_msg,
                                               built_within_bounds)
from cbcl_pr_ros.nodes.lifecycle import ACTIVE
from cbcl_pr_ros.runtime.rate_limit import RateLimiter
from cbcl_pr_ros.runtime.stage_times import StageTimes
from cbcl_pr_ros.objects.stream import ObjectStream
from cbcl_pr_ros.stamps import stamp_to_s

__all__ = ["StreamAnswers"]


class StreamAnswers:
    """The two stream callbacks of a learner node, with what they keep between frames."""

    def __init__(self, node: Any, objects: ObjectStream) -> None:
        self.node = node
        self.objects = objects
        self.latest_features: FeatureVector | None = None  # what Classify answers without objects
        self.last_detections: tuple[Detections, tuple[int, int]] | None = None  # Classify's default
        self.rate_limit = RateLimiter()  # on the node clock: use_sim_time follows a bag's /clock
        self.times = StageTimes()  # where a frame's time goes (docs/nodes.md "Where the time goes")
        self.predictions_published = 0
        self.detections_published = 0

    def objects_streaming(self) -> bool:
        """True while the extractor sends objects (an ObjectFeatures within the last 2 s)."""
        return self.objects.streaming(self.node.now_s())

    def forget_frame(self) -> None:
        """Drop the last feature vector: a classify while paused must not answer an old frame."""
        self.latest_features = None

    def reset(self) -> None:
        """Forget every track and the last detections (the node's memory is freed)."""
        self.objects.reset()
        self.last_detections = None

    def stop_report(self) -> str:
        """The line logged when the node stops: counters and stage times as JSON (read by the benches)."""
        return "learner stopping: " + json.dumps({"predictions": self.predictions_published,
                                                 "detections": self.detections_published,
                                                 "stages": self.times.summary()})

    def _stamp_age(self, stage: str, header: Header) -> None:
        """Record image stamp -> now (host wall clock) as ``stage``: the path up to this callback."""
        self.times.add(stage, time.time() - stamp_to_s(header.stamp))

    def on_features(self, msg: FeatureVector) -> None:
        """One feature vector: offered to waiting teaches, then a prediction within the rate."""
        node = self.node
        ctl, pub = node.controller, node.prediction_pub
        if ctl is None or pub is None or node.phase != ACTIVE:
            return  # a message already queued when the stream was paused
        self._stamp_age("stamp_to_callback", msg.header)
        self.latest_features = msg
        node.waiters.offer("features", msg)
        rate = float(node.get_parameter("max_prediction_rate").value)
        if not self.rate_limit.allow(node.now_s(), rate):
            return
        if not ctl.classes:
            return
        times = self.times
        with times.stage("predict"):
            try:
                feats = features_from_msgs([msg], node.backbone_name, ctl.feature_dim)
            except ValueError as exc:
                node.get_logger().warning(f"feature vector ignored: {exc}", throttle_duration_sec=10.0)
                return
            out = ctl.classify(feats, top_k=len(ctl.classes))
        if not out.success:
            return
        pred = out.predictions[0]
        with times.stage("publish"):
            pub.publish(prediction_to_msg(msg.header, pred, out.model_version))
        self.predictions_published += 1
        if node.debug.on and not self.objects_streaming():
            # with objects, the debug image shows their boxes instead
            with times.stage("debug_image"):
                node.debug.publish_prediction(msg.header, pred)

    def on_objects(self, msg: ObjectFeatures | bytes) -> None:
        """Classify every object of the frame in one batch, track, publish detections/markers/image.
        The subscription delivers the serialized bytes: a frame of more objects than an extractor
        sends is refused before its messages are built."""
        node = self.node
        ctl, det_pub, markers_pub = node.controller, node.detections_pub, node.markers_pub
        if ctl is None or det_pub is None or markers_pub is None or node.phase != ACTIVE:
            return  # a message already queued when the stream was paused
        msg = built_within_bounds(msg, object_features_from_serialized, node.get_logger(), "object features")
        if msg is None:
            return
        self._stamp_age("objects_stamp_to_callback", msg.header)
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            frame = object_frame_from_msg(msg, node.backbone_name, ctl.feature_dim or None,
                                          node.limits.max_feature_abs)
        except ValueError as exc:
            node.get_logger().warning(f"object features ignored: {exc}", throttle_duration_sec=10.0)
            return
        self.objects.arrived(frame, node.now_s())
        node.waiters.offer("objects", frame)
        pose = node.camera_poses.pose_for(msg.header.stamp)  # tracks and detections: in its frame
        version, tracks = self.objects.classify_and_track(frame, ctl, stamp_to_s(msg.header.stamp), pose)
        det = make_detections_msg(msg.header, tracks, version, pose)
        self.last_detections = (det, frame.shape)
        det_pub.publish(det)
        if markers_pub.get_subscription_count():  # RViz's boxes cost ~2 ms a frame to build: only for a viewer
            markers_pub.publish(make_marker_array(det))
        self.detections_published += 1
        self.times.add("objects", time.perf_counter() - t0, time.thread_time() - c0)
        if node.debug.on:
            with self.times.stage("debug_image"):
                node.debug.publish_detections(det)
