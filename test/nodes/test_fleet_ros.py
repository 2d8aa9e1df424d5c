"""Issue 24, outcome 3 on a real ROS graph: two learner processes of one fleet on one domain.

robot1 is taught "mug" from feature vectors; robot2, never taught a mug, names it once robot1's
class update arrives; robot1 forgets it and robot2 forgets it too.  What crosses the network is read
from the fleet topic itself: ClassUpdate messages carrying class statistics, none of the shots'
vectors.  The merge_memory service merges a file by name and refuses a path outside memory_dir.
No timing is asserted (the waits are generous upper bounds for a loaded machine).
"""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.ros]

D = 8
START = 120.0
FLEET = {"backbone": "test", "feature_dim": D, "fleet": "home", "fleet_topic": "/class_updates"}


def _vectors(centre: float, n: int, seed: int) -> tuple[list, np.ndarray]:
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.conversions import make_feature_msg, ns_to_stamp

    x = np.random.default_rng(seed).normal(centre, 1.0, (n, D)).astype(np.float32)
    return [make_feature_msg(Header(stamp=ns_to_stamp(i)), "test", "", v) for i, v in enumerate(x)], x


def _label(cli: Any, robot: str, centre: float) -> str:
    from cbcl_pr_ros.srv import Classify

    msgs, _ = _vectors(centre, 1, 99)
    out = cli.call(Classify, f"/{robot}/classify", Classify.Request(feature=msgs[0], top_k=1), timeout=30)
    return out.label if out.success and out.known else ""


def _classes(cli: Any, robot: str) -> list[str]:
    from cbcl_pr_ros.srv import ListClasses

    return sorted(c.name for c in cli.call(ListClasses, f"/{robot}/list_classes", ListClasses.Request()).classes)


def _start(h: Any, domain_id: int, tmp_path: Any, robot: str, **extra: Any) -> Any:
    mem = tmp_path / robot
    mem.mkdir()
    return h.start_node("learner_node", domain_id, tmp_path,
                        params={**FLEET, "robot_name": robot, "memory_dir": str(mem), **extra},
                        extra=["--ros-args", "-r", f"__ns:=/{robot}"], tag=robot)


def test_taught_on_robot1_named_by_robot2_and_forget_follows(helpers, domain_id, tmp_path):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from cbcl_pr_ros.msg import ClassUpdate
    from cbcl_pr_ros.srv import ForgetClass, TeachClass

    h = helpers
    p1 = _start(h, domain_id, tmp_path, "robot1")
    p2 = _start(h, domain_id, tmp_path, "robot2", fleet_allow="robot1")
    cli = h.Client(domain_id)
    try:
        seen = cli.collect(ClassUpdate, "/class_updates",
                           QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                      durability=DurabilityPolicy.TRANSIENT_LOCAL))
        for proc, robot in ((p1, "robot1"), (p2, "robot2")):
            assert cli.wait_for_service(TeachClass, f"/{robot}/teach_class", START, proc), proc.output()[-3000:]
            proc.wait_for("fleet: published", START)
        assert _label(cli, "robot2", 0.0) == ""  # robot2 knows nothing yet

        msgs, shots = _vectors(0.0, 6, 1)
        taught = cli.call(TeachClass, "/robot1/teach_class", TeachClass.Request(label="mug", features=msgs))
        assert taught.success, taught.message
        t0 = time.monotonic()
        assert h.wait_until(lambda: _label(cli, "robot2", 0.0) == "mug", 60.0), p2.output()[-3000:]
        print(f"robot2 named the mug {time.monotonic() - t0:.2f} s after robot1's teach answered")
        p2.wait_for("merged 'mug' from robot 'robot1'", 30.0)  # the log line (output is flushed late)

        # only class statistics crossed: the update's payload holds none of the shots' vectors
        learned = [m for m in seen if m.robot == "robot1" and m.class_name == "mug" and m.op == ClassUpdate.LEARNED]
        assert learned and learned[0].fleet == "home" and len(learned[0].contribution_ids) == 1
        payload = bytes(learned[0].class_memory)
        assert payload and all(shot.tobytes() not in payload for shot in shots)
        assert all(shot.astype(np.float16).tobytes() not in payload for shot in shots)

        # forget on robot1 is seen on robot2
        out = cli.call(ForgetClass, "/robot1/forget_class", ForgetClass.Request(label="mug"))
        assert out.success, out.message
        assert h.wait_until(lambda: _classes(cli, "robot2") == [], 60.0), p2.output()[-3000:]
        p2.wait_for("forgot 'mug' as robot 'robot1' did", 30.0)
        assert any(m.op == ClassUpdate.FORGOTTEN and m.robot == "robot1" for m in seen)
    finally:
        cli.close()
        for proc in (p1, p2):
            proc.stop()


def test_merge_memory_service_and_hostile_updates(helpers, domain_id, tmp_path):
    from cbcl_pr_ros.srv import MergeMemory, SaveMemory, TeachClass

    h = helpers
    p1 = _start(h, domain_id, tmp_path, "robot1", fleet="")  # fleet mode off: merge by file only
    cli = h.Client(domain_id)
    try:
        assert cli.wait_for_service(TeachClass, "/robot1/teach_class", START, p1), p1.output()[-3000:]
        msgs, _ = _vectors(0.0, 6, 1)
        assert cli.call(TeachClass, "/robot1/teach_class", TeachClass.Request(label="mug", features=msgs)).success
        assert cli.call(SaveMemory, "/robot1/save_memory", SaveMemory.Request(path="mugs.safetensors")).success
        msgs, _ = _vectors(6.0, 6, 2)
        assert cli.call(TeachClass, "/robot1/teach_class", TeachClass.Request(label="box", features=msgs)).success
        for bad in ("../robot1/mugs.safetensors", "/etc/passwd", "nope.safetensors"):
            out = cli.call(MergeMemory, "/robot1/merge_memory", MergeMemory.Request(path=bad))
            assert not out.success and out.num_classes == 2, out.message
        out = cli.call(MergeMemory, "/robot1/merge_memory", MergeMemory.Request(path="mugs.safetensors"))
        assert out.success and "already known" in out.message and out.num_classes == 2, out.message

        # a learner not in fleet mode neither listens to nor publishes on the fleet topic
        assert cli.node.get_subscriptions_info_by_topic("/class_updates") == []
        assert cli.node.get_publishers_info_by_topic("/class_updates") == []
        assert _classes(cli, "robot1") == ["box", "mug"]
    finally:
        cli.close()
        p1.stop()


def test_fleet_peer_refuses_forged_and_disallowed_updates(helpers, domain_id, tmp_path):
    from cbcl_pr_ros.msg import ClassUpdate
    from cbcl_pr_ros.nodes.fleet import fleet_qos
    from cbcl_pr_ros.srv import TeachClass

    h = helpers
    p2 = _start(h, domain_id, tmp_path, "robot2", fleet_allow="robot1")
    cli = h.Client(domain_id)
    try:
        assert cli.wait_for_service(TeachClass, "/robot2/teach_class", START, p2), p2.output()[-3000:]
        msgs, _ = _vectors(0.0, 6, 1)
        assert cli.call(TeachClass, "/robot2/teach_class", TeachClass.Request(label="mug", features=msgs)).success
        pub = cli.node.create_publisher(ClassUpdate, "/class_updates", fleet_qos(10))
        h.wait_until(lambda: pub.get_subscription_count() > 0, 30.0)
        pub.publish(ClassUpdate(fleet="home", robot="mallory", op=ClassUpdate.FORGOTTEN, class_name="mug",
                                contribution_ids=["0123456789abcdef"]))
        pub.publish(ClassUpdate(fleet="home", robot="robot1", op=ClassUpdate.LEARNED, class_name="cup",
                                contribution_ids=["0123456789abcdef"], class_memory=b"\x00" * 64))
        p2.wait_for("not in fleet_allow", 30.0)
        p2.wait_for("refused: class statistics from robot 'robot1'", 30.0)
        assert _classes(cli, "robot2") == ["mug"]
    finally:
        cli.close()
        p2.stop()


def test_a_robot_that_joins_late_gets_the_current_classes(helpers, domain_id, tmp_path):
    from cbcl_pr_ros.srv import RenameClass, TeachClass

    h = helpers
    p1 = _start(h, domain_id, tmp_path, "robot1")
    cli = h.Client(domain_id)
    p3 = None
    try:
        assert cli.wait_for_service(TeachClass, "/robot1/teach_class", START, p1), p1.output()[-3000:]
        for label, centre, seed in (("mug", 0.0, 1), ("box", 6.0, 2)):
            msgs, _ = _vectors(centre, 6, seed)
            assert cli.call(TeachClass, "/robot1/teach_class", TeachClass.Request(label=label, features=msgs)).success
        assert cli.call(RenameClass, "/robot1/rename_class", RenameClass.Request(old_label="box",
                                                                                 new_label="crate")).success
        p3 = _start(h, domain_id, tmp_path, "robot3")  # started after robot1 was taught
        assert cli.wait_for_service(TeachClass, "/robot3/teach_class", START, p3), p3.output()[-3000:]
        assert h.wait_until(lambda: _classes(cli, "robot3") == ["crate", "mug"], 60.0), p3.output()[-3000:]
        assert _label(cli, "robot3", 6.0) == "crate"
    finally:
        cli.close()
        for proc in (p1, p3):
            if proc is not None:
                proc.stop()


def test_a_missed_update_comes_back_from_the_digest_while_another_name_floods(helpers, domain_id, tmp_path):
    """robot1 keeps a history of one update, so robot2, started after three teaches, receives only the
    last; robot1's digest makes robot2 ask for the other two, while 'mallory' floods the topic (its
    own rate bucket, not robot1's, runs dry)."""
    from cbcl_pr_ros.msg import ClassUpdate
    from cbcl_pr_ros.nodes.fleet import fleet_qos
    from cbcl_pr_ros.srv import TeachClass

    h = helpers
    p1 = _start(h, domain_id, tmp_path, "robot1", fleet_history_depth=1, fleet_digest_period=1.0)
    cli = h.Client(domain_id)
    p2 = None
    try:
        assert cli.wait_for_service(TeachClass, "/robot1/teach_class", START, p1), p1.output()[-3000:]
        for label, centre, seed in (("mug", 0.0, 1), ("box", 6.0, 2), ("cup", -6.0, 3)):
            msgs, _ = _vectors(centre, 6, seed)
            assert cli.call(TeachClass, "/robot1/teach_class", TeachClass.Request(label=label, features=msgs)).success
        pub = cli.node.create_publisher(ClassUpdate, "/class_updates", fleet_qos(10))
        p2 = _start(h, domain_id, tmp_path, "robot2", fleet_history_depth=5, fleet_max_update_rate=2.0,
                    fleet_digest_period=1.0)
        assert cli.wait_for_service(TeachClass, "/robot2/teach_class", START, p2), p2.output()[-3000:]
        junk = ClassUpdate(fleet="home", robot="mallory", op=ClassUpdate.LEARNED, class_name="junk",
                           contribution_ids=["0123456789abcdef"], class_memory=b"\x00" * 64)
        # the flood goes on, paced, for the whole wait: a burst published at once mostly overflows the
        # subscription's history on a busy machine and never reaches the rate check
        stop = threading.Event()

        def flood() -> None:
            while not stop.is_set():
                pub.publish(junk)
                time.sleep(0.005)

        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
        try:
            assert h.wait_until(lambda: _classes(cli, "robot2") == ["box", "cup", "mug"], 90.0), p2.output()[-3000:]
            p2.wait_for("from this robot", 30.0)  # mallory's bucket ran dry
        finally:
            stop.set()
            flooder.join(5.0)
        p2.wait_for("asked robot 'robot1' again", 30.0)
    finally:
        cli.close()
        for proc in (p1, p2):
            if proc is not None:
                proc.stop()


def test_the_fleet_subscription_sizes_a_message_before_it_is_built(tmp_path):
    """The learner's fleet subscription takes serialized bytes: a ClassUpdate larger than its statistics'
    cap plus a few KiB of names and ids (here 300,000 contribution ids, 5 MiB) is refused by its length
    with one throttled warning, before rclpy builds 300,000 Python strings; a peer's real update is
    still merged."""
    import rclpy
    from rclpy.parameter import Parameter
    from rclpy.serialization import serialize_message

    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig, state_to_bytes
    from cbcl_pr_ros.core.merge import one_class_state
    from cbcl_pr_ros.msg import ClassUpdate
    from cbcl_pr_ros.nodes.learner import LearnerNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=0)  # nothing is spun: the callback is called directly
    node = LearnerNode(feature_source=object(), context=ctx, parameter_overrides=[
        *(Parameter(k, value=v) for k, v in FLEET.items()), Parameter("robot_name", value="robot2"),
        Parameter("memory_dir", value=str(tmp_path)), Parameter("fleet_max_update_bytes", value=1 << 20)])
    said = []
    node.get_logger = lambda: type("L", (), {"warning": lambda self, t, **kw: said.append((t, kw)),
                                             "info": lambda self, t, **kw: said.append((t, kw))})()
    try:
        flood = ClassUpdate(fleet="home", robot="mallory", op=ClassUpdate.FORGOTTEN, class_name="mug",
                            contribution_ids=[f"{i:016x}" for i in range(300_000)])
        node._on_class_update(serialize_message(flood))
        assert len(said) == 1 and "fleet update ignored: a message of" in said[0][0]
        assert said[0][1].get("throttle_duration_sec", 0) >= 1.0
        peer = CBCLPRLearner(LearnerConfig(seed=0), "test", D)
        peer.set_robot_name("robot1")
        peer.teach("mug", np.random.default_rng(0).normal(0, 1, (6, D)))
        state = one_class_state(peer.to_state(), "mug")
        real = ClassUpdate(fleet="home", robot="robot1", op=ClassUpdate.LEARNED, class_name="mug",
                           contribution_ids=[x.id for x in state.provenance["mug"]])
        real.class_memory = state_to_bytes(state)
        node._on_class_update(serialize_message(real))
        assert node.session.controller.classes == ["mug"], said
    finally:
        node.destroy_node()
        rclpy.shutdown(context=ctx)
