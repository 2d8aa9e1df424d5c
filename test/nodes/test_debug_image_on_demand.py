"""The learner's debug image subscribes to the camera only while someone looks: the debug_image
publisher's matched event and the ``debug_image`` parameter decide, with no polling timer."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("rclpy")

from cbcl_pr_ros.nodes.learner_debug import DebugImage  # noqa: E402
from cbcl_pr_ros.nodes.lifecycle import ACTIVE, INACTIVE  # noqa: E402


class FakePublisher:
    def __init__(self, event_callbacks: Any) -> None:
        self.events, self.subscribers = event_callbacks, 0

    def get_subscription_count(self) -> int:
        return self.subscribers


class FakeNode:
    """What DebugImage asks of the learner node, recording subscriptions made and destroyed."""

    def __init__(self) -> None:
        self.phase, self.debug_param, self.param_callbacks = INACTIVE, False, []
        self.made: list[str] = []
        self.destroyed: list[Any] = []
        self.debug_pub: Any = None

    def add_post_set_parameters_callback(self, cb: Any) -> None:
        self.param_callbacks.append(cb)

    def create_lifecycle_publisher(self, msg_type: Any, topic: str, qos: Any, **kw: Any) -> FakePublisher:
        assert topic == "debug_image"
        return FakePublisher(kw["event_callbacks"])

    def get_parameter(self, name: str) -> Any:
        assert name == "debug_image"
        return SimpleNamespace(value=self.debug_param)

    def create_subscription(self, msg_type: Any, topic: str, cb: Any, qos: Any, **kw: Any) -> Any:
        self.made.append(topic)
        return SimpleNamespace(topic_name=topic)

    def destroy_subscription(self, sub: Any) -> None:
        self.destroyed.append(sub)

    def get_logger(self) -> Any:
        return SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None)


def _debug() -> tuple[FakeNode, DebugImage]:
    node = FakeNode()
    debug = DebugImage(node, {"compressed": False, "image_topic": "image"}, callback_group=None)
    node.debug_pub = debug.make_publisher()
    return node, debug


def test_a_subscriber_matching_turns_the_camera_on_and_leaving_turns_it_off():
    node, debug = _debug()
    matched = node.debug_pub.events.matched
    node.debug_pub.subscribers = 1
    matched(None)  # inactive: nothing yet
    assert not debug.on and node.made == []
    node.phase = ACTIVE
    matched(None)
    assert debug.on and node.made == ["image"]
    matched(None)  # a second event while on changes nothing
    assert node.made == ["image"] and node.destroyed == []
    node.debug_pub.subscribers = 0
    matched(None)
    assert not debug.on and len(node.destroyed) == 1


def test_the_parameter_turns_it_on_without_a_subscriber_and_release_wins():
    node, debug = _debug()
    node.phase = ACTIVE
    (on_params,) = node.param_callbacks
    on_params([SimpleNamespace(name="max_prediction_rate")])  # another parameter: nothing
    assert not debug.on
    node.debug_param = True
    on_params([SimpleNamespace(name="debug_image")])
    assert debug.on
    node.phase = INACTIVE  # the node leaves the active state
    debug.release()
    node.debug_pub.events.matched(None)  # a late event does not subscribe again
    assert not debug.on and node.made == ["image"]
