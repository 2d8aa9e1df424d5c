"""The learner's ``debug_image``: the camera frame with its answer drawn on it, for rqt and RViz.

Camera frames are large, so the learner subscribes to them only while someone looks (a subscriber
on ``debug_image`` or the ``debug_image`` parameter): the publisher's matched event (a subscriber
came or went), a change of the parameter and the node's activation call :meth:`DebugImage.update`,
which asks the node's rule (:func:`debug_wanted`) under its lock. A frame is kept by stamp until the
answer for it comes (a prediction or the frame's detections) and is drawn then; an answer whose
frame has not arrived is skipped rather than drawn on another frame. The node is handed to the calls
that make or destroy the camera subscription, never kept.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from cbcl_pr_ros.nodes.conversions import compressed_msg_to_rgb, image_msg_to_rgb, rgb_to_image_msg, stamp_key
from cbcl_pr_ros.nodes.debug_image import annotate
from cbcl_pr_ros.nodes.detections_msgs import draw_detections
from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.nodes.lifecycle import overridable
from cbcl_pr_ros.nodes.qos import image_qos
from cbcl_pr_ros.request_checks import RequestLimits
from cbcl_pr_ros.runtime.frame_buffer import FrameBuffer

__all__ = ["DebugImage", "debug_wanted"]


def debug_wanted(active: bool, publisher: Any, asked: bool) -> bool:
    """Camera frames are wanted while the node is active, its ``debug_image`` publisher exists and
    someone looks: the ``debug_image`` parameter (``asked``) or a subscriber of the publisher."""
    return active and publisher is not None and (bool(asked) or publisher.get_subscription_count() > 0)


#: camera frames held for their answer, at most together (the newest always): whoever publishes on the
#: camera topic chooses their sizes, and 16 frames of 64 MiB would be 1 GiB
DEBUG_FRAME_BYTES = 128 * 1024 * 1024


def _frame_buffer() -> FrameBuffer[Any]:
    return FrameBuffer(capacity=16, max_bytes=DEBUG_FRAME_BYTES, size=lambda m: len(m.data))


class DebugImage:
    """Owns the on-demand camera subscription and the frames waiting for their answer."""

    def __init__(self, compressed: bool, image_topic: str, logger: Any, callback_group: Any,
                 max_pixels: int = RequestLimits.max_image_pixels) -> None:
        self.image_type = CompressedImage if compressed else Image
        self.max_pixels = max_pixels  # a frame above it is not decoded (parameter max_image_pixels)
        self.image_topic = image_topic
        self.logger = logger
        self.group = callback_group
        self.subscription: Any = None
        self.frames: FrameBuffer[Any] = _frame_buffer()
        # the event, the parameter callback and the transitions run on different threads
        self._lock = threading.Lock()

    @property
    def on(self) -> bool:
        """True while frames are being received for the debug image."""
        return self.subscription is not None

    def update(self, node: Any, wanted: Callable[[], bool]) -> None:
        """Subscribe ``node`` to the camera while ``wanted()`` (asked under the lock), else let it go."""
        with self._lock:
            want = wanted()
            if want and self.subscription is None:
                self.subscription = node.create_subscription(
                    self.image_type, self.image_topic, guard_callback(node, self._on_image, "debug frame"),
                    image_qos(), callback_group=self.group, qos_overriding_options=overridable())
                self.logger.info(f"debug image on: subscribed to '{self.subscription.topic_name}'")
            elif not want and self.subscription is not None:
                self._release(node)
                self.logger.info("debug image off: camera subscription released")

    def release(self, node: Any) -> None:
        """Drop the camera subscription and the frames held (the node is leaving the active state)."""
        with self._lock:
            self._release(node)

    def _release(self, node: Any) -> None:
        if self.subscription is not None:
            node.destroy_subscription(self.subscription)
            self.subscription = None
        self.frames = _frame_buffer()

    def _on_image(self, msg: Any) -> None:
        self.frames.put(stamp_key(msg.header), msg)

    def show(self, publisher: Any, image: Callable[..., Image | None], *args: Any) -> bool:
        """Publish ``image(*args)`` on ``publisher`` while frames are received; True then (drawn or its
        frame not there), False while nobody looks."""
        if not self.on or publisher is None:
            return False
        drawn = image(*args)
        if drawn is not None:
            publisher.publish(drawn)
        return True

    def prediction_image(self, header: Header, pred: Any) -> Image | None:
        """The frame of ``header`` with the prediction's label and score in a banner (None: no frame)."""
        return self._drawn(header, lambda rgb: annotate(rgb, pred.label, pred.confidence, pred.known))

    def detections_image(self, det: Any) -> Image | None:
        """The frame of a Detections message with every box and label drawn (None: no frame)."""
        return self._drawn(det.header, lambda rgb: draw_detections(rgb, det))

    def _drawn(self, header: Header, draw: Any) -> Image | None:
        frame = self.frames.pop(stamp_key(header))
        if frame is None:
            return None  # the frame has not arrived (or fell out): skip rather than mislabel another one
        try:
            decode = compressed_msg_to_rgb if self.image_type is CompressedImage else image_msg_to_rgb
            rgb = decode(frame, self.max_pixels)
            return rgb_to_image_msg(draw(rgb), frame.header)
        except (ValueError, TypeError) as exc:
            self.logger.warning(f"debug image skipped: {exc}", throttle_duration_sec=10.0)
            return None
