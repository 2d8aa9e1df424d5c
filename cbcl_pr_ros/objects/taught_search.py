"""Taught objects looked for in the whole frame, where no proposal stands: windows through the backbone.

The proposals are class-agnostic and miss objects (a transparent cup with no depth, two touching
boxes taken as one, a flat object the height test calls table). A taught object they miss is still
in the picture, and the learner knows what it looks like. :func:`search_taught` looks for it:

1. a grid of square windows at a few scales over the frame (:func:`search_windows`), less those a
   proposal already is (IoU with a proposal at or above ``covered_iou``), at most ``max_windows``,
   picked evenly over the grid, always the same ones for the same frame and proposals;
2. ONE backbone batch of their crops (cropped as a proposal without a mask is), or, when the
   caller has the backbone's dense feature map of the whole frame (before pooling), each window's
   mean of the map's cells under it (:func:`map_vectors`: one forward pass for every window);
   each vector named by ``classify`` (the learner's own prediction: nearest class, distance gate,
   confidence);
3. a window counts only when the gate calls it known, names a class being searched, and its
   confidence is at least ``min_confidence``; non-maximum suppression per class, ``per_class``
   finds of a class; at most ``max_finds``;
4. each find refined (``refine`` rounds): shifted, scaled and stretched copies in one more batch
   per round, the best of the same class kept, so the box fits the object rather than the grid;
5. with depth and ``fit_depth``, the box is fitted to the surface at its centre: the readings
   within ``DEPTH_SPAN`` of the centre's depth, connected to the centre, inside the box grown by a
   quarter (kept only when it stays a plausible part of the box);
6. with depth, a 3D position from the median depth of the box's centre region (NaN without depth
   or without enough readings: no 3D rather than a wrong one).

The work per frame is bounded by the settings (windows, classes, finds, refinement rounds) and
nothing in it is random. The vectors come from the same backbone and crops as a proposal's, so the
learner's distance gate means the same for a window as for an object.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from cbcl_pr_ros.perception.boxes import box_iou, clip_box, crop_images
from cbcl_pr_ros.perception.types import CameraIntrinsics, Proposal

__all__ = ["SearchSettings", "TaughtFind", "search_windows", "search_taught", "refine_boxes", "box_position",
           "depth_box", "map_vectors"]

Box = tuple[int, int, int, int]

#: the most pixels on a side of a frame searched (a larger frame is a stranger's mistake, not a scene)
MAX_SIDE = 8192
#: metres of depth one object's visible surface spans around its centre's reading (a box's face
#: and sides, a mug's rim); the neighbours and the wall behind lie further off
DEPTH_SPAN = 0.05


@dataclass(frozen=True)
class SearchSettings:
    """How a frame is searched for taught classes, and how much work that may take.

    ``scales``: window sides as fractions of the frame's shorter side; ``stride``: the step between
    windows as a fraction of their side; ``max_windows``: windows scored per frame; ``covered_iou``: a
    window this close to a proposal is that proposal (already classified); ``max_classes``: classes
    searched per frame; ``min_confidence``: the least confidence of a find (on top of the gate);
    ``nms_iou``: finds of one class overlapping more are one; ``per_class``: finds of one class per frame
    (a class taught from one object is usually one thing in the picture); ``max_finds``: finds per frame;
    ``refine``: rounds of scoring shifted/scaled/stretched copies of each find, keeping the best;
    ``fit_depth``: fit each find's box to the depth surface at its centre."""

    scales: tuple[float, ...] = (0.15, 0.25, 0.4)
    stride: float = 0.6
    max_windows: int = 128
    covered_iou: float = 0.7
    max_classes: int = 8
    min_confidence: float = 0.8
    nms_iou: float = 0.3
    per_class: int = 1
    max_finds: int = 3
    refine: int = 2
    fit_depth: bool = False

    def __post_init__(self) -> None:
        if not self.scales or len(self.scales) > 6 or not all(
                isinstance(s, (int, float)) and not isinstance(s, bool) and 0.05 <= float(s) <= 1.0
                for s in self.scales):
            raise ValueError(f"scales must be 1-6 fractions in [0.05, 1], got {self.scales!r}")
        if not 0.1 <= float(self.stride) <= 1.0:
            raise ValueError(f"stride must be in [0.1, 1], got {self.stride!r}")
        for name, top in (("max_windows", 512), ("max_classes", 256), ("per_class", 32), ("max_finds", 32),
                          ("refine", 3)):
            v = getattr(self, name)
            low = 0 if name == "refine" else 1
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not low <= v <= top:
                raise ValueError(f"{name} must be an integer in [{low}, {top}], got {v!r}")
        for name in ("covered_iou", "min_confidence", "nms_iou"):
            if not 0.0 <= float(getattr(self, name)) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")


@dataclass(frozen=True)
class TaughtFind:
    """A taught class found where no proposal was: its box (x0, y0, x1, y1), the class, the
    learner's confidence, and its 3D position in metres in the camera's optical frame (NaN without
    depth). ``as_proposal`` gives it the form the object stream carries."""

    box: Box
    label: str
    confidence: float
    centroid: np.ndarray

    def as_proposal(self) -> Proposal:
        """The find as a proposal without a mask (its score: the confidence)."""
        return Proposal(self.box, None, self.centroid.copy(), np.full(3, np.nan), float(self.confidence))


def _check_image(rgb: Any) -> tuple[int, int]:
    if not isinstance(rgb, np.ndarray) or rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"rgb must be an (H, W, 3) uint8 array, got "
                         f"{getattr(rgb, 'shape', type(rgb).__name__)} {getattr(rgb, 'dtype', '')}")
    h, w = rgb.shape[:2]
    if not (8 <= h <= MAX_SIDE and 8 <= w <= MAX_SIDE):
        raise ValueError(f"image of {w}x{h} pixels: each side must be in [8, {MAX_SIDE}]")
    return int(h), int(w)


def _positions(length: int, side: int, step: int) -> list[int]:
    """Window starts spread evenly from 0 to ``length - side`` (both ends included)."""
    if side >= length:
        return [0]
    n = int(math.ceil((length - side) / max(step, 1))) + 1
    return sorted({int(round(v)) for v in np.linspace(0, length - side, n)})


def search_windows(shape: Sequence[int], covered: Sequence[Sequence[float]], settings: SearchSettings) -> list[Box]:
    """The windows searched in an image of ``shape`` (h, w, ...), less those a ``covered`` box (a
    proposal) already is; at most ``settings.max_windows``, spread evenly over the grid."""
    h, w = int(shape[0]), int(shape[1])
    short = min(h, w)
    grid: list[Box] = []
    for s in settings.scales:
        side = max(8, int(round(float(s) * short)))
        step = max(1, int(round(side * float(settings.stride))))
        for y in _positions(h, side, step):
            for x in _positions(w, side, step):
                grid.append((x, y, min(w, x + side), min(h, y + side)))
    cov = [tuple(float(v) for v in b) for b in covered]
    free = [b for b in grid if not any(box_iou(b, c) >= settings.covered_iou for c in cov)]
    if len(free) > settings.max_windows:
        pick = np.linspace(0, len(free) - 1, settings.max_windows).round().astype(int)
        free = [free[i] for i in sorted(set(pick.tolist()))]
    return free


def refine_boxes(box: Sequence[int], shape: Sequence[int]) -> list[Box]:
    """Copies of ``box`` shifted by a quarter of its side, scaled by 0.7 and 1.4, and stretched tall
    and wide, clipped to the image (those left with no area dropped)."""
    x0, y0, x1, y1 = (float(v) for v in box)
    bw, bh = x1 - x0, y1 - y0
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    out: list[Box] = []
    variants = [(cx + dx * bw / 4, cy + dy * bh / 4, bw, bh) for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1))]
    variants += [(cx, cy, bw * f, bh * f) for f in (0.7, 1.4)]
    variants += [(cx, cy, bw * 0.6, bh * 1.3), (cx, cy, bw * 1.3, bh * 0.6)]
    for vx, vy, vw, vh in variants:
        b = clip_box((vx - vw / 2, vy - vh / 2, vx + vw / 2, vy + vh / 2), shape)
        if b is not None and b != tuple(int(v) for v in box) and b not in out:
            out.append(b)
    return out


def box_position(box: Sequence[int], depth: np.ndarray | None, K: CameraIntrinsics | None,
                 min_readings: int = 20) -> np.ndarray:
    """The 3D point (metres, camera optical frame) at the box's centre, at the median depth of the
    box's central half; NaN without depth, intrinsics or ``min_readings`` valid readings there."""
    if depth is None or K is None:
        return np.full(3, np.nan)
    x0, y0, x1, y1 = (int(v) for v in box)
    qx, qy = (x1 - x0) // 4, (y1 - y0) // 4
    patch = np.asarray(depth[y0 + qy:y1 - qy, x0 + qx:x1 - qx], dtype=np.float64)
    valid = patch[np.isfinite(patch) & (patch > 0)]
    if valid.size < min_readings:
        return np.full(3, np.nan)
    z = float(np.median(valid))
    u, v = (x0 + x1) / 2.0, (y0 + y1) / 2.0
    return np.array([(u - K.cx) * z / K.fx, (v - K.cy) * z / K.fy, z])


def depth_box(box: Sequence[int], depth: np.ndarray, grow: float = 0.25, min_share: float = 0.15) -> Box | None:
    """The box of the depth surface at ``box``'s centre: readings within ``DEPTH_SPAN`` of the centre
    region's median depth, 4-connected to the centre region, inside ``box`` grown by ``grow`` of its
    sides. None (keep the box) without enough readings, or when the surface covers less than
    ``min_share`` of the box (a thin rim, a hole) ."""
    import cv2

    h, w = depth.shape[:2]
    x0, y0, x1, y1 = (int(v) for v in box)
    bw, bh = x1 - x0, y1 - y0
    region = clip_box((x0 - grow * bw, y0 - grow * bh, x1 + grow * bw, y1 + grow * bh), (h, w))
    centre = box_position(box, depth, CameraIntrinsics(1.0, 1.0, 0.0, 0.0))
    if region is None or not np.isfinite(centre[2]):
        return None
    rx0, ry0, rx1, ry1 = region
    patch = np.asarray(depth[ry0:ry1, rx0:rx1], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        near = (np.abs(patch - centre[2]) <= DEPTH_SPAN).astype(np.uint8)
    n, labels = cv2.connectedComponents(near, connectivity=4)
    qx, qy = bw // 4, bh // 4
    core = labels[y0 + qy - ry0:y1 - qy - ry0, x0 + qx - rx0:x1 - qx - rx0]
    counts = np.bincount(core.ravel(), minlength=n)
    counts[0] = 0
    if n < 2 or counts.max() == 0:
        return None
    ys, xs = np.nonzero(labels == int(np.argmax(counts)))
    fit = (rx0 + int(xs.min()), ry0 + int(ys.min()), rx0 + int(xs.max()) + 1, ry0 + int(ys.max()) + 1)
    if (fit[2] - fit[0]) * (fit[3] - fit[1]) < min_share * bw * bh:
        return None
    return fit


#: the most cells a side of a dense feature map may have (a 32-pixel stride over an 8192-pixel side)
MAX_MAP_CELLS = 256


def _check_map(feature_map: Any) -> np.ndarray:
    f = np.asarray(feature_map) if isinstance(feature_map, np.ndarray) else None
    if f is None or f.ndim != 3 or not (1 <= f.shape[1] <= MAX_MAP_CELLS and 1 <= f.shape[2] <= MAX_MAP_CELLS) \
            or f.shape[0] < 1 or not np.issubdtype(f.dtype, np.floating) or not np.isfinite(f).all():
        raise ValueError(f"feature_map must be a finite float (d, rows, cols) array with 1-{MAX_MAP_CELLS} "
                         f"cells a side, got {getattr(feature_map, 'shape', type(feature_map).__name__)}")
    return f


def map_vectors(feature_map: np.ndarray, boxes: Sequence[Sequence[int]], shape: Sequence[int]) -> np.ndarray:
    """(n, d) vectors of ``boxes`` (pixels of an image of ``shape``) from a dense (d, rows, cols)
    feature map of the whole image: the mean of the cells a box covers (at least one)."""
    f = _check_map(feature_map)
    d, gh, gw = f.shape
    h, w = int(shape[0]), int(shape[1])
    out = np.empty((len(boxes), d), np.float32)
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        cx0 = min(gw - 1, int(x0 * gw / w))
        cy0 = min(gh - 1, int(y0 * gh / h))
        cx1 = max(cx0 + 1, min(gw, int(math.ceil(x1 * gw / w))))
        cy1 = max(cy0 + 1, min(gh, int(math.ceil(y1 * gh / h))))
        out[i] = f[:, cy0:cy1, cx0:cx1].mean(axis=(1, 2))
    return out


def _score(rgb: np.ndarray, boxes: list[Box], backbone: Any, classify: Callable, wanted: set[str],
           min_conf: float, feature_map: np.ndarray | None = None) -> list[tuple[float, str, Box]]:
    """(confidence, class, box) of each box the learner names as a wanted class, known, confident enough;
    the boxes' vectors from their crops, or from ``feature_map`` when given."""
    if not boxes:
        return []
    if feature_map is not None:
        feats = map_vectors(feature_map, boxes, rgb.shape)
    else:
        props = [Proposal(b, None, np.full(3, np.nan), np.full(3, np.nan), 0.0) for b in boxes]
        feats = np.asarray(backbone.extract(crop_images(rgb, props, margin=0.0, mask_background=False)), np.float32)
    if feats.ndim != 2 or len(feats) != len(boxes):
        raise ValueError(f"the backbone gave {getattr(feats, 'shape', None)} vectors for {len(boxes)} windows")
    preds = classify(feats)
    out = []
    for b, p in zip(boxes, preds):
        conf = float(p.confidence)
        if p.known and p.label in wanted and math.isfinite(conf) and conf >= min_conf:
            out.append((conf, str(p.label), b))
    return out


def _nms(hits: list[tuple[float, str, Box]], iou: float, per_class: int, limit: int) -> list[tuple[float, str, Box]]:
    """Best first (ties: class, then box, so the order never depends on the input's); one per
    overlapping group of the same class, ``per_class`` per class; at most ``limit``."""
    kept: list[tuple[float, str, Box]] = []
    for conf, label, b in sorted(hits, key=lambda t: (-t[0], t[1], t[2])):
        same = [k for k in kept if k[1] == label]
        if len(same) >= per_class or any(box_iou(k[2], b) > iou for k in same):
            continue
        kept.append((conf, label, b))
        if len(kept) >= limit:
            break
    return kept


def search_taught(rgb: np.ndarray, backbone: Any, classify: Callable[[np.ndarray], Sequence[Any]],
                  classes: Sequence[str], proposals: Sequence[Proposal] = (), depth: np.ndarray | None = None,
                  intrinsics: CameraIntrinsics | None = None, settings: SearchSettings = SearchSettings(),
                  feature_map: np.ndarray | None = None) -> list[TaughtFind]:
    """The taught ``classes`` found in the frame away from the ``proposals`` (see the module docstring).

    ``backbone.extract(images)`` gives (n, d) vectors; ``classify(vectors)`` gives one prediction per
    vector with ``label`` ("" = unknown), ``known`` and ``confidence`` (the learner's ``predict``).
    ``classes``: the classes to look for (the first ``max_classes`` of them, in sorted order); none
    means nothing is searched and the backbone is not called. Depth (metres, NaN = no reading) must
    be the image's size to give 3D; otherwise the finds have none. ``feature_map``: the backbone's
    (d, rows, cols) map of the whole frame, to score the windows from (the refinements are still
    cropped)."""
    h, w = _check_image(rgb)
    if feature_map is not None:
        feature_map = _check_map(feature_map)
    wanted = set(sorted({str(c) for c in classes if str(c)})[:settings.max_classes])
    if not wanted:
        return []
    if depth is not None and (not isinstance(depth, np.ndarray) or depth.shape[:2] != (h, w)):
        depth = None
    windows = search_windows(rgb.shape, [p.box for p in proposals], settings)
    hits = _nms(_score(rgb, windows, backbone, classify, wanted, settings.min_confidence, feature_map),
                settings.nms_iou, settings.per_class, settings.max_finds)
    for _ in range(settings.refine if hits else 0):
        variants = [(i, b) for i, (_, _, box) in enumerate(hits) for b in refine_boxes(box, rgb.shape)]
        scored = _score(rgb, [b for _, b in variants], backbone, classify, wanted, settings.min_confidence)
        best = list(hits)
        by_box = {b: (c, lab) for c, lab, b in scored}
        for i, b in variants:
            if b in by_box and by_box[b][1] == hits[i][1] and by_box[b][0] > best[i][0]:
                best[i] = (by_box[b][0], hits[i][1], b)
        if best == hits:
            break
        hits = _nms(best, settings.nms_iou, settings.per_class, settings.max_finds)
    if settings.fit_depth and depth is not None:
        hits = [(c, lab, depth_box(b, depth) or b) for c, lab, b in hits]
    return [TaughtFind(b, label, conf, box_position(b, depth, intrinsics)) for conf, label, b in hits]
