"""Annotated debug image: the camera frame with the learner's answer drawn on it (for rqt/RViz).

Pure numpy/OpenCV, no ROS: the learner node matches a prediction to its frame by stamp and calls
:func:`annotate`; :class:`FrameBuffer` keeps the last few frames for that matching.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

import cv2
import numpy as np

from cbcl_pr_ros.teaching_page.state import shown_name

__all__ = ["annotate", "caption", "FrameBuffer"]

_GREEN = (40, 200, 40)
_ORANGE = (255, 140, 0)
T = TypeVar("T")


def caption(label: str, confidence: float, known: bool) -> str:
    """Text drawn on the frame, written as the teaching page writes it (``teaching_page.state.shown_name``):
    ``mug 0.93``, ``mug? 0.45`` below its confidence for a guess, ``unknown`` when the open-set test
    says no (the nearest class's name and score would read as an answer)."""
    name = shown_name(label, known, confidence)
    return f"{name} {confidence:.2f}" if name else "unknown"


def annotate(rgb: np.ndarray, label: str, confidence: float, known: bool) -> np.ndarray:
    """Return a copy of an RGB uint8 frame with the label and score in a banner at the top.

    Green banner for a known object, orange for "unknown". The text scales with the frame width so it
    stays readable from 224-pixel crops to HD frames.
    """
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(
            f"annotate needs an (h, w, 3) uint8 RGB array, got "
            f"{getattr(rgb, 'shape', None)} {getattr(rgb, 'dtype', type(rgb).__name__)}"
        )
    out = np.ascontiguousarray(rgb).copy()
    h, w = out.shape[:2]
    scale = max(0.4, w / 640.0)
    thickness = max(1, int(round(2 * scale)))
    text = caption(label, float(confidence), bool(known))
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    bar_h = min(h, th + base + 8)
    colour = _GREEN if known and label else _ORANGE
    cv2.rectangle(out, (0, 0), (min(w - 1, tw + 10), bar_h), colour, thickness=-1)
    cv2.putText(out, text, (5, th + 4), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255),
                thickness, cv2.LINE_AA)
    return out


class FrameBuffer(Generic[T]):
    """The last ``capacity`` items keyed by stamp, thread-safe; old ones fall out first. With
    ``max_bytes`` and ``size`` (an item's bytes), old ones also fall out while the items held take more
    than ``max_bytes`` together (the newest stays): camera frames come from whoever publishes them, in
    any size, and 64 frames of 64 MiB would be 4 GiB."""

    def __init__(self, capacity: int = 8, max_bytes: int | None = None,
                 size: Callable[[T], int] | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if (max_bytes is None) != (size is None):
            raise ValueError("max_bytes and size go together")
        self.capacity, self.max_bytes, self._size = capacity, max_bytes, size
        self._items: OrderedDict[Hashable, tuple[T, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, key: Hashable, item: T) -> None:
        n = int(self._size(item)) if self._size is not None else 0
        with self._lock:
            old = self._items.pop(key, None)
            self._bytes -= old[1] if old is not None else 0
            self._items[key] = (item, n)
            self._bytes += n
            while len(self._items) > self.capacity or (
                    self.max_bytes is not None and self._bytes > self.max_bytes and len(self._items) > 1):
                self._bytes -= self._items.popitem(last=False)[1][1]

    @property
    def bytes_held(self) -> int:
        with self._lock:
            return self._bytes

    def pop(self, key: Hashable) -> T | None:
        """The item stored under ``key`` (removed), or None when it is not (or no longer) held."""
        with self._lock:
            got = self._items.pop(key, None)
            if got is None:
                return None
            self._bytes -= got[1]
            return got[0]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
