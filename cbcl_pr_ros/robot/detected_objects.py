"""Where the learner's detections are, in the robot's base frame: what ``point_at`` aims at.

The ``detections`` topic gives each tracked object's position in the base frame (the learner placed
it with the camera pose of the image's stamp) and that pose. Objects seen from earlier views are
kept (the camera looks at one part of the table at a time) until a later view shows their place
without them. A detection is the remembered object of its track id; only a track id not remembered
(its track began anew, e.g. after long out of view) is matched by place. Pure numpy, no ROS.

Whoever publishes on ``detections`` is a stranger: a detection is used only when its position is
finite and within :data:`MAX_PLACE_M` of the base, its confidence a number in [0, 1] and its label
empty or a valid class name; at most :data:`MAX_REMEMBERED` objects are kept (the least recently
seen go first), each with votes for at most :data:`MAX_LABELS` labels, so the memory and the work of
one message stay bounded however many objects and labels were sent before.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from cbcl_pr_ros.core.validation import check_label

from .world import quaternion_to_matrix

__all__ = ["SeenObject", "DetectedObjects", "project", "camera_problem", "MAX_REMEMBERED", "MAX_PLACE_M",
           "MAX_LABELS"]

#: objects remembered at most: a table holds far fewer; without a bound, objects of fresh track ids out
#: of view piled up and every message cost seconds (10,000 after 40 messages of 256)
MAX_REMEMBERED = 256
#: farthest a usable detection lies from the base frame's origin (metres), as far as a camera pose may
MAX_PLACE_M = 1e4
#: labels an object keeps votes for: a real object is seen as a few; without a bound a sender that gave
#: its tracks a new label in every message grew the memory by every label sent (56 KB a message)
MAX_LABELS = 16


def camera_problem(position: Sequence[float], quaternion: Sequence[float]) -> str | None:
    """Why a detections message's camera pose cannot be used, or None: finite numbers, a position within
    MAX_PLACE_M and a unit quaternion (x, y, z, w), as a learner sends. A pose that is no rotation would
    make every remembered object look in view and unconfirmed, and so forgotten."""
    p, q = np.asarray(position, float).reshape(-1), np.asarray(quaternion, float).reshape(-1)
    if p.size != 3 or q.size != 4 or not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
        return "its camera pose is not 3 + 4 finite numbers"
    if float(np.max(np.abs(p))) > MAX_PLACE_M:
        return f"its camera pose is more than {MAX_PLACE_M:g} m from the base"
    if abs(float(np.linalg.norm(q)) - 1.0) > 0.01:
        return f"its camera orientation is not a unit quaternion (norm {float(np.linalg.norm(q)):.3g})"
    return None


def _usable(x: np.ndarray, conf: object, label: object) -> bool:
    """Whether a detection can vote: a finite place within MAX_PLACE_M, a confidence in [0, 1] (NaN, inf
    or 1e308 would outvote every real view), a label that is "" or a class name by the core's one rule
    (``core.validation.check_label``: what a learner sends)."""
    try:
        c = float(conf)
    except (TypeError, ValueError):
        return False
    if not (np.all(np.isfinite(x)) and float(np.max(np.abs(x))) <= MAX_PLACE_M and 0.0 <= c <= 1.0):
        return False
    if label == "":
        return True
    try:
        check_label(label)
    except (TypeError, ValueError):
        return False
    return True


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
    seen: int = 0  # the update that saw it last (which objects are forgotten first past MAX_REMEMBERED)

    @property
    def label(self) -> str:
        return max(self.votes.items(), key=lambda kv: (kv[1], kv[0]))[0] if self.votes else ""

    def vote(self, label: str, weight: float) -> None:
        """Add ``weight`` to ``label``'s votes; past :data:`MAX_LABELS` labels the one with the fewest
        votes goes (the new one, when it has the fewest)."""
        self.votes[label] = self.votes.get(label, 0.0) + weight
        if len(self.votes) > MAX_LABELS:
            del self.votes[min(self.votes.items(), key=lambda kv: (kv[1], kv[0]))[0]]

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
        self._updates = 0

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
        self._updates += 1
        for d in detections:
            tid, label, known, conf, x = d[:5]
            x = np.asarray(x, float).reshape(3)
            if not _usable(x, conf, label):
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
                o.vote(name, weight)
                o.centre, o.track_id, o.stamp, o.seen = centre, tid, float(stamp), self._updates
            elif k not in near_any and camera is not None and K is not None and image_size is not None \
                    and self._in_view(o.centre, K, np.asarray(camera[0], float), camera[1], image_size):
                continue  # its place is in view and nothing is detected there: gone
            keep.append(o)
        used = set(match.values())
        for i, (tid, name, weight, centre) in enumerate(fresh):
            if i not in used:
                self._seq += 1
                keep.append(SeenObject(tid, centre, float(stamp), self._seq, {name: weight}, int(model_version),
                                       self._updates))
        if len(keep) > MAX_REMEMBERED:  # the least recently seen go first; the others keep their order
            dropped = {id(o) for o in sorted(keep, key=lambda o: (o.seen, o.seq))[:len(keep) - MAX_REMEMBERED]}
            keep = [o for o in keep if id(o) not in dropped]
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
        if not self.objects_ or not fresh:
            return match, near_any
        centres = np.array([o.centre[:2] for o in self.objects_], float)
        places = np.array([f[3][:2] for f in fresh], float)
        dist = np.linalg.norm(centres[:, None, :] - places[None, :, :], axis=-1)  # (remembered, fresh)
        for k in np.flatnonzero((dist < self.merge_m).any(axis=1)):
            k = int(k)
            near_any.add(k)
            free = [(float(dist[k, i]), int(i)) for i in np.flatnonzero(dist[k] < self.merge_m) if int(i) not in used]
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
