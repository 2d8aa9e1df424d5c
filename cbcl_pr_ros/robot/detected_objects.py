"""Where the learner's detections are, in the robot's base frame: what ``point_at`` aims at.

The ``detections`` topic gives each tracked object's centroid in the camera's optical frame at the
image's stamp; with the camera pose of that stamp it becomes a base-frame position. Objects seen from
earlier views are kept (the camera looks at one part of the table at a time) until a later view
shows their place without them, or a new detection lands on them. Pure numpy, no ROS.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .world import quaternion_to_matrix

__all__ = ["SeenObject", "DetectedObjects", "project"]


def project(points: np.ndarray, K: np.ndarray, cam_pos: Sequence[float], cam_quat: Sequence[float]) -> np.ndarray:
    """(n, 3) base-frame points → (n, 3) pixel u, v and depth along the optical axis (optical frame camera)."""
    pts = np.atleast_2d(np.asarray(points, np.float64))
    R = quaternion_to_matrix(cam_quat)
    pc = (pts - np.asarray(cam_pos, float)) @ R
    z = pc[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = K[0, 0] * pc[:, 0] / z + K[0, 2]
        v = K[1, 1] * pc[:, 1] / z + K[1, 2]
    return np.stack([u, v, z], -1)


@dataclass
class SeenObject:
    """One remembered object: its centre (base frame, metres) and the labels it was seen as.

    ``votes`` sums each label's fused confidence over the frames that saw the object ("" = unknown),
    so one bad view does not relabel it; ``label`` is the label with the most votes. Votes are of
    one model version: a newer model that sees the object starts them afresh (a class taught since
    may be what it is).
    """

    track_id: int
    centre: np.ndarray
    stamp: float
    seq: int
    votes: dict[str, float] = field(default_factory=dict)
    model_version: int = 0

    @property
    def label(self) -> str:
        return max(self.votes.items(), key=lambda kv: (kv[1], kv[0]))[0] if self.votes else ""

    @property
    def confidence(self) -> float:
        """Share of the votes that went to ``label``."""
        total = sum(self.votes.values())
        return self.votes.get(self.label, 0.0) / total if total > 0 else 0.0


class DetectedObjects:
    """Base-frame memory of detected objects; ``best(label)`` is the one to point at.

    Parameters
    ----------
    merge_m : a detection closer than this (horizontally) to a remembered object is that object.
    min_confidence : detections below this fused confidence vote for "unknown".
    border_weight : vote weight of a detection whose box touches the image border (a part of an object).
    """

    def __init__(self, merge_m: float = 0.06, min_confidence: float = 0.0, border_weight: float = 0.25) -> None:
        if not merge_m > 0:
            raise ValueError(f"merge_m must be > 0, got {merge_m!r}")
        self.merge_m = float(merge_m)
        self.min_confidence = float(min_confidence)
        self.border_weight = float(border_weight)
        self.objects_: list[SeenObject] = []
        self._seq = 0

    def update(self, detections: Sequence[tuple], cam_pos: Sequence[float], cam_quat: Sequence[float], stamp: float,
               K: np.ndarray | None = None, image_size: tuple[int, int] | None = None, model_version: int = 0) -> int:
        """Add one frame's detections: (track id, label, known, confidence, centroid in the optical frame[,
        box (x0, y0, x1, y1)]).

        A detection votes for its label on the remembered object it lands on (or starts a new one).
        With ``K`` and ``image_size`` (w, h), remembered objects whose centre projects into this image
        but that no detection confirms are dropped (moved or taken away). Returns how many detections
        had a usable (finite, in front of the camera) centroid.
        """
        R = quaternion_to_matrix(cam_quat)
        p = np.asarray(cam_pos, float)
        fresh = []
        for d in detections:
            tid, label, known, conf, c = d[:5]
            c = np.asarray(c, float).reshape(3)
            if not np.all(np.isfinite(c)) or c[2] <= 0:
                continue
            weight = float(conf)
            if len(d) > 5 and image_size is not None:
                x0, y0, x1, y1 = d[5]
                if x0 <= 2 or y0 <= 2 or x1 >= image_size[0] - 2 or y1 >= image_size[1] - 2:
                    weight *= self.border_weight
            name = str(label) if known and label and conf >= self.min_confidence else ""
            fresh.append((int(tid), name, weight, R @ c + p))
        keep, used = [], set()
        for o in self.objects_:
            near = [i for i, f in enumerate(fresh) if np.linalg.norm(o.centre[:2] - f[3][:2]) < self.merge_m]
            if near:
                i = min(near, key=lambda i: np.linalg.norm(o.centre[:2] - fresh[i][3][:2]))
                if i not in used:
                    used.add(i)
                    tid, name, weight, centre = fresh[i]
                    if int(model_version) != o.model_version:
                        o.votes, o.model_version = {}, int(model_version)
                    o.votes[name] = o.votes.get(name, 0.0) + weight
                    o.centre, o.track_id, o.stamp = centre, tid, float(stamp)
                keep.append(o)
                continue
            if K is not None and image_size is not None and self._in_view(o.centre, K, p, cam_quat, image_size):
                continue  # its place is in view and nothing is detected there: gone
            keep.append(o)
        for i, (tid, name, weight, centre) in enumerate(fresh):
            if i not in used:
                self._seq += 1
                keep.append(SeenObject(tid, centre, float(stamp), self._seq, {name: weight}, int(model_version)))
        self.objects_ = keep
        return len(fresh)

    @staticmethod
    def _in_view(centre: np.ndarray, K: np.ndarray, cam_pos: np.ndarray, cam_quat: Sequence[float],
                 image_size: tuple[int, int], border: float = 0.1) -> bool:
        u, v, z = project(centre[None], K, cam_pos, cam_quat)[0]
        w, h = image_size
        return bool(z > 0 and border * w <= u < (1 - border) * w and border * h <= v < (1 - border) * h)

    def best(self, label: str) -> SeenObject | None:
        """The remembered object seen as ``label`` most (by votes); None when no object is."""
        cands = [o for o in self.objects_ if label and o.label == label]
        return max(cands, key=lambda o: (round(o.votes[label], 6), o.seq)) if cands else None

    def labels(self) -> list[str]:
        return sorted({o.label for o in self.objects_ if o.label})

    def clear(self) -> None:
        self.objects_.clear()
