"""The learner's debug image subscribes to the camera only while someone looks: a subscriber of the
debug_image publisher or the ``debug_image`` parameter (:func:`debug_wanted`), asked under the debug
image's lock at every event, with no polling timer; the node is handed to the calls, never kept."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy")

from cbcl_pr_ros.nodes.conversions import rgb_to_image_msg  # noqa: E402
from cbcl_pr_ros.nodes.learner_debug import DebugImage, debug_wanted  # noqa: E402


class FakePublisher:
    def __init__(self) -> None:
        self.subscribers = 0
        self.sent: list[Any] = []

    def get_subscription_count(self) -> int:
        return self.subscribers

    def publish(self, msg: Any) -> None:
        self.sent.append(msg)


class FakeNode:
    """What DebugImage asks of the node handed to it, recording subscriptions made and destroyed."""

    def __init__(self) -> None:
        self.active, self.debug_param = False, False
        self.made: list[str] = []
        self.destroyed: list[Any] = []
        self.debug_pub = FakePublisher()

    def create_subscription(self, msg_type: Any, topic: str, cb: Any, qos: Any, **kw: Any) -> Any:
        self.made.append(topic)
        return SimpleNamespace(topic_name=topic, callback=cb)

    def destroy_subscription(self, sub: Any) -> None:
        self.destroyed.append(sub)

    def get_logger(self) -> Any:
        return _LOG


_LOG = SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None)


def _debug() -> tuple[FakeNode, DebugImage, Any]:
    node = FakeNode()
    debug = DebugImage(False, "image", _LOG, callback_group=None)

    def update() -> None:  # what the learner node does on the matched event, the parameter and activate
        debug.update(node, lambda: debug_wanted(node.active, node.debug_pub, node.debug_param))

    return node, debug, update


def test_a_subscriber_turns_the_camera_on_and_leaving_turns_it_off():
    node, debug, update = _debug()
    node.debug_pub.subscribers = 1
    update()  # inactive: nothing yet
    assert not debug.on and node.made == []
    node.active = True
    update()
    assert debug.on and node.made == ["image"]
    update()  # a second event while on changes nothing
    assert node.made == ["image"] and node.destroyed == []
    node.debug_pub.subscribers = 0
    update()
    assert not debug.on and len(node.destroyed) == 1


def test_the_parameter_turns_it_on_without_a_subscriber_and_release_wins():
    node, debug, update = _debug()
    node.active = True
    update()
    assert not debug.on  # nobody looks
    node.debug_param = True
    update()
    assert debug.on
    node.active = False  # the node leaves the active state
    debug.release(node)
    update()  # a late event does not subscribe again
    assert not debug.on and node.made == ["image"]


def test_no_publisher_no_camera():
    assert not debug_wanted(True, None, True)


def test_an_answer_is_drawn_on_its_own_frame_only_while_someone_looks():
    node, debug, update = _debug()
    pred = SimpleNamespace(label="mug", confidence=0.9, known=True)
    frame = rgb_to_image_msg(np.zeros((24, 32, 3), np.uint8))
    frame.header.stamp.sec = 5
    assert not debug.show(node.debug_pub, debug.prediction_image, frame.header, pred)  # off: nothing drawn
    node.active, node.debug_param = True, True
    update()
    debug.subscription.callback(frame)  # the camera frame arrives
    other = rgb_to_image_msg(np.zeros((24, 32, 3), np.uint8)).header
    other.stamp.sec = 6
    assert debug.show(node.debug_pub, debug.prediction_image, other, pred) and node.debug_pub.sent == []
    assert debug.show(node.debug_pub, debug.prediction_image, frame.header, pred)
    (drawn,) = node.debug_pub.sent
    assert (drawn.height, drawn.width) == (24, 32) and drawn.header.stamp.sec == 5


def test_the_frames_waiting_for_their_answer_hold_a_bounded_number_of_bytes():
    from cbcl_pr_ros.nodes import learner_debug

    _, debug, _ = _debug()
    third = bytes(learner_debug.DEBUG_FRAME_BYTES // 3)
    for sec in range(6):  # a stranger's frames of a third of the budget each: three stay
        stamp = SimpleNamespace(sec=sec, nanosec=0)
        debug._on_image(SimpleNamespace(header=SimpleNamespace(stamp=stamp, frame_id="camera"), data=third))
    assert debug.frames.bytes_held <= learner_debug.DEBUG_FRAME_BYTES and len(debug.frames) == 3
