"""The arm node's behaviour without ROS: where is the object of a label, and how to point at it.

Where objects are comes from the learner's ``detections`` (tracked objects with 3-D centroids, kept
in the base frame by :class:`~.detected_objects.DetectedObjects`), else from configured poses.
``point_at`` solves a pointing pose for that place; an unknown label or an unreachable position
raises :class:`PointingRefused` and nothing is commanded.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .detected_objects import DetectedObjects
from .kinematics import BaxterKinematics, PointingSolution, Unreachable

__all__ = ["PointingRefused", "ArmController", "parse_object_poses"]


class PointingRefused(ValueError):
    """The arm will not move: unknown label, nothing located, or unreachable target."""


def parse_object_poses(entries: Sequence[str]) -> dict[str, np.ndarray]:
    """``["mug:0.7,-0.1,-0.15", ...]`` → {label: xyz}; a malformed entry raises ValueError naming it."""
    out = {}
    for e in entries:
        label, sep, xyz = e.partition(":")
        try:
            vals = [float(v) for v in xyz.split(",")]
        except ValueError:
            vals = []
        if not sep or not label.strip() or len(vals) != 3 or not all(np.isfinite(vals)):
            raise ValueError(f"object pose entry {e!r} must look like 'label:x,y,z' (metres, base frame)")
        out[label.strip()] = np.array(vals)
    return out


class ArmController:
    """Pointing logic for one arm. Not thread-safe: the node serialises calls."""

    def __init__(self, side: str = "right", table_height: float = -0.18, tolerance_m: float = 0.03,
                 object_poses: Mapping[str, Sequence[float]] | None = None, min_confidence: float = 0.0) -> None:
        self.kin = BaxterKinematics(side)
        self.side = side
        self.table_height = float(table_height)
        self.tolerance_m = float(tolerance_m)
        self.min_confidence = float(min_confidence)
        self.configured = {k: np.asarray(v, float) for k, v in (object_poses or {}).items()}
        self.detected = DetectedObjects(min_confidence=self.min_confidence)  # from the detections topic

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.kin.joint_names

    def locate(self, label: str) -> np.ndarray:
        if not label.strip():
            raise PointingRefused("empty label: say which object to point at")
        best = self.detected.best(label)  # a detection of that label beats a configured pose
        pos = best.centre if best is not None else self.configured.get(label)
        if pos is None:
            seen = sorted(set(self.configured) | set(self.detected.labels()))
            shown = ", ".join(n[:40] if n.isprintable() else repr(n[:40]) for n in seen[:10])
            shown += f" and {len(seen) - 10} more" if len(seen) > 10 else ""
            raise PointingRefused(f"no object detected as {label[:128]!r} has been located yet"
                                  f" (located: {shown or 'none'})")
        return pos

    def which(self, label: str) -> str:
        """Which object ``locate(label)`` chose, for the answer: its track id and, when several objects
        were seen as ``label``, which of them (the one most often seen so) and where the others are."""
        best = self.detected.best(label)
        if best is None:
            return f"{label!r} at its configured position" if label in self.configured else repr(label)
        same = [o for o in self.detected.objects_ if o.label == label and o is not best]
        text = f"object #{best.track_id} ({label!r}, {100 * best.confidence:.0f} % of its views)"
        if same:
            others = ", ".join(f"#{o.track_id} at ({o.centre[0]:.2f}, {o.centre[1]:.2f})" for o in same[:3])
            text += (f", the one most often seen as {label!r} of {len(same) + 1} such objects "
                     f"(the other{'s' * (len(same) > 1)}: {others}{', ...' if len(same) > 3 else ''})")
        return text

    def point_at(self, label: str, current: Mapping[str, float]) -> tuple[np.ndarray, PointingSolution]:
        """Target position and joint solution; raises PointingRefused (arm must stay still)."""
        target = self.locate(label)
        try:
            sol = self.kin.point_at(target, seed=current, tolerance_m=self.tolerance_m)
        except Unreachable as exc:
            raise PointingRefused(str(exc)) from exc
        return target, sol

    def close(self) -> None:
        self.kin.close()
