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

__all__ = ["DetectedBox", "Frame", "PageState"]

Listener = Callable[[str], None]


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
                "confidence": round(float(self.confidence), 3), "box": [self.x0, self.y0, self.x1, self.y1]}


@dataclass(frozen=True)
class Frame:
    """A JPEG camera frame and the detections made on exactly that frame (same stamp)."""
    jpeg: bytes
    width: int
    height: int
    stamp: float
    objects: tuple[DetectedBox, ...] = ()
    model_version: int = 0
    seq: int = 0

    def meta(self) -> dict[str, Any]:
        return {"type": "frame", "seq": self.seq, "width": self.width, "height": self.height,
                "stamp": self.stamp, "model_version": self.model_version,
                "objects": [o.as_dict() for o in self.objects]}


@dataclass
class _Shared:
    status: dict[str, Any] = field(default_factory=dict)
    classes: list[dict[str, Any]] = field(default_factory=list)
    last_teach: dict[str, Any] | None = None
    notice: dict[str, Any] | None = None
    robot: dict[str, Any] = field(default_factory=dict)


class PageState:
    """Thread-safe page model; ``listeners`` are called with ``"frame"`` or ``"state"`` on a change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frame: Frame | None = None
        self._shared = _Shared()
        self._version = 0
        self._listeners: list[Listener] = []

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
    def set_frame(self, frame: Frame) -> None:
        with self._lock:
            seq = (self._frame.seq + 1) if self._frame else 1
            self._frame = Frame(frame.jpeg, frame.width, frame.height, frame.stamp, tuple(frame.objects),
                                frame.model_version, seq)
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

    def set_classes(self, classes: list[dict[str, Any]]) -> None:
        self._update(classes=[dict(c) for c in classes])

    def set_robot(self, robot: dict[str, Any]) -> None:
        """What the page can offer (e.g. ``{"arm": True}`` when a point_at service answers)."""
        self._update(robot=dict(robot))

    def record_teach(self, label: str, ok: bool, message: str) -> None:
        self._update(last_teach={"label": label, "ok": ok, "message": message, "time": time.time()})

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
                "classes": [dict(c) for c in s.classes], "last_teach": s.last_teach, "notice": s.notice,
                "robot": dict(s.robot),
                "frame": None if frame is None else {"width": frame.width, "height": frame.height,
                                                     "seq": frame.seq},
            }

    def track_ids(self) -> set[int]:
        """Track ids on the newest frame (what the person can click now)."""
        with self._lock:
            return set() if self._frame is None else {o.id for o in self._frame.objects}

    def image_size(self) -> tuple[int, int] | None:
        with self._lock:
            return None if self._frame is None else (self._frame.width, self._frame.height)
