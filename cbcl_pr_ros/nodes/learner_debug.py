"""The learner's ``debug_image``: the camera frame with its answer drawn on it, for rqt and RViz.

Camera frames are large, so the learner subscribes to them only while someone looks (a subscriber
on ``debug_image`` or the ``debug_image`` parameter): the publisher's matched event (a subscriber
came or went) and a change of the parameter decide, and the node's activation. A frame is kept
by stamp until the answer for it comes (a prediction or the frame's detections) and is drawn then;
an answer whose frame has not arrived is skipped rather than drawn on another frame.
"""
from __future__ import annotations

import threading
from typing import Any

from rclpy.event_handler import PublisherEventCallbacks
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from cbcl_pr_ros.nodes.conversions import compressed_msg_to_rgb, image_msg_to_rgb, rgb_to_image_msg, stamp_key
from cbcl_pr_ros.nodes.debug_image import FrameBuffer, annotate
from cbcl_pr_ros.nodes.detections_msgs import draw_detections
from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.nodes.lifecycle import ACTIVE, overridable
from cbcl_pr_ros.nodes.qos import image_qos, result_qos

__all__ = ["DebugImage"]


class DebugImage:
    """Owns the on-demand camera subscription and the frames waiting for their answer."""

    def __init__(self, node: Any, params: dict[str, Any], callback_group: Any) -> None:
        self.node = node
        self.params = params
        self.group = callback_group
        self.image_type = CompressedImage if params["compressed"] else Image
        self.subscription: Any = None
        self.frames: FrameBuffer[Any] = FrameBuffer(capacity=16)
        # the event, the parameter callback and the transitions run on different threads
        self._lock = threading.Lock()
        node.add_post_set_parameters_callback(self._on_parameters)

    def make_publisher(self) -> Any:
        """The ``debug_image`` lifecycle publisher, whose matched event turns the camera on and off."""
        return self.node.create_lifecycle_publisher(
            Image, "debug_image", result_qos(depth=2), qos_overriding_options=overridable(),
            event_callbacks=PublisherEventCallbacks(matched=lambda _info: self.update()),
            callback_group=self.group)

    @property
    def publisher(self) -> Any:
        """The node's ``debug_pub`` (made by its configure, freed by its cleanup; None meanwhile)."""
        return self.node.debug_pub

    @property
    def on(self) -> bool:
        """True while frames are being received for the debug image."""
        return self.subscription is not None

    def wanted(self) -> bool:
        pub = self.publisher
        return self.node.phase == ACTIVE and pub is not None and (
            bool(self.node.get_parameter("debug_image").value) or pub.get_subscription_count() > 0)

    def update(self) -> None:
        """Subscribe to the camera only while someone looks at the debug image (frames are large)."""
        with self._lock:
            self._update()

    def _on_parameters(self, params: list[Any]) -> None:
        if any(p.name == "debug_image" for p in params):
            self.update()

    def _update(self) -> None:
        node, wanted = self.node, self.wanted()
        if wanted and self.subscription is None:
            self.subscription = node.create_subscription(
                self.image_type, self.params["image_topic"], guard_callback(node, self._on_image, "debug frame"),
                image_qos(),
                callback_group=self.group, qos_overriding_options=overridable())
            node.get_logger().info(f"debug image on: subscribed to '{self.subscription.topic_name}'")
        elif not wanted and self.subscription is not None:
            self._release()
            node.get_logger().info("debug image off: camera subscription released")

    def release(self) -> None:
        """Drop the camera subscription and the frames held (the node is leaving the active state)."""
        with self._lock:
            self._release()

    def _release(self) -> None:
        if self.subscription is not None:
            self.node.destroy_subscription(self.subscription)
            self.subscription = None
        self.frames = FrameBuffer(capacity=16)

    def _on_image(self, msg: Any) -> None:
        self.frames.put(stamp_key(msg.header), msg)

    def publish_prediction(self, header: Header, pred: Any) -> None:
        """The frame of ``header`` with the prediction's label and score in a banner."""
        self._publish(header, lambda rgb: annotate(rgb, pred.label, pred.confidence, pred.known))

    def publish_detections(self, det: Any) -> None:
        """The frame of a Detections message with every box and label drawn."""
        self._publish(det.header, lambda rgb: draw_detections(rgb, det))

    def _publish(self, header: Header, draw: Any) -> None:
        frame, pub = self.frames.pop(stamp_key(header)), self.publisher
        if frame is None or pub is None:
            return  # the frame has not arrived (or fell out): skip rather than mislabel another one
        try:
            rgb = compressed_msg_to_rgb(frame) if self.image_type is CompressedImage else image_msg_to_rgb(frame)
            pub.publish(rgb_to_image_msg(draw(rgb), frame.header))
        except (ValueError, TypeError) as exc:
            self.node.get_logger().warning(f"debug image skipped: {exc}", throttle_duration_sec=10.0)
