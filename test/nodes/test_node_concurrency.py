"""Over ROS: the learner node answers Classify while a TeachClass is still learning.

The learner node and a client run in this process on one domain; the core learner's retrain is
held until the test releases it (held_retrain), so a Classify that queued behind the TeachClass
(a callback group shared with the mutating services, a lock taken by classify...) cannot answer
and the test fails; one that does not wait answers at once with the model from before the teach.
"""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
from held_retrain import blocked_retrains  # noqa: E402
from ros_testing import Client, domain  # noqa: E402

D = 8


def _feature_msgs(rng, centre: float, n: int):
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.conversions import make_feature_msg

    return [make_feature_msg(Header(), "test", "", v) for v in rng.normal(centre, 1.0, (n, D))]


def _settled(cli, client, request, attempts: int = 6):
    """The first requests of a new client can be lost while discovery of its reply reader is still
    under way ("failed to send response"); repeat until one is answered (teaching a class again
    only adds examples, so repeating a set-up request is harmless)."""
    for _ in range(attempts - 1):
        try:
            return cli.request(client, request, timeout=10.0)
        except TimeoutError:
            pass
    return cli.request(client, request, timeout=60.0)


def test_classify_service_answers_while_teach_class_is_learning(monkeypatch):
    import threading

    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from cbcl_pr_ros.nodes.learner import LearnerNode
    from cbcl_pr_ros.nodes.spin import spin_until, stop_executor
    from cbcl_pr_ros.srv import Classify, TeachClass

    rng = np.random.default_rng(0)
    with domain() as dom:
        ctx = rclpy.Context()
        rclpy.init(context=ctx, domain_id=dom)
        node = LearnerNode(feature_source=object(), context=ctx, parameter_overrides=[
            Parameter("memory_path", value=""), Parameter("backbone", value="test"),
            Parameter("feature_dim", value=D)])
        executor = MultiThreadedExecutor(num_threads=4, context=ctx)
        executor.add_node(node)
        stop = threading.Event()
        spin = threading.Thread(target=spin_until, args=(executor, stop), daemon=True)
        spin.start()
        cli = Client(dom)
        try:
            teach = cli.node.create_client(TeachClass, "teach_class")
            classify = cli.node.create_client(Classify, "classify")
            for label, centre in (("mug", 0.0), ("box", 6.0)):
                r = _settled(cli, teach, TeachClass.Request(label=label, features=_feature_msgs(rng, centre, 6)))
                assert r.success, r.message
            box = Classify.Request(feature=_feature_msgs(rng, 6.0, 1)[0])
            version = _settled(cli, classify, box).model_version
            with blocked_retrains(monkeypatch) as (entered, release):
                pending = teach.call_async(TeachClass.Request(label="pot", features=_feature_msgs(rng, -6.0, 6)))
                assert entered.wait(60.0), "the TeachClass never reached its retrain"
                try:
                    # the teach is held until release: only a classify that does not wait can answer
                    answer = cli.request(classify, box, timeout=60.0)
                finally:
                    release.set()
                assert answer.success and answer.label == "box" and answer.model_version == version, answer.message
                done = threading.Event()
                pending.add_done_callback(lambda _f: done.set())
                assert done.wait(60.0) and pending.result().success
            after = cli.request(classify, Classify.Request(feature=_feature_msgs(rng, -6.0, 1)[0]))
            assert after.label == "pot" and after.model_version > version
        finally:
            cli.close()
            stop.set()
            spin.join(5.0)
            stop_executor(executor)  # the node's own shutdown order (cbcl_pr_ros.nodes.spin)
            node.destroy_node()
            ctx.try_shutdown()
