"""Where the learner's detections are, in the robot's base frame: what ``point_at`` aims at.

The ``detections`` topic gives each tracked object's position in the base frame (the learner placed
it with the camera pose of the image's stamp) and that pose. Objects seen from earlier views are
kept (the camera looks at one part of the table at a time) until a later view shows their place
without them. A detection is the remembered object of its track id; only a track id not remembered
(its track began anew, e.g. after long out of view) is matched by place. Pure numpy, no ROS.
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

    def update(self, detections: Sequence[tuple], stamp: float, camera: tuple[Sequence[float], Sequence[float]] | None = None,
               K: np.ndarray | None = None, image_size: tuple[int, int] | None = None, model_version: int = 0) -> int:
        """Add one frame's detections: (track id, label, known, confidence, base-frame position[, box
        (x0, y0, x1, y1)]).

        A detection votes for its label on its remembered object (same track id, else the one it lands
        on) or starts a new one. With ``camera`` (position, quaternion x, y, z, w of the optical frame
        in the base frame), ``K`` and ``image_size`` (w, h), remembered objects whose centre projects
        into this image but that no detection confirms are dropped (moved or taken away). Returns
        how many detections had a usable (finite) position.
        """
        fresh = []
        for d in detections:
            tid, label, known, conf, x = d[:5]
            x = np.asarray(x, float).reshape(3)
            if not np.all(np.isfinite(x)):
                continue
            weight = float(conf)
            if len(d) > 5 and image_size is not None:
                x0, y0, x1, y1 = d[5]
                if x0 <= 2 or y0 <= 2 or x1 >= image_size[0] - 2 or y1 >= image_size[1] - 2:
                    weight *= self.border_weight
            name = str(label) if known and label and conf >= self.min_confidence else ""
            fresh.append((int(tid), name, weight, x))
        match, near_any = self._match(fresh)
        keep = []
        for k, o in enumerate(self.objects_):
            if k in match:
                tid, name, weight, centre = fresh[match[k]]
                if int(model_version) != o.model_version:
                    o.votes, o.model_version = {}, int(model_version)
                o.votes[name] = o.votes.get(name, 0.0) + weight
                o.centre, o.track_id, o.stamp = centre, tid, float(stamp)
            elif k not in near_any and camera is not None and K is not None and image_size is not None \
                    and self._in_view(o.centre, K, np.asarray(camera[0], float), camera[1], image_size):
                continue  # its place is in view and nothing is detected there: gone
            keep.append(o)
        used = set(match.values())
        for i, (tid, name, weight, centre) in enumerate(fresh):
            if i not in used:
                self._seq += 1
                keep.append(SeenObject(tid, centre, float(stamp), self._seq, {name: weight}, int(model_version)))
        self.objects_ = keep
        return len(fresh)

    def _match(self, fresh: list[tuple]) -> tuple[dict[int, int], set[int]]:
        """({remembered object index: detection index}, remembered objects with a detection within
        ``merge_m``): by track id first (0 = untracked never matches), then by the nearest place."""
        by_id = {o.track_id: k for k, o in enumerate(self.objects_) if o.track_id > 0}
        match: dict[int, int] = {}
        for i, f in enumerate(fresh):
            k = by_id.get(f[0]) if f[0] > 0 else None
            if k is not None and k not in match:
                match[k] = i
        used, near_any = set(match.values()), set()
        for k, o in enumerate(self.objects_):
            dist = [(float(np.linalg.norm(o.centre[:2] - f[3][:2])), i) for i, f in enumerate(fresh)]
            near = [(d, i) for d, i in dist if d < self.merge_m]
            if near:
                near_any.add(k)
            free = [(d, i) for d, i in near if i not in used]
            if k not in match and free:
                match[k] = min(free)[1]
                used.add(match[k])
        return match, near_any

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
