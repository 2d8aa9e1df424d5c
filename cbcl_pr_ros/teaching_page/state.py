"""What every open page shows, kept in one place so that two pages always see the same thing.

The ROS side writes (frames with their detections, learner status, class list, teach outcomes) from
its callback threads; the web side reads snapshots and is woken through listeners. Frames and the
rest are versioned separately: a slow page skips frames but never misses the newest state.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from cbcl_pr_ros.core.validation import MAX_LABEL_CHARS, check_label

__all__ = ["DETECTIONS", "TRACK_KEEP_S", "UNSURE", "DetectedBox", "Frame", "PageState", "shown_name",
           "checked_status", "checked_classes", "MAX_SHOWN_CLASSES"]

Listener = Callable[[str], None]


# Below this confidence a known object's name is written as a guess ("mug?"): near the edge of its
# class's region (docs/core.md "Open set"). The page, the debug image and RViz all write names so.
UNSURE = 0.6


# Classes the page keeps and lists (and class names of a status): a household robot's memory holds a
# thousand and more, so the first 1,000 left its newest classes off the list (nothing said); a stranger's
# list of this many names of 128 characters is still only a megabyte or so. Past it the page says how many more.
MAX_SHOWN_CLASSES = 10_000


def _check_counts(num: dict[str, Any]) -> None:
    for key, v in num.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{key} must be a whole number >= 0")


def checked_status(num: dict[str, Any], backbone: str, class_names: list[str]) -> dict[str, Any]:
    """A learner status for the page, checked as a stranger's (anyone may publish ``status``): counts
    whole and >= 0, a backbone name and class names as a learner sends them (printable, at most
    MAX_LABEL_CHARS characters), the first MAX_SHOWN_CLASSES names. ValueError otherwise: a status of
    megabyte names would go to every open page with every change."""
    _check_counts(num)
    if not isinstance(backbone, str) or len(backbone) > MAX_LABEL_CHARS or not backbone.isprintable():
        raise ValueError(f"the backbone name is not one a learner sends (printable, at most {MAX_LABEL_CHARS} "
                         "characters)")
    names = list(class_names[:MAX_SHOWN_CLASSES])
    for name in names:
        check_label(name, name="a class name of the status")
    return {**num, "backbone": backbone, "class_names": names}


def checked_classes(rows: list[tuple[Any, Any, Any]]) -> list[dict[str, Any]]:
    """The page's class list from ListClasses answers (name, clusters, examples), checked as
    :func:`checked_status` checks names (whoever answers ``list_classes`` may be a stranger): the first
    MAX_SHOWN_CLASSES; ValueError when a name is not a class name or a count not a whole number >= 0."""
    out = []
    for name, clusters, examples in rows[:MAX_SHOWN_CLASSES]:
        check_label(name, name="a class name of the list")
        counts = {"num_clusters": clusters, "num_examples": examples}
        _check_counts(counts)
        out.append({"name": name, **counts})
    return out


def shown_name(label: str, known: bool, confidence: float) -> str:
    """The name a person is shown for an answer: ``mug``, ``mug?`` below :data:`UNSURE`, or "" for an
    unknown object (never the nearest class's name or score: that would read as an answer)."""
    if not (known and label):
        return ""
    return f"{label}?" if not confidence >= UNSURE else label


@dataclass(frozen=True)
class DetectedBox:
    """One detection as the page draws it (half-open pixel box, as DetectedObject)."""
    id: int
    label: str
    known: bool
    confidence: float
    x0: int
    y0: int
    x1: int
    y1: int

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "known": self.known,
                "confidence": round(float(self.confidence), 3), "box": [self.x0, self.y0, self.x1, self.y1],
                "shown": shown_name(self.label, self.known, self.confidence)}


# How the objects of a frame came: made on this very frame; the newest ones seen, made on an earlier
# frame while the detections are late; none yet (the first ones are on their way); none, because no
# detections come at all.
DETECTIONS = ("fresh", "late", "waiting", "none")
# A track the page showed this recently may still be chosen (taught) though the newest frame lacks it:
# under load the detections of a frame come late or not at all, and the object is still there.
TRACK_KEEP_S = 10.0


@dataclass(frozen=True)
class Frame:
    """A JPEG camera frame and its detections: made on exactly that frame (same stamp, ``"fresh"``),
    the newest seen while detections are late (``"late"``), or none come (``"none"``)."""
    jpeg: bytes
    width: int
    height: int
    stamp: float
    objects: tuple[DetectedBox, ...] = ()
    model_version: int = 0
    seq: int = 0
    detections: str = "fresh"
    detections_age_s: float = 0.0

    def meta(self) -> dict[str, Any]:
        return {"type": "frame", "seq": self.seq, "width": self.width, "height": self.height,
                "stamp": self.stamp, "model_version": self.model_version,
                "objects": [o.as_dict() for o in self.objects], "detections": self.detections,
                "detections_age_s": round(float(self.detections_age_s), 1)}


@dataclass
class _Shared:
    status: dict[str, Any] = field(default_factory=dict)
    classes: list[dict[str, Any]] = field(default_factory=list)
    classes_total: int = 0  # classes the learner holds: more than ``classes`` when the list was cut
    last_teach: dict[str, Any] | None = None
    notice: dict[str, Any] | None = None
    robot: dict[str, Any] = field(default_factory=dict)
    camera: dict[str, Any] = field(default_factory=dict)
    view: dict[str, Any] = field(default_factory=dict)


class PageState:
    """Thread-safe page model; ``listeners`` are called with ``"frame"`` or ``"state"`` on a change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frame: Frame | None = None
        self._shared = _Shared()
        self._version = 0
        self._listeners: list[Listener] = []
        self._seen: dict[int, float] = {}  # track id -> monotonic time the page last showed it fresh

    # ---------------------------------------------------------------- listeners
    def add_listener(self, fn: Listener) -> None:
        with self._lock:
            self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def _notify(self, kind: str) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:
            fn(kind)

    # ---------------------------------------------------------------- writers (ROS side)
    def set_frame(self, frame: Frame, now: float | None = None) -> None:
        if frame.detections not in DETECTIONS:
            raise ValueError(f"detections must be one of {DETECTIONS}, got {frame.detections!r}")
        now = time.monotonic() if now is None else now
        with self._lock:
            seq = (self._frame.seq + 1) if self._frame else 1
            self._frame = Frame(frame.jpeg, frame.width, frame.height, frame.stamp, tuple(frame.objects),
                                frame.model_version, seq, frame.detections, frame.detections_age_s)
            if frame.detections == "fresh":
                for o in frame.objects:
                    self._seen[o.id] = now
            for tid in [t for t, seen in self._seen.items() if now - seen > TRACK_KEEP_S]:
                del self._seen[tid]
        self._notify("frame")

    def _update(self, **changes: Any) -> None:
        with self._lock:
            if all(getattr(self._shared, k) == v for k, v in changes.items()):
                return  # the learner repeats its status every few seconds: wake the pages on a change only
            for k, v in changes.items():
                setattr(self._shared, k, v)
            self._version += 1
        self._notify("state")

    def set_status(self, status: dict[str, Any]) -> None:
        self._update(status=dict(status))

    def set_classes(self, classes: list[dict[str, Any]], total: int | None = None) -> None:
        """The class list; ``total``: how many classes the learner holds when ``classes`` are only
        the first of them (the page then says how many it does not list)."""
        total = len(classes) if total is None else max(int(total), len(classes))
        self._update(classes=[dict(c) for c in classes], classes_total=total)

    def set_robot(self, robot: dict[str, Any]) -> None:
        """What the page can offer (e.g. ``{"arm": True}`` when a point_at service answers)."""
        self._update(robot=dict(robot))

    def set_view(self, view: dict[str, Any]) -> None:
        """Where the hand camera looks after the last arm action: ``{"at": "table"}`` or
        ``{"at": "pointing", "label": ...}`` (a close-up; the page offers the way back)."""
        self._update(view=dict(view))

    def set_camera(self, camera: dict[str, Any]) -> None:
        """Where the picture comes from: ``{"topic", "waiting", "hint"}`` (the hint says what to do
        when no picture arrives)."""
        self._update(camera=dict(camera))

    def record_teach(self, label: str, ok: bool, message: str, track_id: int = -1,
                     box: tuple[int, int, int, int] | None = None) -> None:
        """The last teach's answer, with the object it used (track id, box) for the page to highlight."""
        self._update(last_teach={"label": label, "ok": ok, "message": message, "time": time.time(),
                                 "track_id": int(track_id), "box": None if box is None else [int(v) for v in box]})

    def record_notice(self, action: str, ok: bool, message: str) -> None:
        """The outcome of the last rename/forget/point, so every open page shows it."""
        self._update(notice={"action": action, "ok": ok, "message": message, "time": time.time()})

    # ---------------------------------------------------------------- readers (web side)
    def frame(self) -> Frame | None:
        with self._lock:
            return self._frame

    def snapshot(self) -> tuple[int, dict[str, Any]]:
        """(version, JSON-ready state without the image)."""
        with self._lock:
            s = self._shared
            frame = self._frame
            return self._version, {
                "type": "state", "version": self._version, "status": dict(s.status),
                "classes": [dict(c) for c in s.classes], "classes_total": s.classes_total,
                "last_teach": s.last_teach, "notice": s.notice,
                "robot": dict(s.robot), "camera": dict(s.camera), "view": dict(s.view),
                "frame": None if frame is None else {"width": frame.width, "height": frame.height,
                                                     "seq": frame.seq},
            }

    def track_ids(self, now: float | None = None) -> set[int]:
        """Track ids the person may choose now: those on the newest frame; while its detections are
        late (or none come) also those the page showed within :data:`TRACK_KEEP_S`: late detections
        must not make an object unchoosable, but a fresh frame without it says it left."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._frame is None:
                return set()
            ids = {o.id for o in self._frame.objects}
            if self._frame.detections == "fresh":
                return ids
            return ids | {t for t, seen in self._seen.items() if now - seen <= TRACK_KEEP_S}

    def image_size(self) -> tuple[int, int] | None:
        with self._lock:
            return None if self._frame is None else (self._frame.width, self._frame.height)
