"""A node's stream callbacks run on their own single-threaded executor (``stream_callback_groups``).

The learner's services wait in their callbacks (a TeachClass waits for camera frames), so its
services need a pool; its camera-rate streams get an executor of their own (nodes/spin.py, issue 25).
Here a node whose service blocks until the stream has delivered messages shows both halves: the
stream keeps flowing while a service callback waits, on the thread named for the stream, and the
service runs on the pool, never on the stream's thread.
"""
from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
from ros_testing import domain, wait_until  # noqa: E402


def _stream_node(ctx):
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.node import Node
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    class StreamNode(Node):
        spin_threads = 2

        def __init__(self) -> None:
            super().__init__("stream_node", context=ctx)
            self.stream_group = MutuallyExclusiveCallbackGroup()
            self.stream_callback_groups = (self.stream_group,)
            self.stream_threads: set[str] = set()
            self.service_threads: set[str] = set()
            self.received = 0
            self.enough = threading.Event()
            self.create_subscription(String, "chatter", self._on_msg, 10, callback_group=self.stream_group)
            self.create_service(Trigger, "wait_for_stream", self._on_wait)

        def _on_msg(self, _msg) -> None:
            self.stream_threads.add(threading.current_thread().name)
            self.received += 1
            if self.received >= 5:
                self.enough.set()

        def _on_wait(self, _req, resp):
            self.service_threads.add(threading.current_thread().name)
            resp.success = self.enough.wait(20.0)  # only the stream's own thread can set it now
            return resp

    return StreamNode()


def test_stream_groups_run_on_their_own_thread_while_a_service_waits():
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    from cbcl_pr_ros.nodes.spin import StreamGroupsExecutor, WithoutGroupsExecutor, executors_for, spinning

    with domain() as dom:
        ctx = rclpy.Context()
        rclpy.init(context=ctx, domain_id=dom)
        try:
            node = _stream_node(ctx)
            kinds = [type(e) for e in executors_for(node, 4)]
            assert kinds == [WithoutGroupsExecutor, StreamGroupsExecutor]
            peer = rclpy.create_node("stream_peer", context=ctx)
            pub = peer.create_publisher(String, "chatter", 10)
            client = peer.create_client(Trigger, "wait_for_stream")
            with spinning([node], 4):
                assert client.wait_for_service(timeout_sec=20.0)
                future = client.call_async(Trigger.Request())  # the service now waits for the stream
                assert wait_until(lambda: bool(node.service_threads), 20.0), "the service never started"
                peer_exec = rclpy.executors.SingleThreadedExecutor(context=ctx)
                peer_exec.add_node(peer)
                for _ in range(200):
                    pub.publish(String(data="x"))
                    peer_exec.spin_once(timeout_sec=0.05)
                    if future.done():
                        break
                assert future.done() and future.result().success, \
                    f"the stream stalled while the service waited ({node.received} messages)"
            assert node.stream_threads == {"spin-stream_node-stream"}
            assert node.service_threads and not node.service_threads & node.stream_threads
            peer.destroy_node()
            node.destroy_node()
        finally:
            rclpy.shutdown(context=ctx)


def test_a_node_without_stream_groups_keeps_one_executor():
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    from cbcl_pr_ros.nodes.spin import executors_for

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=0)  # no node is made: the domain is never used
    try:
        class Plain:
            context = ctx

        class OneThread(Plain):
            spin_threads = 1
            stream_callback_groups = (object(),)  # single-threaded anyway: nothing to split

        assert [type(e) for e in executors_for(Plain(), 3)] == [MultiThreadedExecutor]
        assert [type(e) for e in executors_for(OneThread(), 3)] == [SingleThreadedExecutor]
    finally:
        rclpy.shutdown(context=ctx)
