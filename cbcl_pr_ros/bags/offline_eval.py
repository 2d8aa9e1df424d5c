"""Evaluate a recorded teaching session offline: the bag drives the learner directly, no ROS graph.

The learner is driven exactly as the live learner node drives it, so the offline answers equal
the live ones for the same bag:

* the learner is built from the same parameters (``config/cbcl_pr.yaml`` by default) by the nodes'
  ``learner_factory`` and wrapped in the same ``LearnerController`` the node uses (RAM only);
* features come from the same backbone (``make_backbone`` with the extractor's runtime/threads),
  computed with the batching of the live path: one batch per TEACH event (the frames a TeachClass
  request carries), one image per CLASSIFY event; each frame is computed once and cached by stamp;
* a TEACH event's frames get the node's ``teach_views`` jittered views (seeded as the node seeds
  them), passed to the learner as views, because the live replay sends them as images;
* events are applied in their recorded order (TEACH → teach, CLASSIFY → classify top-5,
  FORGET → forget, RENAME → rename).

Accuracy is reported per increment: an increment is a run of teach/forget/rename events and the
classify events that follow it, scored on the classify events that carry a ground-truth label.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import BagFormatError
from .reader import TeachingSession, read_session
from .records import EventKind
from .writer import DEFAULT_EVENTS_TOPIC

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
    n_frames_extracted: int = 0
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
    from cbcl_pr_ros.settings.params import (EXTRACTOR, LEARNER, default_config_path, flatten, resolve_aliases,
                                             specs_for, validate_parameter)

    p = {s.name: s.default for s in specs_for(LEARNER)}
    p.update({s.name: s.default for s in specs_for(EXTRACTOR) if s.name not in p})
    given = [dict(overrides or {})]
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


class _FeatureCache:
    """Feature vectors by frame stamp, computed once, in the batches the live path uses."""

    def __init__(self, session: TeachingSession, backbone: Any) -> None:
        self.session = session
        self.backbone = backbone
        self.cache: dict[int, np.ndarray] = {}
        self.seconds = 0.0

    def get(self, stamps: tuple[int, ...]) -> np.ndarray:
        todo = [s for s in dict.fromkeys(stamps) if s not in self.cache]
        if todo:
            rgbs = [self.session.frame(s).rgb() for s in todo]
            t0 = time.perf_counter()
            feats = np.asarray(self.backbone.extract(rgbs), dtype=np.float32)
            self.seconds += time.perf_counter() - t0
            for s, f in zip(todo, feats):
                self.cache[s] = f
        return np.stack([self.cache[s] for s in stamps])

    def views(self, stamps: tuple[int, ...], shots: np.ndarray, n_views: int, spread: float,
              seed: int) -> np.ndarray:
        """(n, k, d) vectors of the teach-time views of the frames, as the learner node makes them
        for a TeachClass with these frames as images (image ``i``'s views seeded by ``seed + i``)."""
        from cbcl_pr_ros.features.augment import teaching_vectors, with_teach_views

        rgbs = [self.session.frame(s).rgb() for s in stamps]
        t0 = time.perf_counter()
        feats = np.asarray(self.backbone.extract(with_teach_views(rgbs, n_views, seed)[len(rgbs):]), np.float32)
        self.seconds += time.perf_counter() - t0
        return teaching_vectors(np.vstack([shots, feats]), len(rgbs), n_views, spread)[1]


def evaluate_session(
    session: TeachingSession,
    backbone: Any,
    make_learner: Callable[[int], Any],
    params: Mapping[str, Any] | None = None,
) -> OfflineReport:
    """Replay ``session``'s events through a fresh learner (see the module docstring)."""
    from cbcl_pr_ros.service.controller import LearnerController

    controller = LearnerController(make_learner=make_learner, backbone=getattr(backbone, "name", "?"),
                                   feature_dim=int(backbone.feature_dim))  # no store: RAM only
    params = dict(params or {})
    n_views = int(params.get("teach_views", 0))  # the live path sends the recorded frames as images
    feats = _FeatureCache(session, backbone)
    increments: list[IncrementResult] = []
    preds: list[PredictionRecord] = []
    failures: list[str] = []
    taught: list[str] = []
    changes: list[str] = []
    tests: list[PredictionRecord] = []
    t_learn = 0.0

    def close_increment() -> None:
        scored = [p for p in tests if p.true_label]
        correct = sum(p.success and p.known and p.predicted_label == p.true_label for p in scored)
        increments.append(IncrementResult(
            index=len(increments), taught=list(taught), changes=list(changes), classes_known=list(controller.classes),
            n_test=len(scored), n_correct=int(correct),
            accuracy=correct / len(scored) if scored else None))

    in_test = False
    for ev in session.events:
        if ev.kind == EventKind.CLASSIFY:
            in_test = True
            x = feats.get(ev.frame_stamps_ns)
            t0 = time.perf_counter()
            out = controller.classify(x, top_k=5)
            t_learn += time.perf_counter() - t0
            p = out.predictions[0] if out.success and out.predictions else None
            rec = PredictionRecord(
                increment=len(increments), stamp_ns=ev.stamp_ns, frame_stamp_ns=ev.frame_stamps_ns[0],
                true_label=ev.label, predicted_label=(p.label if p else ""),
                confidence=float(p.confidence) if p else 0.0, known=bool(p.known) if p else False,
                success=bool(out.success), recorded_label=ev.predicted_label,
                recorded_success=ev.success)
            preds.append(rec)
            tests.append(rec)
            continue
        if in_test:  # a mutation after a test phase opens the next increment
            close_increment()
            taught, changes, tests, in_test = [], [], [], False
        t0 = time.perf_counter()
        if ev.kind == EventKind.TEACH:
            x = feats.get(ev.frame_stamps_ns)
            views = (feats.views(ev.frame_stamps_ns, x, n_views, float(params.get("teach_view_spread", 0.5)),
                                 int(params.get("seed", 0))) if n_views else None)
            t0 = time.perf_counter()
            res = controller.teach(ev.label, x, "recorded frames", views)
            taught.append(ev.label)
        elif ev.kind == EventKind.FORGET:
            res = controller.forget(ev.label)
            changes.append(f"forget {ev.label}")
        else:
            res = controller.rename(ev.label, ev.new_label)
            changes.append(f"rename {ev.label} -> {ev.new_label}")
        t_learn += time.perf_counter() - t0
        if not res.success:
            failures.append(f"{ev.kind.name} {ev.label!r} at {ev.stamp_ns} ns: {res.message}")
            _LOG.warning("%s: %s", session.path, failures[-1])
    if taught or changes or tests:
        close_increment()
    return OfflineReport(
        bag=str(session.path), backbone=getattr(backbone, "name", "?"), params=dict(params or {}),
        increments=increments, predictions=preds, n_events=len(session.events),
        n_frames_extracted=len(feats.cache), feature_seconds=feats.seconds,
        learner_seconds=t_learn, teach_failures=failures)


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
    from cbcl_pr_ros.settings.params import learner_factory

    session = read_session(path, camera_topic=camera_topic, events_topic=events_topic)
    if not any(ev.kind == EventKind.TEACH for ev in session.events):
        raise BagFormatError(path, "no TEACH event: nothing to evaluate", session.events_topic)
    params = learner_params(config, overrides)
    if backbone is None:
        from cbcl_pr_ros.features import make_backbone

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
