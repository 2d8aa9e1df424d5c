"""The extractor and the learner as lifecycle nodes, driven as an external lifecycle manager drives them:
through their ``change_state`` / ``get_state`` services, on a real ROS graph (own domain).

The learner runs as its installed executable (``autostart: false``) with a small test backbone, so no
model is loaded; the extractor runs in this process with an injected backbone. Nothing here waits
for a time to pass as a check: "nothing published while inactive" is read from the graph (the
subscription is gone) and from stamps (vectors sent while paused never come back as predictions).
"""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
import fuzz_support  # noqa: E402  (test/support, shared with bench/bench_hardening.py)

pytestmark = [pytest.mark.ros]

D = 8
START = 120.0
# QoS overriding parameters given at start (rclpy declares them read-only when the topic is made)
LEARNER = {"autostart": False, "backbone": "test", "feature_dim": D,
           "qos_overrides": {"/prediction": {"publisher": {"reliability": "best_effort"}},
                             "/features": {"subscription": {"reliability": "reliable"}}}}


# ------------------------------------------------------------------ helpers
def _transition(cli: Any, node: str, label: str) -> bool:
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    req = ChangeState.Request(transition=Transition(label=label))
    return cli.call(ChangeState, f"/{node}/change_state", req, timeout=START).success


def _publishers(cli: Any, topic: str, wait_s: float = 30.0) -> list:
    """The publishers the graph lists on ``topic``, once it lists any (discovery is asynchronous)."""
    deadline = time.monotonic() + wait_s
    while True:
        infos = cli.node.get_publishers_info_by_topic(topic)
        if infos or time.monotonic() > deadline:
            return infos
        time.sleep(0.05)


def _state(cli: Any, node: str) -> str:
    from lifecycle_msgs.srv import GetState

    return cli.call(GetState, f"/{node}/get_state", GetState.Request()).current_state.label


def _vectors(centre: float, n: int, seed: int, stamp_ns: int = 0) -> list:
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.conversions import make_feature_msg, ns_to_stamp

    rng = np.random.default_rng(seed)
    return [make_feature_msg(Header(stamp=ns_to_stamp(stamp_ns + i)), "test", "", rng.normal(centre, 1.0, D))
            for i in range(n)]


def _classes(cli: Any) -> list[str]:
    from cbcl_pr_ros.srv import ListClasses

    return sorted(c.name for c in cli.call(ListClasses, "list_classes", ListClasses.Request()).classes)


def _teach(cli: Any, label: str, centre: float) -> Any:
    from cbcl_pr_ros.srv import TeachClass

    return cli.call(TeachClass, "teach_class", TeachClass.Request(label=label, features=_vectors(centre, 6, 1)))


def _start_learner(h: Any, domain_id: int, tmp_path: Any, params: dict, tag: str = "") -> Any:
    proc = h.start_node("learner_node", domain_id, tmp_path,
                        params={**LEARNER, "memory_dir": str(tmp_path), **params}, tag=tag)
    return proc


# ------------------------------------------------------------------ learner
def test_learner_driven_by_a_lifecycle_manager_keeps_every_class(helpers, domain_id, tmp_path):
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from cbcl_pr_ros.msg import FeatureVector, Prediction
    from cbcl_pr_ros.nodes.conversions import stamp_to_ns
    from cbcl_pr_ros.srv import Classify, ForgetClass, SaveMemory, TeachClass

    h = helpers
    proc = _start_learner(h, domain_id, tmp_path, {})
    cli = h.Client(domain_id)
    try:
        from lifecycle_msgs.srv import GetState

        assert cli.wait_for_service(GetState, "/learner/get_state", START, proc), proc.output()[-3000:]
        assert _state(cli, "learner") == "unconfigured"
        refused = _teach(cli, "mug", 0.0)
        assert not refused.success and "unconfigured" in refused.message and "configure" in refused.message

        # configure: memory (none yet) loaded, publishers made; QoS override given at start is applied
        assert _transition(cli, "learner", "configure")
        assert _state(cli, "learner") == "inactive"
        infos = _publishers(cli, "/prediction")  # the graph learns of new publishers a moment later
        assert [i.qos_profile.reliability for i in infos] == [ReliabilityPolicy.BEST_EFFORT]
        assert _publishers(cli, "/status")[0].qos_profile.reliability == \
            ReliabilityPolicy.RELIABLE  # no override: our default
        refused = _teach(cli, "mug", 0.0)
        assert not refused.success and "node is inactive" in refused.message, refused.message

        # activate: teach two classes, the stream gives predictions
        assert _transition(cli, "learner", "activate")
        assert _state(cli, "learner") == "active"
        for label, centre in (("mug", 0.0), ("box", 8.0)):
            r = _teach(cli, label, centre)
            assert r.success, r.message
        subs = cli.node.get_subscriptions_info_by_topic("/features")
        # subscription override (our default for it: best_effort); history depth is not on the graph
        assert [i.qos_profile.reliability for i in subs] == [ReliabilityPolicy.RELIABLE]
        # the overridden best-effort publisher only matches a best-effort subscriber
        preds = cli.collect(Prediction, "prediction", QoSProfile(depth=50, reliability=ReliabilityPolicy.BEST_EFFORT))
        pub = cli.node.create_publisher(FeatureVector, "features", 50)
        assert h.wait_until(lambda: pub.get_subscription_count() >= 1, 30.0)
        for m in _vectors(8.0, 3, 2, stamp_ns=1_000):
            pub.publish(m)
        assert h.wait_until(lambda: len(preds) >= 3, 30.0), "no predictions while active"
        assert {p.label for p in preds} == {"box"}

        # deactivate: the stream is let go, mutations refused, read-only services answer
        assert _transition(cli, "learner", "deactivate")
        assert _state(cli, "learner") == "inactive"
        assert h.wait_until(lambda: pub.get_subscription_count() == 0, 30.0), "still subscribed while inactive"
        for m in _vectors(0.0, 3, 3, stamp_ns=2_000):  # nobody reads these
            pub.publish(m)
        refused = _teach(cli, "pot", -8.0)
        assert not refused.success and "node is inactive" in refused.message
        assert refused.num_classes == 2  # the refusal reports the state, and nothing changed
        forgot = cli.call(ForgetClass, "forget_class", ForgetClass.Request(label="mug"))
        assert not forgot.success and "node is inactive" in forgot.message
        answer = cli.call(Classify, "classify", Classify.Request(feature=_vectors(0.0, 1, 4)[0]))
        assert answer.success and answer.label == "mug", answer.message
        assert "inactive" in cli.call(Classify, "classify", Classify.Request()).message  # no stream to read
        assert _classes(cli) == ["box", "mug"]
        saved = cli.call(SaveMemory, "save_memory", SaveMemory.Request(path="paused.safetensors"))
        assert saved.success, saved.message

        # activate again: every class is there, predictions resume; the paused vectors never came back
        assert _transition(cli, "learner", "activate")
        assert _classes(cli) == ["box", "mug"]
        assert h.wait_until(lambda: pub.get_subscription_count() >= 1, 30.0)
        for m in _vectors(0.0, 1, 5, stamp_ns=3_000):
            pub.publish(m)
        assert h.wait_until(lambda: any(stamp_to_ns(p.header.stamp) == 3_000 for p in preds), 30.0)
        assert not [p for p in preds if 2_000 <= stamp_to_ns(p.header.stamp) < 3_000]

        # cleanup frees the memory (it is on disk: autosaved), configure loads it again
        assert _transition(cli, "learner", "deactivate")
        assert _transition(cli, "learner", "cleanup")
        assert _state(cli, "learner") == "unconfigured"
        assert _classes(cli) == []  # nothing loaded: an empty answer (and the reason in the log)
        assert _transition(cli, "learner", "configure")
        assert _classes(cli) == ["box", "mug"]
        assert _transition(cli, "learner", "shutdown")
        assert _state(cli, "learner") == "finalized"
        refused = cli.call(TeachClass, "teach_class", TeachClass.Request(label="x", features=_vectors(0.0, 2, 6)))
        assert not refused.success and "finalized" in refused.message
    finally:
        cli.close()
        code = proc.stop()
    out = proc.output()
    assert code == 0, out[-3000:]
    assert "context is invalid" not in out and "Traceback" not in out, out[-3000:]


def test_learner_moves_a_corrupt_memory_file_aside_and_starts_empty(helpers, domain_id, tmp_path):
    """docs/security.md: a default file that cannot be served is renamed aside (kept byte for byte), the
    learner starts empty and says so loudly; list_classes says why it is empty while not serving."""
    from lifecycle_msgs.srv import GetState

    from cbcl_pr_ros.srv import ListClasses

    h = helpers
    memory = tmp_path / "memory.safetensors"
    memory.write_bytes(b"not a memory file" * 10)
    proc = _start_learner(h, domain_id, tmp_path, {})  # autostart false: unconfigured
    cli = h.Client(domain_id)
    try:
        assert cli.wait_for_service(GetState, "/learner/get_state", START, proc), proc.output()[-3000:]
        r = cli.call(ListClasses, "list_classes", ListClasses.Request())
        assert list(r.classes) == [] and "unconfigured" in r.message and "configure" in r.message, r.message
        assert _transition(cli, "learner", "configure") and _transition(cli, "learner", "activate")
        proc.wait_for("MEMORY FILE REFUSED", 30.0)
        proc.wait_for("cbcl-memory repair", 30.0)  # the warning says how to inspect and repair it, and where
        aside = list(tmp_path.glob("memory.safetensors.unreadable-*"))
        assert str(aside[0]) in proc.output()
        assert len(aside) == 1 and aside[0].read_bytes() == b"not a memory file" * 10
        assert not memory.exists() and _classes(cli) == []
        r = cli.call(ListClasses, "list_classes", ListClasses.Request())
        assert r.message == "", r.message
        assert _teach(cli, "mug", 0.0).success and memory.is_file()
    finally:
        cli.close()
        code = proc.stop()
    assert code == 0, proc.output()[-3000:]


def test_learner_refuses_a_teach_it_cannot_save_and_cleanup_keeps_every_class(helpers, domain_id, tmp_path):
    """A teach whose autosave fails is undone and refused (never success in RAM only); cleanup and
    configure then bring back exactly what was answered success."""
    from lifecycle_msgs.srv import GetState

    h = helpers
    proc = _start_learner(h, domain_id, tmp_path, {"autostart": True})
    cli = h.Client(domain_id)
    memory = tmp_path / "memory.safetensors"
    try:
        logs = lambda: proc.output()[-3000:]  # noqa: E731  (what the learner said, on a failure)
        assert cli.wait_for_service(GetState, "/learner/get_state", START, proc), logs()
        assert _state(cli, "learner") == "active", logs()
        taught = _teach(cli, "mug", 0.0)
        assert taught.success and memory.is_file(), (taught.message, logs())
        memory.unlink()
        memory.mkdir()  # the autosave target is no file any more: every save fails, nothing is touched
        taught = _teach(cli, "box", 8.0)
        assert not taught.success and "could not be saved" in taught.message, (taught.message, logs())
        assert _classes(cli) == ["mug"], logs()
        memory.rmdir()  # the operator fixes the directory: the same teach succeeds
        taught = _teach(cli, "box", 8.0)
        assert taught.success, (taught.message, logs())
        for step in ("deactivate", "cleanup", "configure"):
            assert _transition(cli, "learner", step), (step, logs())
        assert _classes(cli) == ["box", "mug"], logs()
    finally:
        cli.close()
        code = proc.stop()
    assert code == 0, proc.output()[-3000:]


RACE_TRANSITIONS = 60  # CI; bench/bench_hardening.py --parts race runs 240


def test_lifecycle_transitions_under_a_teach_loop_lose_no_class_and_answer_no_false_success(
        helpers, domain_id, tmp_path):
    """Issue 22: deactivate/cleanup/configure/activate at random while teaches (feature requests and
    stream teaches) run without pause: every teach answered success is held afterwards and after a
    restart; every refusal says why; the node lives."""
    from pathlib import Path

    from lifecycle_msgs.srv import GetState

    fz = fuzz_support
    h = helpers
    proc = _start_learner(h, domain_id, tmp_path, {"autostart": True})
    cli = h.Client(domain_id)
    try:
        assert cli.wait_for_service(GetState, "/learner/get_state", START, proc), proc.output()[-3000:]
        out = fz.lifecycle_race(cli, proc, RACE_TRANSITIONS, lambda s, n: _vectors(float(s % 9), n, s), seed=1)
        confirmed = out.pop("confirmed")
        assert out["alive"] and out["transitions_done"] >= RACE_TRANSITIONS // 2, out
        assert out["teach_successes"] > 0 and out["refusals"] > 0, out  # both outcomes were exercised
        assert out["false_successes"] == 0 and out["refused_but_held"] == 0, out
        assert out["refusals_without_reason"] == 0 and out["unanswered_teaches"] == 0, out
        assert proc.stop() == 0, proc.output()[-3000:]
        proc = _start_learner(h, domain_id, tmp_path, {"autostart": True}, tag="_restarted")
        assert cli.wait_for_service(GetState, "/learner/get_state", START, proc), proc.output()[-3000:]
        assert h.wait_until(lambda: "learner ready" in proc.output(), START)
        assert confirmed <= set(_classes(cli)), sorted(confirmed - set(_classes(cli)))[:5]
        assert not list(tmp_path.glob("*.tmp"))
    finally:
        cli.close()
        code = proc.stop()
    assert code == 0 and "Traceback" not in proc.output(), proc.output()[-3000:]


# ------------------------------------------------------------------ extractor
class _Backbone:
    """What the extractor needs of a backbone: a name, a width and ``extract``."""
    name, feature_dim, runtime, preprocessing_id = "tiny", D, "numpy", "mean-rgb"

    def __init__(self) -> None:
        self.calls = 0

    def extract(self, rgbs: list) -> np.ndarray:
        self.calls += 1
        return np.stack([np.resize(np.asarray(r, np.float32).mean(axis=(0, 1)), D) for r in rgbs])


def _spin(node: Any) -> tuple[Any, threading.Event, threading.Thread]:
    from rclpy.executors import MultiThreadedExecutor

    from cbcl_pr_ros.nodes.spin import spin_until

    executor = MultiThreadedExecutor(num_threads=3, context=node.context)
    executor.add_node(node)
    stop = threading.Event()
    t = threading.Thread(target=spin_until, args=(executor, stop), daemon=True)
    t.start()
    return executor, stop, t


def test_extractor_transitions_and_a_failing_configure(helpers, domain_id):
    import rclpy
    from rclpy.parameter import Parameter

    from cbcl_pr_ros.msg import FeatureVector
    from cbcl_pr_ros.nodes.feature_extractor import FeatureExtractorNode
    from cbcl_pr_ros.nodes.spin import stop_executor
    from cbcl_pr_ros.srv import ExtractFeatures

    h = helpers
    frame = h.image_msg(np.full((48, 64, 3), 100, np.uint8), 5)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain_id)
    backbone = _Backbone()
    node = FeatureExtractorNode(backbone, context=ctx, parameter_overrides=[
        Parameter("autostart", value=False), Parameter("no_frame_warning_s", value=0.0)])
    # an unknown backbone: configure (autostart) fails, clearly, and the node is alive and unconfigured
    broken = FeatureExtractorNode(node_name="broken_extractor", context=ctx, parameter_overrides=[
        Parameter("backbone", value="no_such_backbone")])
    assert broken.phase == "unconfigured" and "no_such_backbone" in broken.last_failure
    broken.destroy_node()
    executor, stop, spin = _spin(node)
    cli = h.Client(domain_id)
    try:
        got = cli.collect(FeatureVector, "features", 10)
        req = ExtractFeatures.Request(images=[frame])
        r = cli.call(ExtractFeatures, "extract_features", req)
        assert not r.success and "unconfigured" in r.message
        assert _transition(cli, "feature_extractor", "configure")
        r = cli.call(ExtractFeatures, "extract_features", req)
        assert r.success and len(r.features) == 1  # read-only: answers while inactive
        assert cli.node.get_subscriptions_info_by_topic("/image") == []  # inactive: no camera subscription
        assert _transition(cli, "feature_extractor", "activate")
        pub = cli.node.create_publisher(type(frame), "image", 10)
        assert h.wait_until(lambda: pub.get_subscription_count() >= 1, 30.0)
        assert h.wait_until(lambda: (pub.publish(frame), len(got) > 0)[1], 30.0, step=0.2)
        assert got[0].backbone == "tiny" and len(got[0].values) == D
        assert _transition(cli, "feature_extractor", "deactivate")
        assert h.wait_until(lambda: pub.get_subscription_count() == 0, 30.0)
        assert _transition(cli, "feature_extractor", "cleanup")
        assert node.backbone is None and node.phase == "unconfigured"
        r = cli.call(ExtractFeatures, "extract_features", req)
        assert not r.success and "unconfigured" in r.message
        assert _transition(cli, "feature_extractor", "configure")  # the injected backbone again
        assert node.backbone is backbone
    finally:
        cli.close()
        stop.set()
        spin.join(10.0)
        stop_executor(executor)
        node.destroy_node()  # shutdown transition from inactive: the worker thread ends
        assert node.phase == "finalized" and node._worker is None  # noqa: SLF001
        rclpy.shutdown(context=ctx)


# ------------------------------------------------------------------ start
def _held_start(monkeypatch: Any, owner: Any, attr: str) -> tuple[threading.Event, threading.Event]:
    """``owner.attr`` (what a configure loads) waits until released; (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    real = getattr(owner, attr)

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(120.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, attr, held)
    return entered, release


@pytest.mark.parametrize("kind", ["learner", "extractor"])
def test_an_autostarting_node_offers_its_services_only_once_it_can_answer_them(monkeypatch, helpers, domain_id, kind):
    """An autostart configure runs in the node's constructor, before anything spins (the learner loads
    its memory file there: seconds at a thousand classes). A service listed meanwhile made a client's
    first call wait that long (a 10 s call timed out): none is listed until the configure has ended."""
    import rclpy
    from rclpy.parameter import Parameter

    from cbcl_pr_ros.nodes.feature_extractor import FeatureExtractorNode
    from cbcl_pr_ros.nodes.learner import LearnerNode
    from cbcl_pr_ros.service.learner_session import LearnerSession

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain_id)
    if kind == "learner":
        entered, release = _held_start(monkeypatch, LearnerSession, "configure")
        names = ("/teach_class", "/list_classes", "/classify", "/forget_class", "/load_memory")
        make = lambda: LearnerNode(feature_source=object(), context=ctx, parameter_overrides=[  # noqa: E731
            Parameter("memory_path", value=""), Parameter("backbone", value="test"), Parameter("feature_dim", value=D)])
    else:
        entered, release = _held_start(monkeypatch, FeatureExtractorNode, "_configure")
        names = ("/extract_features",)
        make = lambda: FeatureExtractorNode(_Backbone(), context=ctx, parameter_overrides=[  # noqa: E731
            Parameter("no_frame_warning_s", value=0.0)])
    node_name = {"learner": "/learner", "extractor": "/feature_extractor"}[kind]
    made: list = []
    builder = threading.Thread(target=lambda: made.append(make()), daemon=True)
    lister = rclpy.create_node("service_lister", context=ctx)
    listed = lambda: {n for n, _types in lister.get_service_names_and_types()}  # noqa: E731
    try:
        builder.start()
        assert entered.wait(60.0), "the autostart never reached its configure"
        # the node is on the graph (its lifecycle services), its configure still held
        assert helpers.wait_until(lambda: f"{node_name}/get_state" in listed(), 30.0), sorted(listed())
        early = set(names) & listed()
        assert not early, f"offered while the configure still ran: {sorted(early)}"
        release.set()
        builder.join(60.0)
        assert made and made[0].phase == "active"
        assert helpers.wait_until(lambda: set(names) <= listed(), 30.0), sorted(listed())
    finally:
        release.set()
        builder.join(60.0)
        for node in made:
            node.destroy_node()
        lister.destroy_node()
        rclpy.shutdown(context=ctx)
