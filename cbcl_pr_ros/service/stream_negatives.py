"""Recent object vectors of the stream, kept as negatives for the next teach.

Before and while it is taught, a robot sees many objects it is not taught. Their vectors are free
negatives for the open-set gate: more, and more varied, than the few other objects of one teaching
frame. :class:`StreamNegatives` keeps a small sample of them: vectors only (float16, never images),
at most ``capacity``, only from the last ``window_s`` seconds of stamps, and at most one per track
per ``min_interval_s`` and only when it changed since the track's last kept one, so that a still
view does not fill the store with copies of itself. At teach time the taught track's vectors are
left out (:meth:`StreamNegatives.vectors`); the learner drops any left that lie near the new shots.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Iterable, Sequence

import numpy as np

__all__ = ["StreamNegatives", "STREAM_NEGATIVES_CAPACITY"]

STREAM_NEGATIVES_CAPACITY = 256  # 256 x 1280 float16 is 640 KB


class StreamNegatives:
    """A bounded, thread-safe sample of recent object vectors per track (see the module docstring)."""

    def __init__(self, capacity: int = STREAM_NEGATIVES_CAPACITY, min_interval_s: float = 1.0,
                 window_s: float = 60.0, min_change: float = 0.05) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise ValueError(f"capacity must be a non-negative int, got {capacity!r}")
        self.capacity, self.min_interval_s, self.window_s = capacity, float(min_interval_s), float(window_s)
        self.min_change = float(min_change)  # relative L2 change a track's vector needs to be kept again
        self._lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        with self._lock:
            self._kept: deque[tuple[int, float, np.ndarray]] = deque(maxlen=max(1, self.capacity))
            self._last: dict[int, tuple[float, np.ndarray]] = {}  # track id: stamp and vector last kept

    def __len__(self) -> int:
        return len(self._kept)

    def add(self, track_ids: Sequence[int], feats: np.ndarray, stamp_s: float) -> None:
        """One frame's objects: row i of ``feats`` belongs to track ``track_ids[i]``, seen at ``stamp_s``."""
        if self.capacity == 0:
            return
        x = np.asarray(feats, np.float32)
        if x.ndim != 2 or len(track_ids) != len(x):
            raise ValueError(f"{len(track_ids)} track ids for features of shape {x.shape}")
        t = float(stamp_s)
        with self._lock:
            self._forget_before(t)
            for tid, row in zip(track_ids, x):
                last = self._last.get(int(tid))
                if last is not None and (t - last[0] < self.min_interval_s or _change(row, last[1]) < self.min_change):
                    continue
                self._kept.append((int(tid), t, row.astype(np.float16)))
                self._last[int(tid)] = (t, row.copy())

    def _forget_before(self, t: float) -> None:
        """Drop what is older than the window (or newer than ``t``: the clock went back, e.g. a replay)."""
        fresh = lambda s: t - self.window_s <= s <= t  # noqa: E731
        if any(not fresh(s) for _, s, _ in self._kept):
            self._kept = deque(((i, s, v) for i, s, v in self._kept if fresh(s)), maxlen=self._kept.maxlen)
        self._last = {i: v for i, v in self._last.items() if fresh(v[0])}

    def vectors(self, exclude_tracks: Iterable[int] = ()) -> np.ndarray | None:
        """(m, d) float32 vectors kept, without those of ``exclude_tracks`` (the taught object's);
        None when there are none."""
        skip = {int(i) for i in exclude_tracks}
        with self._lock:
            rows = [v for i, _, v in self._kept if i not in skip]
        return np.stack(rows).astype(np.float32) if rows else None


def _change(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| relative to ||b||."""
    return float(np.linalg.norm(a - b) / max(float(np.linalg.norm(b)), 1e-12))
