"""The learner session without ROS: what the learner node serves, driven through a fake port.

The port stands in for the node (lifecycle phase, commit lock, clock, parameters, outputs), so the
state gate, TeachClass and Classify, the memory services, both streams and fleet mode are checked
here with no rclpy; the module itself imports none (checked in a fresh interpreter).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Iterator

import numpy as np
import pytest

from cbcl_pr_ros.perception import Proposal
from cbcl_pr_ros.service.classify_scope import SCOPE_FRAME, ClassifyRequest
from cbcl_pr_ros.service.fleet import LEARNED, ClassUpdate
from cbcl_pr_ros.service.learner_session import ACTIVE, INACTIVE, LearnerSession
from cbcl_pr_ros.objects import ObjectFrame
from cbcl_pr_ros.service.teaching import TeachRequest
from cbcl_pr_ros.settings.params import LEARNER, specs_for

D = 8
_ORDER = {"unconfigured": 0, INACTIVE: 1, ACTIVE: 2}


class FakePort:
    """The node as the session sees it: a phase, a commit lock, a clock, parameters and outputs."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.phase = "unconfigured"
        self.clock = 100.0
        self.lock = threading.Lock()
        self.extractor_backbone = "test"
        self.predictions: list[tuple[Any, str, int]] = []
        self.detections: list[Any] = []
        self.statuses: list[Any] = []
        self.updates: list[ClassUpdate] = []
        self.lines: list[tuple[str, bool]] = []
        self.shown = 0

    def extract(self, rgbs: list[np.ndarray]) -> Any:
        feats = np.stack([np.resize(r.reshape(-1, 3).mean(0) / 255.0, D) for r in rgbs]).astype(np.float32)
        return SimpleNamespace(features=feats, backbone=self.extractor_backbone)

    def now_s(self) -> float:
        return self.clock

    def setting(self, name: str) -> Any:
        return self.params[name]

    def active(self) -> bool:
        return self.phase == ACTIVE

    def refusal(self, what: str, need: str) -> str | None:
        return None if _ORDER[self.phase] >= _ORDER[need] else f"node is {self.phase}: {what} refused"

    @contextmanager
    def committing(self, what: str, need: str) -> Iterator[str | None]:
        with self.lock:
            yield self.refusal(what, need)

    def topic(self, stream: str) -> str:
        return f"/{stream}"

    def upstream(self, stream: str) -> str:
        return "nobody publishes"

    def log(self, line: str, warning: bool = False) -> None:
        self.lines.append((line, warning))

    def publish_prediction(self, frame: Any, prediction: Any, model_version: int) -> None:
        self.predictions.append((frame, prediction.label, model_version))

    def publish_detections(self, header: Any, tracks: list, model_version: int, pose: Any) -> Any:
        det = SimpleNamespace(header=header, labels=[t.label for t in tracks], version=model_version)
        self.detections.append(det)
        return det

    def show_prediction(self, header: Any, prediction: Any) -> bool:
        self.shown += 1
        return True

    def show_detections(self, detections: Any) -> bool:
        self.shown += 1
        return True

    def publish_status(self, status: Any) -> None:
        self.statuses.append(status)

    def publish_class_update(self, update: ClassUpdate) -> None:
        self.updates.append(update)


def _params(**over: Any) -> dict[str, Any]:
    p = {s.name: s.default for s in specs_for(LEARNER)}
    p.update(memory_path="", backbone="test", feature_dim=D, max_prediction_rate=1.0)
    p.update(over)
    return p


def _session(**over: Any) -> tuple[LearnerSession, FakePort]:
    port = FakePort(_params(**over))
    session = LearnerSession(port, port.params)
    session.configure("/robot1")
    port.phase = ACTIVE
    return session, port


def _vector(values: Any, sec: int = 1) -> SimpleNamespace:
    v = np.asarray(values, np.float32)
    return SimpleNamespace(backbone="test", dimension=D, values=v.tolist(),
                           header=SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=0), frame_id="cam"))


def _teach_vectors(session: LearnerSession, label: str, centre: float) -> Any:
    rng = np.random.default_rng(abs(int(centre * 10)) + 7)
    feats = tuple(_vector(centre + 0.1 * rng.standard_normal(D)) for _ in range(6))
    return session.teach(TeachRequest(label=label, features=feats))


def test_the_module_imports_no_ros():
    code = ("import sys, cbcl_pr_ros.service.learner_session; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rosidl_runtime_py') "
            "or m.startswith('cbcl_pr_ros.nodes')); print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_teach_and_classify_through_the_gate():
    session, port = _session()
    out = _teach_vectors(session, "mug", 1.0)
    assert out.success, out.message
    assert port.lines[-1] == (out.message, False)  # the committed teach is logged
    assert port.statuses and port.statuses[-1].class_names == ["mug"]  # status on every change
    assert _teach_vectors(session, "bowl", -1.0).success
    answer = session.classify(ClassifyRequest(SCOPE_FRAME, _vector(np.full(D, -1.0)), SimpleNamespace(data=b"", width=0)))
    assert answer.success and answer.prediction.label == "bowl" and answer.origin.header.frame_id == "cam"
    infos, version, refused = session.class_list()
    assert refused is None and sorted(i["name"] if isinstance(i, dict) else i.name for i in infos) == ["bowl", "mug"]
    assert version == session.controller.model_version


def test_a_name_typed_composed_or_decomposed_is_one_class():
    session, _ = _session()
    assert _teach_vectors(session, "caf\u00e9 mug", 1.0).success
    assert _teach_vectors(session, "cafe\u0301 mug", 1.0).success  # the same word from another keyboard
    assert session.controller.classes == ["caf\u00e9 mug"]
    assert session.rename("cafe\u0301 mug", "mug").success and session.controller.classes == ["mug"]


def test_a_class_stored_decomposed_is_reached_by_the_word_as_typed():
    session, _ = _session()
    decomposed = "cafe\u0301 mug"  # as a memory written before names were composed may hold it
    session.controller.learner_.teach(decomposed, np.ones((3, D)) + 0.01 * np.arange(3 * D).reshape(3, D))
    out = _teach_vectors(session, "caf\u00e9 mug", 1.0)
    assert out.success and "extended known class" in out.message
    assert session.controller.classes == [decomposed]
    assert session.rename("caf\u00e9 mug", "mug").success and session.controller.classes == ["mug"]
    assert _teach_vectors(session, "cafe\u0301 mug", -1.0).success
    assert session.forget("caf\u00e9 mug").success and session.controller.classes == ["mug"]


def test_a_change_needs_the_node_active_and_changes_nothing_otherwise():
    session, port = _session()
    assert _teach_vectors(session, "mug", 1.0).success
    port.phase = INACTIVE
    out = _teach_vectors(session, "bowl", -1.0)
    assert not out.success and "node is inactive" in out.message
    forgot = session.forget("mug")
    assert not forgot.success and "node is inactive" in forgot.message and forgot.num_classes == 1
    assert session.controller.classes == ["mug"]
    ok, message, _, _ = session.save("")  # saving changes no class: answered while inactive
    assert "node is inactive" not in message
    answer = session.classify(ClassifyRequest(SCOPE_FRAME, _vector(np.ones(D)), SimpleNamespace(data=b"", width=0)))
    assert answer.success  # a read-only request answers while inactive
    port.phase = "unconfigured"
    assert "node is unconfigured" in session.class_list()[2]


def test_forget_and_rename_are_logged_and_a_mistake_is_a_warning():
    session, port = _session()
    assert _teach_vectors(session, "mug", 1.0).success
    renamed = session.rename("mug", "cup")
    assert renamed.success and port.lines[-1] == (renamed.message, False)
    missing = session.forget("mug")
    assert not missing.success and port.lines[-1] == (missing.message, True)
    assert session.forget("cup").success and session.controller.classes == []


def test_a_teach_that_waited_across_a_reconfigure_is_refused():
    session, port = _session()
    old = session.controller
    session.cleanup(False)
    session.configure("/robot1")
    out = session.commit(old, "mug", np.ones((2, D), np.float32), "feature vectors", None)
    assert not out.success and "configured again" in out.message
    assert session.controller.classes == []


def test_the_extractors_backbone_must_be_the_learners():
    session, port = _session()
    port.extractor_backbone = "other"
    image = SimpleNamespace(encoding="rgb8", height=4, width=4, step=12, data=bytes(48), is_bigendian=0)
    out = session.teach(TeachRequest(label="mug", mode=2, images=(image,)))
    assert not out.success and "backbone 'other'" in out.message and session.controller.classes == []
    port.extractor_backbone = "other\n" * 100_000  # whoever serves extract_features names it: quoted, cut
    out = session.teach(TeachRequest(label="mug", mode=2, images=(image,)))
    assert not out.success and len(out.message) < 400 and "\n" not in out.message, out.message[:300]


def test_features_feed_waiting_teaches_and_predictions_follow_the_rate_on_the_ports_clock():
    session, port = _session()
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(session.collect(2, 30.0, "features")))
    waiter.start()
    while not session.waiters._pools["features"]:  # noqa: SLF001 (the teach is waiting)
        threading.Event().wait(0.01)
    session.on_features(_vector(np.ones(D), sec=1))  # nothing learned yet: offered, no prediction
    session.on_features(_vector(np.ones(D), sec=2))
    waiter.join(10)
    assert len(got[0]) == 2 and port.predictions == []
    assert _teach_vectors(session, "mug", 1.0).success and _teach_vectors(session, "bowl", -1.0).success
    port.clock += 10.0  # the two frames above used the burst
    for k in range(5):  # the clock stands still: the burst passes, then nothing
        session.on_features(_vector(np.ones(D), sec=10 + k))
    burst = len(port.predictions)
    port.clock += 3.0
    session.on_features(_vector(np.ones(D), sec=20))
    assert 1 <= burst < 5 and len(port.predictions) == burst + 1 == session.predictions_published
    assert port.predictions[-1][1] == "mug" and port.shown == len(port.predictions)  # no objects: drawn
    with pytest.raises(ValueError):
        session.on_features(SimpleNamespace(**{**vars(_vector(np.ones(D), sec=30)), "backbone": "other"}))
    port.phase = INACTIVE  # a message queued when the stream was paused is dropped
    session.on_features(_vector(np.ones(D), sec=40))
    assert len(port.predictions) == burst + 1
    session.pause()
    assert session.latest_features() is None


@pytest.mark.parametrize("bad", [
    {"backbone": "other"},
    {"values": [1.0] * (D + 1), "dimension": D + 1},
    {"values": [float("nan")] * D},
    {"values": [1e30] * D},  # over max_feature_abs, as request vectors and object features are refused
])
def test_a_stream_vector_that_does_not_fit_changes_nothing(bad):
    """The node logs "feature vector ignored" for a stream vector that does not fit, but the session had
    already kept it as the latest frame (what Classify answers about) and handed it to a waiting teach,
    whose whole teach then failed on it; with no class learned or under the prediction rate it was not
    even checked. Now it is refused before anything keeps it."""
    session, port = _session(max_prediction_rate=0.0)
    good = _vector(np.ones(D), sec=1)
    session.on_features(good)
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(session.collect(2, 30.0, "features")))
    waiter.start()
    while not session.waiters._pools["features"]:  # noqa: SLF001 (the teach is waiting)
        threading.Event().wait(0.01)
    with pytest.raises(ValueError):
        session.on_features(SimpleNamespace(**{**vars(_vector(np.ones(D), sec=2)), **bad}))
    assert session.latest_features() is good
    session.on_features(_vector(np.ones(D), sec=3))
    session.on_features(_vector(np.ones(D), sec=4))
    waiter.join(10)
    assert [f.header.stamp.sec for f in got[0]] == [3, 4]


def _objects(rows: np.ndarray) -> ObjectFrame:
    props = [Proposal((10 + 50 * i, 10, 40 + 50 * i, 40), None, np.array([0.2 * i, 0.0, 0.8]),
                      np.array([0.05] * 3), 0.9) for i in range(len(rows))]
    return ObjectFrame(props, rows.astype(np.float32).reshape(len(rows), D), (480, 640))


def test_object_frames_are_tracked_published_and_answer_classify(monkeypatch):
    session, port = _session()
    assert _teach_vectors(session, "mug", 1.0).success and _teach_vectors(session, "bowl", -1.0).success
    frame = _objects(np.stack([np.ones(D), -np.ones(D)]))
    header = SimpleNamespace(stamp=SimpleNamespace(sec=5, nanosec=0), frame_id="cam")
    seen: list = []

    def to_frame(msg: Any, backbone: str, dim: Any, max_abs: float) -> ObjectFrame:
        seen.append((backbone, dim))
        return frame

    session.on_objects(SimpleNamespace(header=header), to_frame, lambda stamp: None)
    assert seen == [("test", D)] and session.detections_published == 1
    (det,) = port.detections
    assert det.header is header and len(det.labels) == 2
    answer = session.classify(ClassifyRequest(0, _vector(np.zeros(0)), SimpleNamespace(data=b"", width=0)))
    assert answer.detections == (det, (480, 640))  # "what is this?" on the stream: the latest detections
    assert session.stop_report() == "learner stopped: 0 predictions and 1 detection messages published"
    monkeypatch.setenv("CBCL_STOP_STATS", "1")  # the benches' JSON line, only when asked for
    summary, stats = session.stop_report().split("\n")
    assert stats.startswith("learner stopping: {") and json.loads(stats.split(": ", 1)[1])["detections"] == 1
    session.cleanup(False)
    assert session.controller is None and session.last_detections is None


def test_fleet_mode_publishes_a_taught_class_and_hears_peers():
    session, port = _session(fleet="home", robot_name="r1")
    assert session.fleet is not None
    session.activate()
    assert _teach_vectors(session, "mug", 1.0).success
    learned = [u for u in port.updates if u.op == LEARNED]
    assert [u.class_name for u in learned] == ["mug"] and learned[0].robot == "r1"
    res = session.receive(ClassUpdate("other_fleet", "r2", 1, LEARNED, "cup", "", ("x",), b""))
    assert res is not None and not res.applied and session.controller.classes == ["mug"]
    plain, _ = _session()
    assert plain.fleet is None and plain.receive(learned[0]) is None


def test_deactivate_writes_the_peers_classes_kept_in_ram(tmp_path):
    """A peer's class waits for the next save (fleet_save_period); deactivate writes it, so a node
    stopped cleanly never leaves it to the digest."""
    files = {"memory_dir": str(tmp_path), "memory_path": "memory.safetensors", "fleet": "home"}
    teacher, teacher_port = _session(**{**files, "memory_dir": str(tmp_path / "r1")}, robot_name="r1")
    learner, port = _session(**{**files, "memory_dir": str(tmp_path / "r2")}, robot_name="r2")
    assert _teach_vectors(teacher, "mug", 1.0).success
    learned = [u for u in teacher_port.updates if u.op == LEARNED]
    assert learner.receive(learned[0]).applied and learner.controller.classes == ["mug"]
    again, _ = _session(**{**files, "memory_dir": str(tmp_path / "r2")}, robot_name="r2")
    assert again.controller.classes == []  # served, not yet written
    port.phase = INACTIVE
    learner.pause()
    assert any("1 change from fleet peers saved" in line for line, _ in port.lines), port.lines
    again, _ = _session(**{**files, "memory_dir": str(tmp_path / "r2")}, robot_name="r2")
    assert again.controller.classes == ["mug"]
