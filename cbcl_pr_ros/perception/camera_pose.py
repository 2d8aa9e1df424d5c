"""The camera's pose in a fixed frame, kept by stamp: what lets tracks live in the base frame.

Poses arrive as plain numbers (position in metres, unit quaternion x, y, z, w of the optical frame,
the fixed frame's name) with the image's stamp. :class:`CameraPoses` keeps a bounded history and
refuses a pose that is not finite, not a rotation, or that jumps: one that moved faster than a camera
on an arm moves (or changed frame) since the pose received just before it. A glitch therefore costs
the glitch and the pose after it, a real teleport (a re-localised robot) one pose. ``pose_at`` gives
the pose of an image stamp: the pose of that stamp, else one interpolated between the poses just
before and after it (at most ``max_gap_s`` apart), else the nearest within ``tolerance_s``, else
None: a position computed from a pose of another instant would be wrong while the camera moves.
"""
from __future__ import annotations

import bisect
import math
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

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
        """A pose from numbers; ValueError when they are not finite or the quaternion is not a unit one."""
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
        return cls(p, Rotation.from_quat(q), str(frame)[:64])

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
    """

    def __init__(self, capacity: int = 600, max_speed_mps: float = 3.0, max_turn_rad_s: float = 12.0,
                 max_gap_s: float = 0.25, tolerance_s: float = 0.02) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2, got {capacity!r}")
        for name, v in (("max_speed_mps", max_speed_mps), ("max_turn_rad_s", max_turn_rad_s),
                        ("max_gap_s", max_gap_s), ("tolerance_s", tolerance_s)):
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        self.capacity = int(capacity)
        self.max_speed_mps, self.max_turn_rad_s = float(max_speed_mps), float(max_turn_rad_s)
        self.max_gap_ns, self.tolerance_ns = int(max_gap_s * _NS), int(tolerance_s * _NS)
        self._stamps: list[int] = []
        self._poses: list[CameraPose] = []
        self._last: tuple[int, CameraPose] | None = None  # the pose received last, kept or not
        self._lock = threading.Lock()
        self.received = 0
        self.refused = 0

    def add(self, stamp_ns: int, position: Sequence[float], quaternion: Sequence[float], frame: str) -> str:
        """Keep one pose; returns "" when kept, else why not (nothing kept then)."""
        with self._lock:
            self.received += 1
            try:
                pose = CameraPose.checked(position, quaternion, frame)
            except ValueError as exc:
                self.refused += 1
                return f"camera pose refused: {exc}"
            last, self._last = self._last, (int(stamp_ns), pose)
            jump = self._jump(last, int(stamp_ns), pose)
            if jump:
                self.refused += 1
                return f"camera pose refused: {jump}"
            i = bisect.bisect_left(self._stamps, int(stamp_ns))
            if i < len(self._stamps) and self._stamps[i] == int(stamp_ns):
                self._poses[i] = pose
            else:
                self._stamps.insert(i, int(stamp_ns))
                self._poses.insert(i, pose)
            while len(self._stamps) > self.capacity:
                del self._stamps[0], self._poses[0]
            return ""

    def _jump(self, last: tuple[int, CameraPose] | None, stamp_ns: int, pose: CameraPose) -> str:
        if last is None:
            return ""
        if last[1].frame != pose.frame:
            return f"frame changed from {last[1].frame[:40]!r} to {pose.frame[:40]!r}"
        dt = abs(stamp_ns - last[0]) / _NS
        dist, turn = pose.moved_from(last[1])
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
            self._last = None


def _interpolate(a: tuple[int, CameraPose], b: tuple[int, CameraPose], t: int) -> CameraPose:
    """Linear in position, spherical in rotation, at stamp t between a and b."""
    w = (t - a[0]) / (b[0] - a[0])
    slerp = Slerp([0.0, 1.0], Rotation.concatenate([a[1].rotation, b[1].rotation]))
    return CameraPose((1 - w) * a[1].position + w * b[1].position, slerp([w])[0], a[1].frame)
