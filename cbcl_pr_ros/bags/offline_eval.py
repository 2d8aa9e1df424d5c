"""Evaluate a recorded teaching session offline: the bag drives the learner directly, no ROS graph.

The learner is driven by the learner node's own code, so the offline answers equal the live ones
for the same bag:

* the learner is built from the same parameters (``config/cbcl_pr.yaml`` by default) by the nodes'
  ``learner_factory`` and wrapped in the same ``LearnerController`` the node uses (RAM only);
* a TEACH event goes, as the TeachClass the replay sends (its frames as images, with the recorded
  mode, boxes and track), through the node's :class:`~cbcl_pr_ros.service.teaching.Teacher`: the
  same checks, crops of the object in view or of the boxes, teach-time views (seeded by the
  event's ``view_seed``, else the learner's ``seed``) and batching; only the port differs (the
  backbone is called here instead of through the extractor's service);
* a CLASSIFY event classifies its frame through the node's ``classify_scope.classify_vectors``, as
  a sent image of the recorded scope (the object in view, or the whole image), one image per call;
* events are applied in their recorded order (TEACH → teach, CLASSIFY → classify top-5,
  FORGET → forget, RENAME → rename).

Accuracy is reported per increment: an increment is a run of teach/forget/rename events and the
classify events that follow it, scored on the classify events that carry a ground-truth label.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from cbcl_pr_ros.features import make_backbone
from cbcl_pr_ros.objects.stream import ObjectStream
from cbcl_pr_ros.service.classify_scope import ClassifyRequest, classify_vectors, plan_classify
from cbcl_pr_ros.service.controller import ClassifyOutcome, LearnerController
from cbcl_pr_ros.service.teaching import Teacher, TeachRequest, TeachSettings
from cbcl_pr_ros.request_checks import RequestLimits
from cbcl_pr_ros.settings.param_names import unknown_parameter_note
from cbcl_pr_ros.settings.params import (
    EXTRACTOR,
    LEARNER,
    aliases_for,
    default_config_path,
    flatten,
    learner_factory,
    resolve_aliases,
    specs_for,
    validate_parameter,
)

from .errors import BagFormatError
from .reader import TeachingSession, read_session
from .records import EventKind, TeachingEventRecord
from .types import DEFAULT_EVENTS_TOPIC

__all__ = [
    "IncrementResult",
    "OfflineReport",
    "PredictionRecord",
    "bag_to_class_features",
    "bag_to_class_images",
    "evaluate_bag",
    "evaluate_session",
    "learner_params",
]
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class PredictionRecord:
    """One CLASSIFY event replayed offline."""

    increment: int
    stamp_ns: int
    frame_stamp_ns: int
    true_label: str
    predicted_label: str
    confidence: float
    known: bool
    success: bool
    recorded_label: str
    recorded_success: bool
    recorded_confidence: float = 0.0


@dataclass(frozen=True)
class IncrementResult:
    index: int
    taught: list[str]
    changes: list[str]  # forgets and renames of this increment, e.g. "rename mug -> cup"
    classes_known: list[str]
    n_test: int
    n_correct: int
    accuracy: float | None  # None when no classify event with ground truth followed


@dataclass
class OfflineReport:
    """Everything an offline evaluation measured. ``complete`` is False only if the run stopped."""

    bag: str
    backbone: str
    params: dict[str, Any]
    increments: list[IncrementResult]
    predictions: list[PredictionRecord] = field(repr=False)
    n_events: int = 0
    n_frames_extracted: int = 0  # images through the backbone: frames, crops and teach-time views
    feature_seconds: float = 0.0
    learner_seconds: float = 0.0
    teach_failures: list[str] = field(default_factory=list)
    complete: bool = True

    @property
    def accuracy(self) -> float | None:
        """Accuracy over every scored classify event of the session."""
        n = sum(r.n_test for r in self.increments)
        return sum(r.n_correct for r in self.increments) / n if n else None

    @property
    def agreement_with_recording(self) -> float | None:
        """Share of classify events whose recorded live answer equals the offline answer
        (None when the bag holds no live answers, e.g. a simulated bag)."""
        rec = [p for p in self.predictions if p.recorded_success]
        if not rec:
            return None
        return sum(p.recorded_label == p.predicted_label for p in rec) / len(rec)

    def to_dict(self, timings: bool = True) -> dict[str, Any]:
        """JSON-able form; ``timings=False`` leaves out the only fields that differ between runs."""
        d = asdict(self)
        d["accuracy"] = self.accuracy
        d["agreement_with_recording"] = self.agreement_with_recording
        if not timings:
            d.pop("feature_seconds")
            d.pop("learner_seconds")
        return d


def _load_yaml_params(path: Path, node: str) -> dict[str, Any]:
    """Parameters a node named ``node`` gets from a ROS parameters YAML (``/**`` and
    ``/**/<node>``/``<node>`` sections, later ones winning, as rcl resolves them)."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read parameters file {path}: {exc}") from None
    out: dict[str, Any] = {}
    for key in ("/**", "**", f"/**/{node}", f"/{node}", node):
        section = doc.get(key)
        if isinstance(section, dict):
            out.update(section.get("ros__parameters") or {})
    return out


def learner_params(config: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The learner node's parameter values: the table's defaults, then ``config`` (default: the
    package's ``config/cbcl_pr.yaml``), then ``overrides``. The extractor's ``runtime`` and
    ``device`` are included, since the features depend on them."""
    p = {s.name: s.default for s in specs_for(LEARNER)}
    p.update({s.name: s.default for s in specs_for(EXTRACTOR) if s.name not in p})
    given = [dict(overrides or {})]
    for name in flatten(given[0]):  # a misspelt --set would evaluate the default without a word
        if name not in p and name not in aliases_for(LEARNER):
            raise ValueError(unknown_parameter_note(name, LEARNER, p, "is not a parameter of the {node}"))
    path = Path(config) if config else Path(default_config_path())
    if config or path.is_file():
        p.update(flatten(_load_yaml_params(path, EXTRACTOR)))
        given.insert(0, _load_yaml_params(path, LEARNER))
    for values in given:  # the learner's names as the node reads them (earlier names with a warning)
        renamed, warnings = resolve_aliases(values, LEARNER)
        p.update(renamed)
        for note in warnings:
            _LOG.warning(note)
    p["memory_path"] = ""  # offline runs never touch the robot's memory file
    for name, value in p.items():
        reason = validate_parameter(name, value)
        if reason:
            raise ValueError(f"learner parameter {reason}")
    return p


class _BagPort:
    """The learner node's TeachingPort and ClassifyPort with a bag behind it: the backbone computes
    what the extractor would, the time stands still, and a commit teaches the controller at once."""

    def __init__(self, session: TeachingSession, backbone: Any, params: Mapping[str, Any]) -> None:
        self.session = session
        self.backbone = backbone
        self.settings = TeachSettings.from_params(params)
        self.limits = RequestLimits.from_params(params)
        self.event: TeachingEventRecord | None = None  # the TEACH being replayed
        self.n_images = 0
        self.seconds = 0.0  # in the backbone
        self.learn_seconds = 0.0  # in the learner

    def teach_settings(self) -> Any:
        seed = self.event.view_seed if self.event is not None and self.event.view_seed >= 0 else self.settings.seed
        return replace(self.settings, seed=seed)

    def extract(self, rgbs: list[np.ndarray]) -> np.ndarray:
        t0 = time.perf_counter()
        out = np.asarray(self.backbone.extract(list(rgbs)), np.float32)
        self.seconds += time.perf_counter() - t0
        self.n_images += len(rgbs)
        return out

    def latest_features(self) -> Any:
        return None  # a CLASSIFY event always names its frame

    def no_frame_reason(self) -> str:
        return "no frame"

    def collect(self, n: int, timeout_s: float, stream: str) -> list[Any]:
        """The TEACH's recorded frames as the stream's: whole-frame vectors, one frame at a time."""
        if stream != "features":
            raise ValueError("teaching from the camera stream's objects (a track, or the object in view of "
                             "stream frames) is not evaluated offline: the bag holds the frames, not the "
                             "extractor's objects")
        frames = self.session.frames_of(self.event)[:n] if self.event is not None else []
        name, dim = getattr(self.backbone, "name", ""), int(self.backbone.feature_dim)
        return [SimpleNamespace(backbone=name, dimension=dim, values=self.extract([f.rgb()])[0]) for f in frames]

    def now_s(self) -> float:
        return 0.0

    def topic(self, stream: str) -> str:
        return f"{self.session.camera_topic} of {self.session.path}"

    def commit(self, c: Any, label: str, feats: np.ndarray, source: str, views: Any, negatives: Any = None) -> Any:
        t0 = time.perf_counter()
        try:
            return c.teach(label, feats, source, views, negatives=negatives)
        finally:
            self.learn_seconds += time.perf_counter() - t0


def _teach_request(session: TeachingSession, ev: TeachingEventRecord) -> Any:
    """The TeachClass the replay sends for a TEACH event, as the learner node converts it."""
    if ev.track_id >= 0:  # the stream's track: no images, its last frames
        return TeachRequest(ev.label, ev.mode, ev.track_id, ev.rois, num_frames=len(ev.frame_stamps_ns))
    return TeachRequest(ev.label, ev.mode, ev.track_id, ev.rois, images=tuple(session.frames_of(ev)))


@dataclass
class _Run:
    """One offline run: the learner node's objects (controller, Teacher) and what was measured."""

    session: TeachingSession
    port: _BagPort
    controller: Any
    teacher: Any
    margin: float
    increments: list[IncrementResult] = field(default_factory=list)
    preds: list[PredictionRecord] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    taught: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    tests: list[PredictionRecord] = field(default_factory=list)
    classified: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)

    def close_increment(self) -> None:
        scored = [p for p in self.tests if p.true_label]
        correct = sum(p.success and p.known and p.predicted_label == p.true_label for p in scored)
        self.increments.append(IncrementResult(
            index=len(self.increments), taught=list(self.taught), changes=list(self.changes),
            classes_known=list(self.controller.classes), n_test=len(scored), n_correct=int(correct),
            accuracy=correct / len(scored) if scored else None))
        self.taught, self.changes, self.tests = [], [], []

    def classify(self, ev: TeachingEventRecord) -> None:
        """Classify the event's frame as the learner node classifies a sent image of that scope."""
        key, why = (ev.frame_stamps_ns[0], ev.mode), ""
        try:
            if key not in self.classified:  # a frame asked about twice is computed once
                req = ClassifyRequest(ev.mode, SimpleNamespace(values=()), self.session.frame(key[0]), top_k=5)
                plan = plan_classify(req.scope, req.has_feature, req.has_image, False)
                self.classified[key] = classify_vectors(req, plan, self.port, self.controller.backbone,
                                                        self.controller.feature_dim, self.controller.limits,
                                                        self.margin)[0]
        except (TypeError, ValueError) as exc:  # the node answers success=false with the reason
            why = str(exc)
        t0 = time.perf_counter()
        out = self.controller.classify(self.classified[key], top_k=5) if not why else ClassifyOutcome(False, why)
        self.port.learn_seconds += time.perf_counter() - t0
        p = out.predictions[0] if out.success and out.predictions else None
        rec = PredictionRecord(
            increment=len(self.increments), stamp_ns=ev.stamp_ns, frame_stamp_ns=ev.frame_stamps_ns[0],
            true_label=ev.label, predicted_label=(p.label if p else ""),
            confidence=float(p.confidence) if p else 0.0, known=bool(p.known) if p else False,
            success=bool(out.success), recorded_label=ev.predicted_label, recorded_success=ev.success,
            recorded_confidence=float(ev.confidence))
        self.preds.append(rec)
        self.tests.append(rec)

    def change(self, ev: TeachingEventRecord) -> None:
        """TEACH through the learner node's Teacher; FORGET and RENAME on the controller."""
        if ev.kind == EventKind.TEACH:
            self.port.event = ev
            res = self.teacher.teach(self.controller, _teach_request(self.session, ev))
            self.taught.append(ev.label)
        elif ev.kind == EventKind.FORGET:
            res = self.controller.forget(ev.label)
            self.changes.append(f"forget {ev.label}")
        else:
            res = self.controller.rename(ev.label, ev.new_label)
            self.changes.append(f"rename {ev.label} -> {ev.new_label}")
        if not res.success:
            self.failures.append(f"{ev.kind.name} {ev.label!r} at {ev.stamp_ns} ns: {res.message}")
            _LOG.warning("%s: %s", self.session.path, self.failures[-1])


def evaluate_session(
    session: TeachingSession,
    backbone: Any,
    make_learner: Callable[[int], Any],
    params: Mapping[str, Any] | None = None,
) -> OfflineReport:
    """Replay ``session``'s events through a fresh learner (see the module docstring); ``params``
    missing a learner parameter take its default."""
    p = {s.name: s.default for s in specs_for(LEARNER)} | dict(params or {})
    port = _BagPort(session, backbone, p)
    limits, name = port.limits, getattr(backbone, "name", "?")
    controller = LearnerController(make_learner=make_learner, backbone=name, feature_dim=int(backbone.feature_dim),
                                   limits=limits)  # no store: RAM only
    objects = ObjectStream(int(p["track_window"]), int(p["track_max_missed"]), float(p["track_max_distance_m"]))
    run = _Run(session, port, controller, Teacher(port, objects, name, limits), float(p["crop_margin"]))
    in_test = False
    for ev in session.events:
        if ev.kind == EventKind.CLASSIFY:
            in_test = True
            run.classify(ev)
            continue
        if in_test:  # a mutation after a test phase opens the next increment
            run.close_increment()
            in_test = False
        run.change(ev)
    if run.taught or run.changes or run.tests:
        run.close_increment()
    return OfflineReport(
        bag=str(session.path), backbone=name, params=dict(params or {}), increments=run.increments,
        predictions=run.preds, n_events=len(session.events), n_frames_extracted=port.n_images,
        feature_seconds=port.seconds, learner_seconds=port.learn_seconds, teach_failures=run.failures)


def evaluate_bag(
    path: str | Path,
    *,
    config: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    backbone: Any = None,
    camera_topic: str | None = None,
    events_topic: str = DEFAULT_EVENTS_TOPIC,
) -> OfflineReport:
    """Offline evaluation of the bag at ``path`` with the learner parameters of ``config``.

    ``backbone`` may be passed (any object with ``extract(list_of_rgb) -> (n, d)`` and ``name``),
    e.g. to share one loaded model between bags; by default it is built like the extractor node
    builds it. Raises :class:`BagFormatError` for an unusable bag, before any learning happens.
    """
    params = learner_params(config, overrides)  # a wrong option is answered before a long bag is read
    session = read_session(path, camera_topic=camera_topic, events_topic=events_topic)
    if not any(ev.kind == EventKind.TEACH for ev in session.events):
        raise BagFormatError(path, "no TEACH event: nothing to evaluate", session.events_topic)
    if backbone is None:
        backbone = make_backbone(params["backbone"], runtime=params["runtime"],
                                 threads=int(params["threads"]), device=params["device"],
                                 precision=params.get("precision", "fp32"))
    elif getattr(backbone, "name", params["backbone"]) != params["backbone"]:
        raise ValueError(f"backbone {backbone.name!r} differs from the parameters' {params['backbone']!r}")
    return evaluate_session(session, backbone, learner_factory(params), params)


def bag_to_class_images(
    path: str | Path,
    camera_topic: str | None = None,
    events_topic: str = DEFAULT_EVENTS_TOPIC,
) -> tuple[dict[str, list[np.ndarray]], dict[str, list[np.ndarray]]]:
    """A bag as a data set: (train, test), each label → list of RGB uint8 frames.

    Train holds the frames of TEACH events, test the frames of CLASSIFY events with a ground-truth
    label; each frame appears once per split, in recorded order. Renames and forgets are not
    applied (labels are as taught/tested). For the evaluation layer's data set loader.
    """
    session = read_session(path, camera_topic=camera_topic, events_topic=events_topic)
    train: dict[str, list[np.ndarray]] = {}
    test: dict[str, list[np.ndarray]] = {}
    seen: dict[str, set[tuple[str, int]]] = {"train": set(), "test": set()}
    for ev in session.events:
        if ev.kind == EventKind.TEACH:
            split, dest = "train", train
        elif ev.kind == EventKind.CLASSIFY and ev.label:
            split, dest = "test", test
        else:
            continue
        for s in ev.frame_stamps_ns:
            if (ev.label, s) not in seen[split]:
                seen[split].add((ev.label, s))
                dest.setdefault(ev.label, []).append(session.frame(s).rgb())
    if not train:
        raise BagFormatError(path, "no TEACH event: the bag holds no training data", session.events_topic)
    return train, test


def bag_to_class_features(
    path: str | Path,
    backbone: Any,
    camera_topic: str | None = None,
    events_topic: str = DEFAULT_EVENTS_TOPIC,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Like :func:`bag_to_class_images`, with each label's frames turned into an (n, d) float32
    array by ``backbone.extract`` (one batch per label and split)."""
    train, test = bag_to_class_images(path, camera_topic, events_topic)
    conv = lambda d: {k: np.asarray(backbone.extract(v), dtype=np.float32) for k, v in d.items()}  # noqa: E731
    return conv(train), conv(test)
