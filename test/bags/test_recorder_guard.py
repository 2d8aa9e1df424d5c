"""The recorder's subscription callback is guarded: a write that fails drops the message, not the node."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")


class _FailingWriter:
    """A bag writer whose disk is full after the first message."""

    path = Path("/nonexistent/bag")
    storage = "mcap"

    def __init__(self) -> None:
        self.written = 0

    def add_topic(self, topic, msgtype, qos=None) -> None:
        pass

    def write_raw(self, topic, msgtype, data, log_time_ns) -> None:
        if self.written >= 1:
            raise OSError(28, "No space left on device")
        self.written += 1


def test_a_failing_write_drops_the_message_and_the_recorder_goes_on():
    from rclpy.context import Context

    from cbcl_pr_ros.bags.types import EVENT_TYPE
    from cbcl_pr_ros.nodes.recorder import RecorderNode

    ctx = Context()
    rclpy.init(context=ctx)
    try:
        writer = _FailingWriter()
        node = RecorderNode(writer, {"/teaching_events": EVENT_TYPE}, context=ctx)
        callback = node._subs[0].callback
        callback(b"\x00\x01\x00\x00")  # written
        callback(b"\x00\x01\x00\x00")  # OSError inside: dropped, no exception out of the callback
        callback(b"\x00\x01\x00\x00")
        assert writer.written == 1
        assert node.counts["/teaching_events"] == 1
        node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
