"""Where are the objects? Table-top segmentation of a depth image, and memory of what was seen where.

Pure numpy: points higher than the table plane by more than a margin are objects; connected
regions of such pixels are separate objects; each is back-projected to a 3-D centre in the base
frame with the camera's pose. A real robot gets the same from its depth (or a configured list of
object poses when it has none).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .world import quaternion_to_matrix

__all__ = ["Detection", "back_project", "project", "segment_tabletop", "object_at_centre", "ObjectMemory"]


@dataclass(frozen=True)
class Detection:
    """One object found on the table: centre (base frame), pixel count and bounding box (x0, y0, x1, y1)."""

    centre: np.ndarray
    pixels: int
    bbox: tuple[int, int, int, int]


def back_project(depth: np.ndarray, K: np.ndarray, cam_pos: Sequence[float], cam_quat: Sequence[float]) -> np.ndarray:
    """(h, w, 3) points in the base frame of every pixel of a metric depth image (optical frame camera)."""
    depth = np.asarray(depth, np.float64)
    if depth.ndim != 2:
        raise ValueError(f"depth must be a 2-D array, got shape {depth.shape}")
    h, w = depth.shape
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    x = (u - K[0, 2]) / K[0, 0] * depth
    y = (v - K[1, 2]) / K[1, 1] * depth
    pts = np.stack([x, y, depth], -1)
    R = quaternion_to_matrix(cam_quat)
    return pts @ R.T + np.asarray(cam_pos, float)


def project(points: np.ndarray, K: np.ndarray, cam_pos: Sequence[float], cam_quat: Sequence[float]) -> np.ndarray:
    """(n, 3) base-frame points → (n, 3) pixel u, v and depth along the optical axis (inverse of back_project)."""
    pts = np.atleast_2d(np.asarray(points, np.float64))
    R = quaternion_to_matrix(cam_quat)
    pc = (pts - np.asarray(cam_pos, float)) @ R
    z = pc[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = K[0, 0] * pc[:, 0] / z + K[0, 2]
        v = K[1, 1] * pc[:, 1] / z + K[1, 2]
    return np.stack([u, v, z], -1)


def _components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    import cv2

    n, labels = cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
    return labels, n - 1


def segment_tabletop(depth: np.ndarray, K: np.ndarray, cam_pos: Sequence[float], cam_quat: Sequence[float],
                     table_height: float, margin_m: float = 0.008, min_pixels: int = 40,
                     max_height_m: float = 0.5, edge_m: float = 0.03) -> list[Detection]:
    """Objects standing on a horizontal table at ``table_height`` (z in the base frame)."""
    pts = back_project(depth, K, cam_pos, cam_quat)
    z = pts[..., 2]
    mask = (z > table_height + margin_m) & (z < table_height + max_height_m)
    # cut along depth jumps, so an object in front of another is not merged with it into one region
    d = np.asarray(depth, np.float64)
    jump = np.zeros(d.shape, bool)
    jump[:, 1:] |= np.abs(np.diff(d, axis=1)) > edge_m
    jump[1:, :] |= np.abs(np.diff(d, axis=0)) > edge_m
    mask &= ~jump
    labels, n = _components(mask)
    out = []
    for i in range(1, n + 1):
        sel = labels == i
        count = int(sel.sum())
        if count < min_pixels:
            continue
        p = pts[sel]
        # centre of the visible part's horizontal extent, half way up its visible height
        top = float(np.percentile(p[:, 2], 95))
        centre = np.array([float(np.median(p[:, 0])), float(np.median(p[:, 1])), (top + table_height) / 2])
        ys, xs = np.nonzero(sel)
        out.append(Detection(centre, count, (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)))
    return out


def object_at_centre(detections: Sequence[Detection], width: int, height: int) -> Detection | None:
    """The detection whose box holds the image centre (the object the camera is looking at), else the closest."""
    if not detections:
        return None
    cx, cy = width / 2, height / 2

    def dist(d: Detection) -> float:
        x0, y0, x1, y1 = d.bbox
        dx = max(x0 - cx, 0.0, cx - x1)
        dy = max(y0 - cy, 0.0, cy - y1)
        return float(np.hypot(dx, dy))

    return min(detections, key=dist)


@dataclass
class ObjectMemory:
    """What the robot believes is where: the latest prediction for each located object.

    Objects closer than ``merge_m`` to a remembered one are taken to be the same object.
    """

    merge_m: float = 0.04
    entries: list[tuple[np.ndarray, str, float, int]] = field(default_factory=list)
    _seq: int = 0

    def update(self, centre: Sequence[float], label: str, confidence: float) -> None:
        c = np.asarray(centre, float)
        self._seq += 1
        self.entries = [e for e in self.entries if np.linalg.norm(e[0][:2] - c[:2]) >= self.merge_m]
        self.entries.append((c, label, float(confidence), self._seq))

    def forget_vanished(self, detections: Sequence[Detection], depth: np.ndarray, K: np.ndarray,
                        cam_pos: Sequence[float], cam_quat: Sequence[float], table_height: float,
                        margin_m: float = 0.008, border_px: int = 4) -> list[str]:
        """Drop remembered objects whose place this frame shows as bare table; returns their labels.

        Objects get moved (the teacher shuffles the table): a remembered centre that projects into
        the image, where the depth shows the table surface and no detection lies within ``merge_m``,
        is no longer there. Places outside the view or hidden behind something are kept.
        """
        if not self.entries:
            return []
        h, w = depth.shape
        uvz = project(np.array([e[0] for e in self.entries]), K, cam_pos, cam_quat)
        pts = back_project(depth, K, cam_pos, cam_quat)
        keep, gone = [], []
        for e, (u, v, z) in zip(self.entries, uvz):
            inside = z > 0 and border_px <= u < w - border_px and border_px <= v < h - border_px
            if inside and not any(np.linalg.norm(d.centre[:2] - e[0][:2]) < self.merge_m for d in detections):
                # the object's footprint: its centre's column down to the table, seen at the centre pixel
                if pts[int(round(v)), int(round(u)), 2] <= table_height + margin_m:
                    gone.append(e[1])
                    continue
            keep.append(e)
        self.entries = keep
        return gone

    def locate(self, label: str) -> np.ndarray | None:
        """Centre of the object most recently predicted as ``label`` (objects get moved), or None."""
        cands = [(seq, pos) for pos, lab, _, seq in self.entries if lab == label and label]
        if not cands:
            return None
        return max(cands, key=lambda t: t[0])[1]

    def labels(self) -> list[str]:
        return sorted({e[1] for e in self.entries if e[1]})

    def clear(self) -> None:
        self.entries.clear()
