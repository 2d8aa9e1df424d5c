"""What the robot-side nodes leave undone when nothing needs it (docs/nodes.md "Busy and quiet").

The simulated world renders no frame that nobody subscribes to (a 640x480 frame with shadows is a
fifth of a second of CPU), and the steady topics and timers of the arm, the world and the teaching
page spin on a single-threaded executor of their own: on rclpy's thread pool a 20 Hz ``joint_states``
woke the spin thread some twenty times a message (bench/bench_idle.py measured 6-8 % of a core for
an arm doing nothing).
"""
from __future__ import annotations

import types

import pytest
from world_stand_in import Recorder, blank_frame, world_stand_in


def _world_without_listeners(sent: list, publish_depth: bool = True) -> types.SimpleNamespace:
    """The state publish_frame reads, every camera publisher without a subscriber and a world that
    fails the test when it renders."""
    def render():
        raise AssertionError("rendered a frame nobody subscribes to")

    return world_stand_in(sent, publish_depth, listeners=0, render=render)


def test_the_world_renders_nothing_while_nobody_subscribes_to_its_camera():
    from cbcl_pr_ros.nodes.sim_world import SimWorldNode

    sent: list = []
    node = _world_without_listeners(sent)
    assert SimWorldNode.publish_frame(node) is None
    assert sent == [] and node.frames_published == 0


@pytest.mark.parametrize("listener", ["image_pub", "info_pub", "depth_pub", "pose_pub"])
def test_one_subscriber_on_any_camera_topic_brings_the_frames_back(listener):
    from cbcl_pr_ros.nodes.sim_world import SimWorldNode

    sent: list = []
    node = _world_without_listeners(sent)
    frame = blank_frame()
    node.world = types.SimpleNamespace(render=lambda: frame)
    setattr(node, listener, Recorder(getattr(node, listener).name, sent))
    assert SimWorldNode.publish_frame(node) is not None
    assert [name for name, _ in sent] == ["camera_pose", "image", "camera_info", "depth"]


def test_without_depth_a_depth_subscriber_alone_renders_nothing():
    from cbcl_pr_ros.nodes.sim_world import SimWorldNode

    sent: list = []
    node = _world_without_listeners(sent, publish_depth=False)
    node.depth_pub = Recorder("depth", sent)  # listens to a topic this world does not send
    assert SimWorldNode.publish_frame(node) is None and sent == []


def _split(node, threads: int = 4):
    """(pool executor, stream executor) of ``node`` as run_node spins it."""
    from cbcl_pr_ros.nodes.spin import StreamGroupsExecutor, WithoutGroupsExecutor, executors_for

    executors = executors_for(node, threads)
    assert [type(e) for e in executors] == [WithoutGroupsExecutor, StreamGroupsExecutor]
    return executors


def _by_topic(entities, name: str):
    return next(e for e in entities if e.topic_name.endswith("/" + name))


@pytest.mark.ros
def test_the_arms_topics_spin_apart_from_its_services():
    rclpy = pytest.importorskip("rclpy")
    from ros_testing import isolated_context

    from cbcl_pr_ros.nodes.arm import ArmNode

    with isolated_context(0) as ctx:  # nothing is spun: the domain is never used
        node = ArmNode(context=ctx, node_name="arm_idle")
        try:
            pool, stream = _split(node)
            for topic in ("joint_states", "camera_info", "detections"):
                sub = _by_topic(node.subscriptions, topic)
                assert stream.can_execute(sub) and not pool.can_execute(sub), topic
            for srv in node.services:  # point_at, look_at, parameters: the pool
                assert pool.can_execute(srv) and not stream.can_execute(srv), srv.srv_name
        finally:
            node.destroy_node()
    assert rclpy is not None


@pytest.mark.ros
def test_the_worlds_control_step_spins_apart_from_its_rendering():
    pytest.importorskip("rclpy")
    from ros_testing import isolated_context

    from cbcl_pr_ros.nodes.sim_world import SimWorldNode

    world = types.SimpleNamespace(table_texture="plain", close=lambda: None)
    with isolated_context(0) as ctx:
        node = SimWorldNode(world, context=ctx, node_name="sim_world_idle")
        try:
            pool, stream = _split(node)
            rate, control_rate = (float(node.get_parameter(n).value) for n in ("rate_hz", "joint_state_rate_hz"))
            render = [t for t in node.timers if t.timer_period_ns == int(1e9 / rate)]
            control = [t for t in node.timers if t.timer_period_ns == int(1e9 / control_rate)]
            assert len(render) == 1 and len(control) == 1
            assert pool.can_execute(render[0]) and not stream.can_execute(render[0])
            assert stream.can_execute(control[0]) and not pool.can_execute(control[0])
            sub = _by_topic(node.subscriptions, "joint_command")
            assert stream.can_execute(sub) and not pool.can_execute(sub)
        finally:
            node.destroy_node()


@pytest.mark.ros
def test_the_pages_topics_spin_apart_from_its_service_clients():
    pytest.importorskip("rclpy")
    pytest.importorskip("aiohttp")
    from ros_testing import isolated_context

    from cbcl_pr_ros.nodes.teaching_page import TeachingPageNode

    with isolated_context(0) as ctx:
        node = TeachingPageNode(context=ctx, node_name="page_idle", start_server=False)
        try:
            pool, stream = _split(node)
            for topic in ("image", "detections", "camera_pose", "status"):
                sub = _by_topic(node.subscriptions, topic)
                assert stream.can_execute(sub) and not pool.can_execute(sub), topic
            for entity in [*node.clients, *node.timers]:  # a page thread waits on the clients' answers
                assert pool.can_execute(entity) and not stream.can_execute(entity)
        finally:
            node.destroy_node()
