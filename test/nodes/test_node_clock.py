"""The learner's prediction rate and TeachClass frame wait run on the node clock (use_sim_time).

The node is built in-process and its ROS clock is driven by hand (what rclpy's TimeSource does when
a /clock message arrives), so nothing here depends on how fast this machine is.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.time import Time  # noqa: E402
from ros_testing import fresh_domain, release_domain  # noqa: E402
from std_msgs.msg import Header  # noqa: E402

from cbcl_pr_ros.nodes.conversions import make_feature_msg  # noqa: E402


@pytest.fixture
def learner():
    from cbcl_pr_ros.nodes.learner import LearnerNode

    dom = fresh_domain()
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=dom)
    node = LearnerNode(feature_source=object(), context=ctx, parameter_overrides=[
        Parameter("use_sim_time", value=True), Parameter("memory_path", value=""),
        Parameter("max_prediction_rate", value=1.0), Parameter("backbone", value="test"),
        Parameter("feature_dim", value=8)])
    clock = node.get_clock()
    clock._set_ros_time_is_active(True)  # noqa: SLF001 (as TimeSource does once /clock is used)
    rng = np.random.default_rng(0)
    node.session.controller.teach("a", rng.normal(0, 1, (6, 8)))
    node.session.controller.teach("b", rng.normal(5, 1, (6, 8)))
    try:
        yield node, clock
    finally:
        node.destroy_node()
        rclpy.shutdown(context=ctx)
        release_domain(dom)


def _vector(seed: int):
    return make_feature_msg(Header(), "test", "", np.random.default_rng(seed).normal(0, 1, 8))


def _set(clock, seconds: float) -> None:
    clock.set_ros_time_override(Time(nanoseconds=int(seconds * 1e9), clock_type=clock.clock_type))


def test_prediction_rate_follows_the_sim_clock(learner):
    node, clock = learner
    _set(clock, 100.0)
    for i in range(10):  # sim time stands still: only the burst passes, however long this takes
        node._on_features(_vector(i))
    assert node.session.predictions_published == 2
    for i in range(5):  # 5 s of sim time at 1 Hz: 5 more
        _set(clock, 101.0 + i)
        node._on_features(_vector(i))
    assert node.session.predictions_published == 7


def test_teach_frame_wait_follows_the_sim_clock(learner):
    node, clock = learner
    _set(clock, 10.0)
    result: list = []
    worker = threading.Thread(target=lambda: result.append(node.session.collect(3, 1000.0, "features")))
    worker.start()
    node._on_features(_vector(0))
    worker.join(0.5)
    assert worker.is_alive()  # 1000 s of sim time have not passed
    for k in range(1, 40):  # the sim clock moves on (in small steps, as /clock does)
        _set(clock, 10.0 + 30.0 * k)
        worker.join(0.02)
        if not worker.is_alive():
            break
    assert not worker.is_alive() and len(result[0]) == 1  # ended by sim time, with the one frame
