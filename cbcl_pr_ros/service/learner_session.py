"""The learner without ROS: one object behind the learner node that answers every request and frame.

:class:`LearnerSession` owns what the learner node serves: the memory (a
:class:`~cbcl_pr_ros.service.controller.LearnerController`, built at configure), the
:class:`~cbcl_pr_ros.service.teaching.Teacher` (TeachClass's plan), the object tracks
(:class:`~cbcl_pr_ros.objects.stream.ObjectStream`), the teaches waiting for frames
(:class:`~cbcl_pr_ros.service.frame_waiters.StreamWaiters`) and, in fleet mode, the
:class:`~cbcl_pr_ros.service.fleet.FleetMember`. The node turns each message into a plain request,
calls one method here and fills its response from the answer. What the session needs of the node is
one small :class:`LearnerPort`: the backbone, the clock, the current parameter values, the
lifecycle gate, topic names for messages, and the outputs (predictions, detections, debug image,
status, class updates).

The state gate: a read-only request (classify, list, save) needs the node at least inactive, a change
(teach, forget, rename, load, merge) active; a change is made under the node's commit lock after
checking the state again (:meth:`LearnerSession.committing`), so a lifecycle transition never
overtakes it. A refusal says why and changes nothing.
"""
from __future__ import annotations

import time
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol

import numpy as np

from cbcl_pr_ros.perception.camera_pose import CameraPose
from cbcl_pr_ros.plurals import counted
from cbcl_pr_ros.runtime.rate_limit import RateLimiter
from cbcl_pr_ros.runtime.stage_times import StageTimes, stop_lines
from cbcl_pr_ros.service.classify_scope import ClassifyRequest, classify_vectors, plan_classify
from cbcl_pr_ros.service.controller import NOTHING_LEARNED, LearnerController, Outcome, StatusSnapshot, TeachOutcome
from cbcl_pr_ros.service.fleet import ClassUpdate, FleetMember, FleetSettings, Received
from cbcl_pr_ros.service.frame_waiters import StreamWaiters
from cbcl_pr_ros.service.memory_files import earlier_memory_note, store_from_params
from cbcl_pr_ros.objects import ObjectFrame, ObjectStream
from cbcl_pr_ros.service.teaching import FeatureSourceError, Teacher, TeachRequest, TeachSettings
from cbcl_pr_ros.request_checks import RequestLimits, check_count, features_from_msgs, quote
from cbcl_pr_ros.settings.params import feature_dim_for, learner_factory
from cbcl_pr_ros.stamps import check_frame_name, stamp_to_s

__all__ = ["ACTIVE", "INACTIVE", "ClassifyAnswer", "LearnerPort", "LearnerSession", "SETTABLE_TEACH_PARAMS"]

# the lifecycle states a request needs (the words of nodes.lifecycle)
ACTIVE, INACTIVE = "active", "inactive"

# the teaching parameters that may be set at run time (read at each request)
SETTABLE_TEACH_PARAMS = ("teach_from", "crop_margin", "teach_num_frames", "teach_timeout_s", "teach_views",
                         "teach_view_spread", "teach_negatives")


class LearnerPort(Protocol):
    """What a :class:`LearnerSession` asks of the node that serves it (``nodes/learner.py``)."""

    def extract(self, rgbs: list[np.ndarray]) -> Any:
        """The feature source's answer for RGB arrays (``features`` (n, d), ``backbone``);
        FeatureSourceError on failure."""

    def now_s(self) -> float:
        """The node clock in seconds (a bag's /clock under use_sim_time)."""

    def setting(self, name: str) -> Any:
        """A parameter's value now (some may be set at run time)."""

    def active(self) -> bool:
        """True while the node is in the active lifecycle state."""

    def refusal(self, what: str, need: str) -> str | None:
        """None when the node's state allows ``what`` (``need``: ACTIVE or INACTIVE), else why not."""

    def committing(self, what: str, need: str) -> AbstractContextManager[str | None]:
        """Hold the commit lock; give the refusal for ``what`` in the state now (None: go on)."""

    def topic(self, stream: str) -> str:
        """The resolved topic name of a stream ('features' or 'objects'), for messages."""

    def upstream(self, stream: str) -> str:
        """Who feeds a stream and from which camera, for a failure's message."""

    def log(self, line: str, warning: bool = False) -> None:
        """One line for the node's log: what a change did (info), or a user's mistake (``warning``)."""

    def publish_prediction(self, frame: Any, prediction: Any, model_version: int) -> None:
        """The prediction of one feature vector (``frame``: the vector's message)."""

    def publish_detections(self, header: Any, tracks: list, model_version: int, pose: CameraPose | None) -> Any:
        """The tracked objects of one object frame; returns what Classify answers with later."""

    def show_prediction(self, header: Any, prediction: Any) -> bool:
        """Draw a prediction on its camera frame while someone looks; True when drawn."""

    def show_detections(self, detections: Any) -> bool:
        """Draw the detections on their camera frame while someone looks; True when drawn."""

    def publish_status(self, status: StatusSnapshot) -> None:
        """The learner's status (on every change of the memory and periodically)."""

    def publish_class_update(self, update: ClassUpdate) -> None:
        """A class update for the fleet (fleet mode only)."""


@dataclass(frozen=True)
class ClassifyAnswer:
    """A Classify answer: ``detections`` (the latest detections and their image shape) when the answer
    is the stream's objects; else the prediction of the vectors, ``origin`` what they came from (its
    header stamps the answer) and ``box`` the object of a sent image."""

    success: bool
    message: str
    prediction: Any = None
    origin: Any = None
    model_version: int = 0
    box: tuple[int, int, int, int] | None = None
    detections: tuple[Any, Any] | None = None


class LearnerSession:
    """Everything the learner node serves, without ROS (see the module docstring)."""

    def __init__(self, port: LearnerPort, params: Mapping[str, Any]) -> None:
        self.port = port
        self.params = dict(params)
        self.backbone = str(params["backbone"])
        self.limits = RequestLimits.from_params(params)
        self.controller: LearnerController | None = None  # built by configure, freed by cleanup
        self.fleet: FleetMember | None = None  # fleet mode (parameter ``fleet``)
        self.objects = ObjectStream(params["track_window"], params["track_max_missed"],
                                    params["track_max_distance_m"])
        self.waiters = StreamWaiters("features", "objects")  # TeachClass requests waiting for frames
        self.teacher = Teacher(self, self.objects, self.backbone, self.limits)  # its port: this session
        self._latest: Any = None  # the newest feature vector: what Classify answers without objects
        self.last_detections: tuple[Any, tuple[int, int]] | None = None  # Classify's default answer
        self.rate_limit = RateLimiter()  # predictions, on the node clock
        self.times = StageTimes()  # where a frame's time goes (docs/nodes.md "Where the time goes")
        self.predictions_published = 0
        self.detections_published = 0

    # ------------------------------------------------------------------ life cycle
    def configure(self, namespace: str) -> None:
        """Build the memory and load its file (the outcome logged; a refused file that could be moved
        aside: a warning). MemoryLoadError when a file exists that can be neither served nor moved
        aside; ValueError on bad fleet parameters."""
        p = self.params
        controller = LearnerController(
            make_learner=learner_factory(p), backbone=self.backbone, feature_dim=feature_dim_for(p),
            store=store_from_params(p, namespace), cluster_budget=p["max_clusters"], on_change=self._changed,
            limits=self.limits)
        started = controller.load_at_startup(move_aside=True)
        if controller.moved_aside_:
            self.port.log(f"MEMORY FILE REFUSED: {started}; load it again with LoadMemory "
                          f"'{controller.moved_aside_}' once repaired", warning=True)
        else:
            self.port.log(started + earlier_memory_note(p, namespace))
        self.controller = controller
        settings = FleetSettings.from_params(p)
        if settings is not None:
            self.fleet = FleetMember(controller, settings, self.port.publish_class_update, clock=self.port.now_s)

    def activate(self) -> None:
        """The node is active: in fleet mode, publish every class held now (the history starts complete)."""
        if self.fleet is not None:
            self.port.log(f"fleet: published {counted(self.fleet.publish_all(), 'class update')}")

    def interrupt(self) -> None:
        """Wake every TeachClass waiting for frames: the node leaves the active state."""
        self.waiters.cancel_all()

    def pause(self) -> None:
        """The node is deactivated: a classify while paused must not answer an old frame; fleet peers'
        changes still in RAM are written now (no update arrives until the next activate)."""
        self._latest = None
        self.flush_fleet()

    def flush_fleet(self) -> None:
        """Write fleet peers' changes kept in RAM (the node's fleet save timer calls it every
        ``fleet_save_period``; cleanup writes them too: ``LearnerController.release``)."""
        fleet = self.fleet
        line = fleet.flush() if fleet is not None else ""
        if line:
            self.port.log(line, warning=" not saved: " in line)

    def cleanup(self, final: bool) -> tuple[bool, str] | None:
        """Free the memory once every class is on disk: (ok, line to log), None when none was built.
        RuntimeError (nothing freed) when a class would be lost (``LearnerController.release``)."""
        c = self.controller
        released = c.release(final) if c is not None else None
        self.controller, self.fleet = None, None
        self.objects.reset()
        self.last_detections = None
        return released

    def status(self) -> StatusSnapshot | None:
        """The learner's status now, None while no memory is loaded."""
        c = self.controller
        return c.status() if c is not None else None

    def _changed(self) -> None:
        """The memory changed: status out, then the fleet's class updates."""
        status = self.status()
        if status is not None:
            self.port.publish_status(status)
        if self.fleet is not None:
            self.fleet.on_change()

    def stop_report(self) -> str:
        """What the node logs when it stops (:func:`~cbcl_pr_ros.runtime.stage_times.stop_lines`)."""
        summary = (f"{self.predictions_published} predictions and {self.detections_published} "
                   "detection messages published")
        return stop_lines("learner", summary, {"predictions": self.predictions_published,
                                               "detections": self.detections_published,
                                               "stages": self.times.summary()})

    # ------------------------------------------------------------------ the state gate
    def controller_for(self, what: str, need: str) -> tuple[LearnerController | None, str | None]:
        """(controller, None) when the node's state allows ``what``, else (controller or None, refusal)."""
        refused = self.port.refusal(what, need)
        c = self.controller
        if refused is None and c is None:
            refused = f"{what} refused: the memory is not loaded (the node is between transitions)"
        return c, refused

    @contextmanager
    def committing(self, what: str, need: str = ACTIVE,
                   expected: Any = None) -> Iterator[tuple[Any, str | None]]:
        """(controller, refusal) under the commit lock: a change made inside is done before any
        transition goes on; ``expected``: the controller the request started with (a request that
        waited across cleanup/configure is refused rather than taught into a freed memory)."""
        with self.port.committing(what, need) as refused:
            c = self.controller
            if refused is None and c is None:
                refused = f"{what} refused: the memory is not loaded (the node is between transitions)"
            if refused is None and expected is not None and c is not expected:
                refused = (f"{what} refused: the node was cleaned up and configured again while the request "
                           "gathered its examples; nothing was changed, send it again")
            yield c, refused

    # ------------------------------------------------------------------ TeachClass and Classify
    def teach(self, req: TeachRequest) -> TeachOutcome:
        """Learn a TeachClass request, or a refusal that says why (nothing changed then)."""
        c, refused = self.controller_for("teach_class", ACTIVE)
        if refused:
            return c.refused(refused) if c is not None else TeachOutcome(False, refused)
        return self.teacher.teach(c, req)

    def classify(self, q: ClassifyRequest) -> ClassifyAnswer:
        """Answer a Classify: the latest detections, or the prediction of the vectors it asks about."""
        c, refused = self.controller_for("classify", INACTIVE)  # read-only: also while inactive
        if refused or not c.classes:
            return ClassifyAnswer(False, refused or NOTHING_LEARNED)
        try:
            plan = plan_classify(q.scope, q.has_feature, q.has_image, self.objects_streaming())
            last = self.last_detections
            if plan.target == "objects" and last is not None:
                return ClassifyAnswer(True, "", detections=last)
            margin = float(self.port.setting("crop_margin"))
            feats, origin, box, plan = classify_vectors(q, plan, self, self.backbone, c.feature_dim, self.limits,
                                                        margin)
        except (ValueError, TypeError, FeatureSourceError) as exc:
            return ClassifyAnswer(False, str(exc), model_version=c.model_version)
        out = c.classify(feats, top_k=q.top_k)
        return ClassifyAnswer(out.success, out.message + plan.note, out.predictions[0] if out.predictions else None,
                              origin, out.model_version, box)

    # ------------------------------------------------------------------ the memory's services
    def class_list(self) -> tuple[list, int, str | None]:
        """(class infos, model version, None), or ([], 0, refusal): the classes are on disk, not lost."""
        c, refused = self.controller_for("list_classes", INACTIVE)
        if refused:
            return [], 0, refused
        return c.class_info(), c.model_version, None

    def forget(self, label: Any) -> Outcome:
        return self._change("forget_class", lambda c: c.forget(label))

    def rename(self, old: Any, new: Any) -> Outcome:
        return self._change("rename_class", lambda c: c.rename(old, new))

    def load(self, name: Any) -> Outcome:
        return self._change("load_memory", lambda c: c.load(name))

    def merge(self, name: Any) -> Outcome:
        return self._change("merge_memory", lambda c: c.merge(name))

    def _change(self, what: str, call: Callable[[LearnerController], Outcome]) -> Outcome:
        """Forget, rename, load, merge: ``call(controller)`` while active, committed before the answer
        and logged (a refusal by the node's state only answered)."""
        with self.committing(what) as (c, refused):
            if refused:
                state = (c.model_version, len(c.classes)) if c is not None else (0, 0)
                return Outcome(False, refused, *state)
            out = call(c)
        self.port.log(out.message, warning=not out.success)  # a user's mistake: the answer says what to do
        return out

    def save(self, name: Any) -> tuple[bool, str, str, int]:
        """SaveMemory (changes no class: also while inactive): (ok, message, path, bytes written)."""
        with self.committing("save_memory", INACTIVE) as (c, refused):
            if refused:
                return False, refused, "", 0
            ok, message, path, size = c.save(name)
        self.port.log(message, warning=not ok)  # a refused name or a full disk: the answer says what to do
        return ok, message, path, size

    def receive(self, update: ClassUpdate) -> Received | None:
        """A fleet peer's class update, decided by the fleet member (None when fleet mode is off)."""
        fleet = self.fleet
        return fleet.receive(update) if fleet is not None else None

    # ------------------------------------------------------------------ the two streams
    def objects_streaming(self) -> bool:
        """True while the extractor sends objects (an ObjectFeatures within the last 2 s)."""
        return self.objects.streaming(self.port.now_s())

    def _stamp_age(self, stage: str, stamp: Any) -> None:
        """Record image stamp -> now (host wall clock) as ``stage``: the path up to the callback."""
        self.times.add(stage, time.time() - stamp_to_s(stamp))

    def on_features(self, msg: Any) -> None:
        """One feature vector (FeatureVector-like): offered to waiting teaches, kept for Classify, then a
        prediction at most ``max_prediction_rate`` per second. ValueError: a vector that does not fit
        (another backbone or width, values not finite or over ``max_feature_abs``), checked before
        anything keeps it: it is neither the latest frame nor a waiting teach's."""
        c = self.controller
        if c is None or not self.port.active():
            return  # a message already queued when the stream was paused
        check_frame_name(msg.header.frame_id)  # echoed into predictions and Classify answers
        feats = features_from_msgs([msg], self.backbone, c.feature_dim, self.limits.max_feature_abs)
        self._stamp_age("stamp_to_callback", msg.header.stamp)
        self._latest = msg
        self.waiters.offer("features", msg)
        if not self.rate_limit.allow(self.port.now_s(), float(self.port.setting("max_prediction_rate"))):
            return
        if not c.classes:
            return
        with self.times.stage("predict"):
            out = c.classify(feats, top_k=len(c.classes))
        if not out.success:
            return
        pred = out.predictions[0]
        with self.times.stage("publish"):
            self.port.publish_prediction(msg, pred, out.model_version)
        self.predictions_published += 1
        if not self.objects_streaming():  # with objects, the debug image shows their boxes instead
            self._show(self.port.show_prediction, msg.header, pred)

    def on_objects(self, msg: Any, to_frame: Callable[..., ObjectFrame],
                   pose_for: Callable[[Any], CameraPose | None]) -> None:
        """The objects of one camera frame: classified in one batch, tracked (in the camera pose's frame
        when known), published as detections, offered to waiting teaches. ``msg``: the ObjectFeatures
        message, turned into an ObjectFrame by ``to_frame(msg, backbone, feature_dim, max_abs)``
        (ValueError: it does not fit, nothing published); ``pose_for(stamp)``: the camera pose or None."""
        c = self.controller
        if c is None or not self.port.active():
            return  # a message already queued when the stream was paused
        check_frame_name(msg.header.frame_id)  # echoed into every detection: within what readers take
        self._stamp_age("objects_stamp_to_callback", msg.header.stamp)
        t0, c0 = time.perf_counter(), time.thread_time()
        frame = to_frame(msg, self.backbone, c.feature_dim or None, self.limits.max_feature_abs)
        self.objects.arrived(frame, self.port.now_s())
        self.waiters.offer("objects", frame)
        pose = pose_for(msg.header.stamp)  # tracks and detections: in its frame
        version, tracks = self.objects.classify_and_track(frame, c, stamp_to_s(msg.header.stamp), pose)
        det = self.port.publish_detections(msg.header, tracks, version, pose)
        self.last_detections = (det, frame.shape)
        self.detections_published += 1
        self.times.add("objects", time.perf_counter() - t0, time.thread_time() - c0)
        self._show(self.port.show_detections, det)

    def _show(self, show: Callable[..., bool], *args: Any) -> None:
        """Draw on the debug image, timed as ``debug_image`` when drawn."""
        t0, c0 = time.perf_counter(), time.thread_time()
        if show(*args):
            self.times.add("debug_image", time.perf_counter() - t0, time.thread_time() - c0)

    # ------------------------------------------------------------------ the Teacher's and Classify's port
    def teach_settings(self) -> TeachSettings:
        now = {name: self.port.setting(name) for name in SETTABLE_TEACH_PARAMS}
        return TeachSettings.from_params({**self.params, **now})

    def extract(self, rgbs: list) -> np.ndarray:
        """(n, d) vectors of RGB arrays the request code decoded (once); FeatureSourceError on failure
        or when the extractor's backbone is not this learner's."""
        check_count(len(rgbs), self.limits.max_images_per_request, "images")
        ex = self.port.extract(rgbs)
        if ex.backbone != self.backbone:
            raise FeatureSourceError(f"the extractor uses backbone {quote(ex.backbone)}, this learner "
                                     f"'{self.backbone}': set the same 'backbone' parameter on both")
        return ex.features

    def collect(self, n: int, timeout_s: float, stream: str) -> list[Any]:
        return self.waiters.collect(stream, n, timeout_s, self.port.active, now=self.port.now_s)

    def now_s(self) -> float:
        return self.port.now_s()

    def topic(self, stream: str) -> str:
        return self.port.topic(stream)

    def upstream(self, stream: str) -> str:
        return self.port.upstream(stream)

    def commit(self, c: LearnerController, label: str, feats: Any, source: str, views: Any,
               negatives: Any = None) -> TeachOutcome:
        """Teach under the commit lock, after checking that the node still serves this memory;
        ``negatives``: the other objects of the teaching frames (:meth:`LearnerController.teach`)."""
        with self.committing("teach_class", expected=c) as (_, refused):
            if refused:
                return c.refused(f"nothing learned: {refused}")
            outcome = c.teach(label, feats, source, views, negatives=negatives)
        self.port.log(outcome.message)
        return outcome

    def latest_features(self) -> Any:
        return self._latest

    def no_frame_reason(self) -> str:
        if not self.port.active():
            return "the node is inactive, so it reads no camera frames: send an image or a feature vector"
        return (f"no camera frame received on '{self.topic('features')}' yet ({self.upstream('features')}): "
                "send an image, or start the camera and feature_extractor")
