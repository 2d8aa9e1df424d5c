"""Where the learner's detections are, in the robot's base frame: what ``point_at`` aims at (issue 12).

The ``detections`` topic gives each tracked object's centroid in the camera's optical frame at the
image's stamp; with the camera pose of that stamp it becomes a base-frame position. Objects seen from
earlier views are kept (the camera looks at one part of the table at a time) until a later view
shows their place without them, or a new detection lands on them. Pure numpy, no ROS.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .localisation import project
from .world import quaternion_to_matrix

__all__ = ["SeenObject", "DetectedObjects"]


@dataclass(frozen=True)
class SeenObject:
    """One detected object: track id, fused label, confidence and centre (base frame, metres)."""

    track_id: int
    label: str
    known: bool
    confidence: float
    centre: np.ndarray
    stamp: float
    seq: int


class DetectedObjects:
    """Base-frame memory of detected objects; ``best(label)`` is the one to point at.

    Parameters
    ----------
    merge_m : a detection closer than this (horizontally) to a remembered object replaces it.
    min_confidence : detections below this fused confidence are not remembered.
    """

    def __init__(self, merge_m: float = 0.05, min_confidence: float = 0.0) -> None:
        if not merge_m > 0:
            raise ValueError(f"merge_m must be > 0, got {merge_m!r}")
        self.merge_m = float(merge_m)
        self.min_confidence = float(min_confidence)
        self.objects_: list[SeenObject] = []
        self._seq = 0

    def update(self, detections: Sequence[tuple[int, str, bool, float, Sequence[float]]],
               cam_pos: Sequence[float], cam_quat: Sequence[float], stamp: float,
               K: np.ndarray | None = None, image_size: tuple[int, int] | None = None) -> int:
        """Add one frame's detections (track id, label, known, confidence, centroid in the optical frame).

        With ``K`` and ``image_size`` (w, h), remembered objects whose centre projects into this image
        but that no detection confirms are dropped (they were moved or taken away). Returns how many
        detections were remembered (objects without a finite centroid are skipped).
        """
        R = quaternion_to_matrix(cam_quat)
        p = np.asarray(cam_pos, float)
        fresh = []
        for tid, label, known, conf, c in detections:
            c = np.asarray(c, float).reshape(3)
            if not np.all(np.isfinite(c)) or c[2] <= 0:
                continue
            self._seq += 1
            fresh.append(SeenObject(int(tid), str(label), bool(known), float(conf), R @ c + p, float(stamp), self._seq))
        keep = []
        for o in self.objects_:
            if any(np.linalg.norm(o.centre[:2] - f.centre[:2]) < self.merge_m for f in fresh):
                continue  # replaced by this frame's view of it
            if K is not None and image_size is not None and self._in_view(o.centre, K, p, cam_quat, image_size):
                continue  # its place is in view and nothing is detected there: gone
            keep.append(o)
        good = [f for f in fresh if f.known and f.label and f.confidence >= self.min_confidence]
        self.objects_ = keep + good
        return len(good)

    @staticmethod
    def _in_view(centre: np.ndarray, K: np.ndarray, cam_pos: np.ndarray, cam_quat: Sequence[float],
                 image_size: tuple[int, int], border: float = 0.1) -> bool:
        u, v, z = project(centre[None], K, cam_pos, cam_quat)[0]
        w, h = image_size
        return bool(z > 0 and border * w <= u < (1 - border) * w and border * h <= v < (1 - border) * h)

    def best(self, label: str) -> SeenObject | None:
        """The remembered object of ``label`` with the highest fused confidence (newest on a tie)."""
        cands = [o for o in self.objects_ if o.label == label and label]
        return max(cands, key=lambda o: (round(o.confidence, 3), o.seq)) if cands else None

    def labels(self) -> list[str]:
        return sorted({o.label for o in self.objects_})

    def clear(self) -> None:
        self.objects_.clear()
