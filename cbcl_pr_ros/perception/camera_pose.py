"""The camera's pose in a fixed frame, kept by stamp: what lets tracks live in the base frame.

Poses arrive as plain numbers (position in metres, unit quaternion x, y, z, w of the optical frame,
the fixed frame's name, never empty) with the image's stamp and, where the transport tells, who published them.
:class:`CameraPoses` keeps a bounded history and refuses a pose that is not finite, not a rotation,
that jumps (moved faster than a camera on an arm moves, or changed frame, since the last pose *kept*),
or that comes from a second publisher while the one whose poses are kept still publishes. A refused
pose is never the reference for the next check, so a glitch costs only itself, and a stranger
interleaving poses cannot make the real ones look like jumps. A real teleport (a re-localised robot,
a new frame, a restarted publisher) is taken once its poses have agreed with each other for
``relocalise_s`` of arrival time with no pose kept meanwhile: a live publisher's kept poses reset
that wait, so a stranger never takes over from it. ``pose_at`` gives the pose of an image stamp: the
pose of that stamp, else one interpolated between the poses just before and after it (at most
``max_gap_s`` apart), else the nearest within ``tolerance_s``, else None: a position computed from a
pose of another instant would be wrong while the camera moves.
"""
from __future__ import annotations

import bisect
import math
import threading
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from cbcl_pr_ros.stamps import check_frame_name

__all__ = ["CameraPose", "CameraPoses"]

_NS = 1_000_000_000


@dataclass(frozen=True)
class CameraPose:
    """The camera's optical frame in ``frame``: ``position`` (3,) metres, ``rotation`` (scipy Rotation)."""

    position: np.ndarray
    rotation: Rotation
    frame: str

    @classmethod
    def checked(cls, position: Sequence[float], quaternion: Sequence[float], frame: str) -> "CameraPose":
        """A pose from numbers; ValueError when they are not finite, the quaternion is not a unit one or
        ``frame`` names no frame (tf frames have names; positions in "" would pass for the camera's own)
        or is not a frame name a learner passes on (:func:`check_frame_name`: never cut)."""
        p = np.asarray(position, dtype=float).reshape(-1)
        q = np.asarray(quaternion, dtype=float).reshape(-1)
        if p.size != 3 or q.size != 4:
            raise ValueError(f"a pose needs 3 position and 4 quaternion numbers, got {p.size} and {q.size}")
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
            raise ValueError("pose has a non-finite number")
        if abs(float(np.linalg.norm(q)) - 1.0) > 0.01:
            raise ValueError(f"orientation is not a unit quaternion (norm {float(np.linalg.norm(q)):.3g})")
        if np.any(np.abs(p) > 1e4):
            raise ValueError("position is more than 10 km from the frame's origin")
        if not str(frame).strip():
            raise ValueError("the pose names no frame (an empty frame_id): a fixed frame's name is needed")
        return cls(p, Rotation.from_quat(q), check_frame_name(frame, "the pose's frame_id"))

    def to_fixed(self, points: np.ndarray) -> np.ndarray:
        """(n, 3) optical-frame points -> the fixed frame (NaN rows stay NaN)."""
        pts = np.asarray(points, dtype=float).reshape(-1, 3)
        return self.rotation.apply(pts) + self.position

    def moved_from(self, other: "CameraPose") -> tuple[float, float]:
        """(metres, radians) between two poses."""
        return (float(np.linalg.norm(self.position - other.position)),
                float((self.rotation * other.rotation.inv()).magnitude()))


class CameraPoses:
    """Bounded, thread-safe history of camera poses by stamp (ns), with jump refusal.

    Parameters
    ----------
    capacity : poses kept (the oldest go first).
    max_speed_mps, max_turn_rad_s : fastest the camera moves; a pose further from the one before is a jump.
    max_gap_s : largest gap between two poses to interpolate across.
    tolerance_s : a lone pose this close to a stamp still counts as that stamp's.
    relocalise_s : how long (arrival time) refused poses must agree, with none kept, to be taken.
    """

    def __init__(self, capacity: int = 600, max_speed_mps: float = 3.0, max_turn_rad_s: float = 12.0,
                 max_gap_s: float = 0.25, tolerance_s: float = 0.02, relocalise_s: float = 1.0) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2, got {capacity!r}")
        for name, v in (("max_speed_mps", max_speed_mps), ("max_turn_rad_s", max_turn_rad_s),
                        ("max_gap_s", max_gap_s), ("tolerance_s", tolerance_s), ("relocalise_s", relocalise_s)):
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        self.capacity = int(capacity)
        self.max_speed_mps, self.max_turn_rad_s = float(max_speed_mps), float(max_turn_rad_s)
        self.max_gap_ns, self.tolerance_ns = int(max_gap_s * _NS), int(tolerance_s * _NS)
        self.relocalise_s = float(relocalise_s)
        self._stamps: list[int] = []
        self._poses: list[CameraPose] = []
        self._kept: _Kept | None = None  # the pose kept last: the reference for the next check
        self._waiting: _Waiting | None = None  # refused poses that agree with each other, since when
        self._lock = threading.Lock()
        self.received = 0
        self.refused = 0

    def add(self, stamp_ns: int, position: Sequence[float], quaternion: Sequence[float], frame: str,
            source: str = "", now_s: float | None = None) -> str:
        """Keep one pose; returns "" when kept, else why not (nothing kept then).

        ``source`` names the publisher ("" when unknown); ``now_s`` is the arrival time (monotonic
        seconds; the default is now).
        """
        now = time.monotonic() if now_s is None else float(now_s)
        with self._lock:
            self.received += 1
            try:
                pose = CameraPose.checked(position, quaternion, frame)
            except ValueError as exc:
                self.refused += 1
                return f"camera pose refused: {exc}"
            stamp, source = int(stamp_ns), str(source)
            why = self._refusal(stamp, pose, source, now)
            if why and not self._relocalised(stamp, pose, source, now):
                self.refused += 1
                return f"camera pose refused: {why}"
            self._kept, self._waiting = _Kept(stamp, pose, source, now), None
            i = bisect.bisect_left(self._stamps, stamp)
            if i < len(self._stamps) and self._stamps[i] == stamp:
                self._poses[i] = pose
            else:
                self._stamps.insert(i, stamp)
                self._poses.insert(i, pose)
            while len(self._stamps) > self.capacity:
                del self._stamps[0], self._poses[0]
            return ""

    def _refusal(self, stamp_ns: int, pose: CameraPose, source: str, now: float) -> str:
        """Why a valid pose is not kept against the last kept one ("" = kept)."""
        kept = self._kept
        if kept is None:
            return ""
        if source != kept.source and now - kept.at < self.relocalise_s:
            return (f"a second publisher ({source[:40] or 'unnamed'}) while the one kept "
                    f"({kept.source[:40] or 'unnamed'}) still publishes")
        return self._jump(kept.stamp, kept.pose, stamp_ns, pose)

    def _relocalised(self, stamp_ns: int, pose: CameraPose, source: str, now: float) -> bool:
        """True when this refused pose ends a wait: it and the poses before it agreed for relocalise_s."""
        w = self._waiting
        if w is None or w.source != source or self._jump(w.stamp, w.pose, stamp_ns, pose):
            self._waiting = _Waiting(stamp_ns, pose, source, now)  # a new candidate place starts waiting
            return False
        self._waiting = _Waiting(stamp_ns, pose, source, w.since)
        return now - w.since >= self.relocalise_s

    def _jump(self, last_stamp: int, last: CameraPose, stamp_ns: int, pose: CameraPose) -> str:
        if last.frame != pose.frame:
            return f"frame changed from {last.frame[:40]!r} to {pose.frame[:40]!r}"
        dt = abs(stamp_ns - last_stamp) / _NS
        dist, turn = pose.moved_from(last)
        if dist > self.max_speed_mps * dt + 0.01 or turn > self.max_turn_rad_s * dt + 0.02:
            return (f"jumped {dist:.3f} m / {math.degrees(turn):.1f} deg in {dt:.3f} s "
                    f"(limits {self.max_speed_mps:g} m/s, {self.max_turn_rad_s:g} rad/s)")
        return ""

    def pose_at(self, stamp_ns: int) -> CameraPose | None:
        """The pose of an image stamp (exact, interpolated or within tolerance), or None."""
        t = int(stamp_ns)
        with self._lock:
            i = bisect.bisect_left(self._stamps, t)
            if i < len(self._stamps) and self._stamps[i] == t:
                return self._poses[i]
            before = (self._stamps[i - 1], self._poses[i - 1]) if i > 0 else None
            after = (self._stamps[i], self._poses[i]) if i < len(self._stamps) else None
        if before and after and after[0] - before[0] <= self.max_gap_ns and before[1].frame == after[1].frame:
            return _interpolate(before, after, t)
        near = [b for b in (before, after) if b is not None and abs(b[0] - t) <= self.tolerance_ns]
        return min(near, key=lambda b: abs(b[0] - t))[1] if near else None

    def clear(self) -> None:
        with self._lock:
            self._stamps.clear()
            self._poses.clear()
            self._kept = self._waiting = None


@dataclass(frozen=True)
class _Kept:
    """The pose kept last, who sent it and when it arrived (monotonic s)."""
    stamp: int
    pose: CameraPose
    source: str
    at: float


@dataclass(frozen=True)
class _Waiting:
    """The newest of a run of refused poses that agree with each other, and when the run began."""
    stamp: int
    pose: CameraPose
    source: str
    since: float


def _interpolate(a: tuple[int, CameraPose], b: tuple[int, CameraPose], t: int) -> CameraPose:
    """Linear in position, spherical in rotation, at stamp t between a and b."""
    w = (t - a[0]) / (b[0] - a[0])
    slerp = Slerp([0.0, 1.0], Rotation.concatenate([a[1].rotation, b[1].rotation]))
    return CameraPose((1 - w) * a[1].position + w * b[1].position, slerp([w])[0], a[1].frame)
