"""How the main job scores what the robot said against what the simulator knows (no ROS).

The scripted teacher looks at the table from a few poses; each view's detections (the learner's
tracked objects: box, label, fused confidence, centroid in the camera frame) are matched to the
objects in view by box overlap. Across views every answer votes for its label with its confidence
(a quarter at the image border, where only part of an object shows, as the arm node counts them);
an object's answer is the label with the most votes, and one no view found counts as wrong.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from cbcl_pr_ros.perception import box_iou

from .world import quaternion_to_matrix

__all__ = ["TruthObject", "ViewTruth", "TableScore", "match_boxes"]


@dataclass(frozen=True)
class TruthObject:
    """An object in view: name, category, visible box (x0, y0, x1, y1) and visible pixels."""

    name: str
    category: str
    box: tuple[int, int, int, int]
    pixels: int


@dataclass(frozen=True)
class ViewTruth:
    """What the simulator knows about one view: objects in view, camera pose, image size (w, h)."""

    objects: Sequence[TruthObject]
    camera_position: np.ndarray
    camera_quaternion: np.ndarray
    size: tuple[int, int]


def match_boxes(det_boxes: Sequence[Sequence[float]], truth: Sequence[TruthObject],
                min_iou: float = 0.3) -> list[int | None]:
    """Index of the ground-truth object of each detection box (greedy by IoU), or None."""
    pairs = sorted(((box_iou(b, g.box), i, j) for i, b in enumerate(det_boxes) for j, g in enumerate(truth)),
                   reverse=True)
    out: list[int | None] = [None] * len(det_boxes)
    used: set[int] = set()
    for iou, i, j in pairs:
        if iou < min_iou or out[i] is not None or j in used:
            continue
        out[i] = j
        used.add(j)
    return out


@dataclass
class TableScore:
    """Votes and best views of every table object over the views of one phase.

    ``positions`` are the objects' true centres (base frame); detections are duck-typed objects with
    ``x0, y0, x1, y1, label, confidence, id`` and ``centroid.x/y/z`` (cbcl_pr_ros/DetectedObject).
    """

    positions: dict[str, np.ndarray]
    best: dict[str, dict] = field(default_factory=dict)
    votes: dict[str, dict[str, float]] = field(default_factory=dict)
    single: list[bool] = field(default_factory=list)  # every matched detection of every view

    def add_view(self, view: int, objects: Sequence[Any], truth: ViewTruth) -> list[bool | None]:
        """Score one view's detections; returns per detection right/wrong, or None (matches no object)."""
        match = match_boxes([(o.x0, o.y0, o.x1, o.y1) for o in objects], truth.objects)
        flags: list[bool | None] = []
        for o, j in zip(objects, match):
            if j is None:
                flags.append(None)
                continue
            g = truth.objects[j]
            rec = self._record(view, o, g, truth)
            flags.append(rec["correct"])
            self.single.append(rec["correct"])
            weight = float(o.confidence) * (0.25 if rec["border_px"] <= 2 else 1.0)
            self.votes.setdefault(g.name, {})
            self.votes[g.name][rec["predicted"]] = self.votes[g.name].get(rec["predicted"], 0.0) + weight
            old = self.best.get(g.name)
            # localisation from the view that shows the object best: off the border, most visible
            if old is None or (min(rec["border_px"], 20), g.pixels) > (min(old["border_px"], 20), old["visible_px"]):
                self.best[g.name] = rec
        return flags

    def _record(self, view: int, o: Any, g: TruthObject, truth: ViewTruth) -> dict:
        label = o.label or "unknown"
        c = np.array([o.centroid.x, o.centroid.y, o.centroid.z])
        R = quaternion_to_matrix(truth.camera_quaternion)
        loc = float(np.linalg.norm((R @ c + truth.camera_position)[:2] - self.positions[g.name][:2])) \
            if np.all(np.isfinite(c)) else float("nan")
        w, h = truth.size
        border = min(o.x0, o.y0, w - o.x1, h - o.y1)
        return {"object": g.name, "truth": g.category, "predicted": label,
                "confidence": round(float(o.confidence), 3), "track": int(o.id), "view": view,
                "correct": label == g.category, "localisation_error_m": round(loc, 4),
                "visible_px": int(g.pixels), "border_px": int(border)}

    def answers(self, table: Sequence[tuple[str, str]]) -> list[dict]:
        """Each (name, category) of the table: its voted answer; objects no view detected count as wrong."""
        out = []
        for name, category in table:
            rec = self.best.get(name) or {"object": name, "truth": category, "predicted": "(not found)",
                                          "confidence": 0.0, "track": 0, "view": -1, "correct": False,
                                          "localisation_error_m": float("nan")}
            vt = self.votes.get(name)
            if vt:
                label = max(vt, key=lambda k: (vt[k], k))
                rec.update({"predicted": label, "correct": label == category,
                            "confidence": round(vt[label] / max(sum(vt.values()), 1e-9), 3),
                            "votes": {k: round(x, 3) for k, x in vt.items()}})
            out.append(rec)
        return out
