"""Everything the learner keeps per object track, in one store: the track, its recent views, and a
sample of recent vectors.

:class:`TrackStore` is fed once per frame (:meth:`TrackStore.update`): the tracker
(``perception.tracking.ObjectTracker``) gives each object its id, then the same ids and vectors go
to the two memories built on them, so they never disagree about which vector is whose:

* :class:`TrackHistory`: the last frames' vectors and boxes per track id, so that a track can be
  taught at once (TeachClass by ``track_id``; the boxes tell which frames show one view), and a teach
  of the object in view can take the views its track had before the teach (frames are numbered).
* :class:`StreamNegatives`: a small sample of the recent objects' vectors, free negatives for the
  open-set gate at the next teach. Before and while it is taught, a robot sees many objects it is not
  taught: more, and more varied, than the few other objects of one teaching frame. Vectors only
  (float16, never images), at most ``capacity``, only from the last ``window_s`` seconds of stamps,
  at most one per track per ``min_interval_s`` and only when it changed since the track's last kept
  one, so a still view does not fill the store with copies of itself. At teach time only the vectors
  of frames that also showed the taught track are taken, its own left out
  (:meth:`StreamNegatives.vectors`): an object lost and found again under a new id cannot veto
  itself. The learner drops any left that lie near the new shots.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from cbcl_pr_ros.perception.boxes import box_iou
from cbcl_pr_ros.perception.tracking import ObjectObservation, ObjectTracker, Track

__all__ = ["TrackStore", "TrackHistory", "TrackViews", "StreamNegatives", "STREAM_NEGATIVES_CAPACITY"]

Box = tuple[int, int, int, int]


class TrackStore:
    """The tracker and the per-track memories, updated together (thread-safe: the stream callback
    updates it while a service callback reads it)."""

    def __init__(self, window: int, max_missed: int, max_distance_m: float, history: int = 30) -> None:
        self._settings = (window, max_missed, max_distance_m, history)
        self._lock = threading.Lock()
        self.negatives = StreamNegatives()  # recent vectors of the objects seen, negatives for a teach
        self.reset()

    def reset(self) -> None:
        """Forget every track and what was kept of it."""
        window, max_missed, max_distance_m, history = self._settings
        with self._lock:
            self._tracker = ObjectTracker(window=window, max_missed=max_missed, max_distance_m=max_distance_m)
            self._history = TrackHistory(capacity=history)
        self.negatives.clear()

    def update(self, observations: Sequence[ObjectObservation], features: np.ndarray, stamp_s: float,
               view: int | None) -> list[Track]:
        """Track one frame's observations (row i of ``features`` is observation i's vector, ``view``
        the camera view's number: ``ObjectTracker.update``) and keep each shown track's vector and box."""
        with self._lock:
            tracks = self._tracker.update(observations, stamp_s, view)
        by_observation = {t.observation: t.id for t in tracks}  # a far-off part at the border has none
        shown = sorted(by_observation)
        if shown:
            ids = [by_observation[i] for i in shown]
            self._history.add(ids, features[shown], [observations[i].proposal.box for i in shown])
            self.negatives.add(ids, features[shown], stamp_s)
        return tracks

    def track_at(self, box: Sequence[int], min_iou: float = 0.5) -> int | None:
        """The id of the live track whose last box overlaps ``box`` most (at least ``min_iou``), or None."""
        with self._lock:
            scored = [(box_iou(tuple(t.proposal.box), tuple(box)), t.id) for t in self._tracker.tracks]
        best = max(scored, default=(0.0, None))
        return best[1] if best[0] >= min_iou else None

    def track_views(self, track_id: int, n: int) -> "TrackViews":
        """A live track's last ``n`` frames (vectors, boxes, the other tracks' vectors); ValueError
        naming the live tracks otherwise."""
        with self._lock:
            track = self._tracker.get(track_id)
            live = [t.id for t in self._tracker.tracks]
        if track is None:
            raise ValueError(f"track {track_id} does not exist (any more); current tracks: "
                             f"{', '.join(map(str, live)) or 'none'}")
        views = self._history.views_of(track_id, n)
        if len(views.rows) == 0:
            raise ValueError(f"track {track_id} has no recent views to learn from")
        return views

    def mark(self) -> int:
        """The number of the next frame the history keeps: :meth:`earlier_views` before it."""
        return self._history.mark()

    def earlier_views(self, track_id: int, n: int, before: int) -> "TrackViews":
        """A track's last ``n`` frames kept before frame number ``before`` (:meth:`mark`); none when
        there are none (no error: a teach of the object in view adds them where they exist)."""
        return self._history.views_of(track_id, n, before)


@dataclass(frozen=True)
class TrackViews:
    """A track's recent frames for a teach: its vectors and boxes (oldest first), and per frame the
    vectors of the other tracks seen in it (``rivals``; natural negatives, like a teaching frame's other
    objects)."""

    rows: np.ndarray
    boxes: list[Box]
    rivals: tuple[np.ndarray, ...] = ()

    @property
    def others(self) -> np.ndarray:
        """Every frame's rivals in one (m, d) array."""
        return np.concatenate(self.rivals) if self.rivals else np.zeros((0, self.rows.shape[1]), np.float32)


class TrackHistory:
    """The last ``capacity`` frames' vectors and boxes per track id (thread-safe), for teaching from a
    track: the boxes tell which frames show one view (see :func:`one_shot_per_view`)."""

    def __init__(self, capacity: int = 30) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        # (the frame's number, track id: its vector and box)
        self._frames: deque[tuple[int, dict[int, tuple[np.ndarray, Box]]]] = deque(maxlen=capacity)
        self._count = 0
        self._lock = threading.Lock()

    def add(self, track_ids: Sequence[int], feats: np.ndarray, boxes: Sequence[Sequence[int]]) -> None:
        """One frame: row i of ``feats`` and ``boxes[i]`` belong to track ``track_ids[i]``."""
        f = np.asarray(feats, np.float32)
        if len(track_ids) != (f.shape[0] if f.ndim == 2 else -1) or len(boxes) != len(track_ids):
            raise ValueError(f"{len(track_ids)} track ids and {len(boxes)} boxes for features of shape {f.shape}")
        frame = {int(t): (f[i].copy(), tuple(int(v) for v in boxes[i])) for i, t in enumerate(track_ids)}
        with self._lock:
            self._frames.append((self._count, frame))
            self._count += 1

    def mark(self) -> int:
        """The number the next frame added will carry."""
        with self._lock:
            return self._count

    def views_of(self, track_id: int, n: int, before: int | None = None) -> TrackViews:
        """The ``n`` most recent frames that show the track (all kept when ``n`` <= 0), among those
        added before frame number ``before`` (:meth:`mark`; None: all)."""
        with self._lock:
            frames = [fr for k, fr in self._frames if track_id in fr and (before is None or k < before)]
        frames = frames[-int(n):] if n > 0 else frames
        rows = [fr[track_id][0] for fr in frames]
        d = len(rows[0]) if rows else 0
        rivals = tuple(np.stack([v for t, (v, _) in fr.items() if t != track_id]) if len(fr) > 1
                       else np.zeros((0, d), np.float32) for fr in frames)
        return TrackViews(np.stack(rows) if rows else np.zeros((0, d), np.float32),
                          [fr[track_id][1] for fr in frames], rivals)

    def clear(self) -> None:
        with self._lock:
            self._frames.clear()


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
            # (track id, stamp, vector, the tracks seen in the same frame)
            self._kept: deque[tuple[int, float, np.ndarray, frozenset[int]]] = deque(maxlen=max(1, self.capacity))
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
        together = frozenset(int(i) for i in track_ids)
        with self._lock:
            self._forget_before(t)
            for tid, row in zip(track_ids, x):
                last = self._last.get(int(tid))
                if last is not None and (t - last[0] < self.min_interval_s or _change(row, last[1]) < self.min_change):
                    continue
                self._kept.append((int(tid), t, row.astype(np.float16), together))
                self._last[int(tid)] = (t, row.copy())

    def _forget_before(self, t: float) -> None:
        """Drop what is older than the window (or newer than ``t``: the clock went back, e.g. a replay)."""
        fresh = lambda s: t - self.window_s <= s <= t  # noqa: E731
        if any(not fresh(k[1]) for k in self._kept):
            self._kept = deque((k for k in self._kept if fresh(k[1])), maxlen=self._kept.maxlen)
        self._last = {i: v for i, v in self._last.items() if fresh(v[0])}

    def vectors(self, exclude_tracks: Iterable[int] = (), seen_with: int | None = None) -> np.ndarray | None:
        """(m, d) float32 vectors kept, without those of ``exclude_tracks`` (the taught object's);
        None when there are none.

        ``seen_with``: only vectors of frames in which that track (the taught object) was seen too. A
        thing seen beside the taught object is surely another object; one seen while it was out of
        view may be the taught object itself under a track the tracker started anew."""
        skip = {int(i) for i in exclude_tracks}
        with self._lock:
            rows = [v for i, _, v, together in self._kept
                    if i not in skip and (seen_with is None or int(seen_with) in together)]
        return np.stack(rows).astype(np.float32) if rows else None


def _change(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| relative to ||b||."""
    return float(np.linalg.norm(a - b) / max(float(np.linalg.norm(b)), 1e-12))
