"""A node process's spin threads sleep while there is no work, and wake when the process stops.

rclpy's ``spin_once`` rebuilds the executor's wait set in Python every time its timeout runs out; with
0.1 s that was 0.5-1 % of a core per executor, eleven executors in the five node processes of a
session (docs/nodes.md "Busy and quiet"). ``spinning`` now waits ``IDLE_WAIT_S`` for work and wakes
its executors when it is left, so stopping is as prompt as before.
"""
from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
from ros_testing import domain  # noqa: E402


def _counting_builds(monkeypatch) -> list:
    """Count the executors' wait-set builds (each one asks for the nodes to wait on)."""
    from rclpy.executors import Executor

    builds: list = []
    original = Executor.get_nodes

    def get_nodes(self):
        builds.append(threading.current_thread().name)
        return original(self)

    monkeypatch.setattr(Executor, "get_nodes", get_nodes)
    return builds


def test_an_idle_spin_thread_builds_no_wait_set_and_stops_when_woken(monkeypatch):
    from std_srvs.srv import Trigger

    from cbcl_pr_ros.nodes import spin

    monkeypatch.setattr(spin, "IDLE_WAIT_S", 3600.0)  # only work or the wake-up on leaving can end a wait
    builds = _counting_builds(monkeypatch)
    with domain() as dom:
        ctx = rclpy.Context()
        rclpy.init(context=ctx, domain_id=dom)
        try:
            node = rclpy.create_node("idle_node", context=ctx)
            node.spin_threads = 1
            node.create_service(Trigger, "poke", lambda _q, r: setattr(r, "success", True) or r)
            peer = rclpy.create_node("idle_peer", context=ctx)
            client = peer.create_client(Trigger, "poke")
            peer_exec = rclpy.executors.SingleThreadedExecutor(context=ctx)
            peer_exec.add_node(peer)
            with spin.spinning([node], 2) as threads:
                assert client.wait_for_service(timeout_sec=20.0)
                future = client.call_async(Trigger.Request())
                peer_exec.spin_until_future_complete(future, timeout_sec=20.0)
                assert future.done() and future.result().success  # work still wakes the thread
                time.sleep(0.3)  # the answer's own wake-ups are over
                before = [b for b in builds if b.startswith("spin-idle_node")]
                time.sleep(0.6)
                after = [b for b in builds if b.startswith("spin-idle_node")]
                assert len(after) == len(before), f"{len(after) - len(before)} wait sets built with nothing to do"
            assert not any(t.is_alive() for t in threads), "a spin thread missed the wake-up on leaving"
            peer.destroy_node()
            node.destroy_node()
        finally:
            rclpy.shutdown(context=ctx)


def test_an_executor_without_rclpys_turn_falls_back_to_a_short_spin_once():
    """The stoppable turn is rclpy's protected ``_spin_once_impl``: another release may lack it or
    change its parameters, and then each turn is a plain ``spin_once`` of at most 0.1 s."""
    import threading as _threading

    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    from cbcl_pr_ros.nodes import spin

    class Changed:
        def __init__(self) -> None:
            self.timeouts: list[float] = []

        def _spin_once_impl(self, timeout_sec=None):  # no wait_condition
            raise AssertionError("a changed protected method must not be called")

        def spin_once(self, timeout_sec=None) -> None:
            self.timeouts.append(timeout_sec)

    assert spin._has_stoppable_turn(SingleThreadedExecutor) and spin._has_stoppable_turn(MultiThreadedExecutor)
    assert not spin._has_stoppable_turn(Changed)
    changed = Changed()
    spin._spin_once(changed, _threading.Event(), 2.0)
    assert changed.timeouts == [0.1]
