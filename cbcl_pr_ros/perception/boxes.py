"""Box geometry, object crops, and the choice of which proposal a teacher means."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from .types import Proposal

__all__ = ["NEUTRAL_RGB", "MASK_GROW", "MIN_INSIDE", "BoxChoice", "box_iou", "choose_in_box", "clip_box",
           "crop_images", "inside_share", "mask_for_box", "nested_parts", "pick_in_view", "select_teaching_proposal",
           "share_extent"]

Box = tuple[int, int, int, int]


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two (x0, y0, x1, y1) half-open boxes; 0 when either is empty."""
    ax0, ay0, ax1, ay1 = (float(v) for v in a)
    bx0, by0, bx1, by1 = (float(v) for v in b)
    iw = min(ax1, bx1) - max(ax0, bx0)
    ih = min(ay1, by1) - max(ay0, by0)
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    union = max(ax1 - ax0, 0.0) * max(ay1 - ay0, 0.0) + max(bx1 - bx0, 0.0) * max(by1 - by0, 0.0) - inter
    return float(inter / union) if union > 0 else 0.0


def nested_parts(proposals: Sequence[Proposal], labels: Sequence[str] | None = None, min_overlap: float = 0.4,
                 max_distance_m: float = 0.05, same_label_overlap: float = 0.2,
                 same_label_distance_m: float = 0.06, close_up_m: float = 0.35, side_piece_m: float = 0.065,
                 side_piece_volume: float = 0.25, side_piece_overlap: float = 0.2,
                 close_up_piece_m: float = 0.08) -> set[int]:
    """Indices of proposals that are a part of a larger one in the same frame: their box lies at least
    ``min_overlap`` inside the larger one's box (intersection over its own area) and their 3D
    centroids are within ``max_distance_m``; or, where both were named the same class (``labels``,
    "" = unknown), within ``same_label_distance_m`` and either at least ``same_label_overlap`` inside
    or each one's 3D centroid inside the other's extent (:func:`share_extent`); pieces both nearer
    than ``close_up_m`` to the camera need no name for the latter; or, whatever the names, a piece within
    ``side_piece_m`` that is small beside the larger one (:func:`side_piece`), within
    ``close_up_piece_m`` when both are nearer than ``close_up_m`` and it lies half inside the larger
    one's 3D extent.

    Why: the depth proposals cut objects apart along height-map creases, which also splits one
    non-convex object (a teddy's head from its body, a bottle's shoulder, a mug's handle) into pieces
    whose boxes overlap; tracked as they come, one object would carry two tracks. Two
    objects side by side overlap less or lie further apart, one behind another lies further in depth,
    and two touching objects of different classes are never merged by the looser rules. In hand-camera
    close-ups (the main job's ``point_at``, objects 0.2-0.3 m away) one object cut by the colour split
    came out as two pieces side by side in the image but sharing one 3D extent, often named apart (the
    backbone names half a duck poorly); that close, a hand camera looks at one object. A mug's handle or
    a teddy's arm cut off beside the body is named after anything (a domino, a lego): the names cannot
    decide there, the piece's size and depth range can. In those close-ups a piece lies farther from
    the body's centroid (a teddy's foot 6 cm below it, a lego's corner beside a proposal that took the
    bottle too, 7.5 cm): 5 cm would leave it a track of its own, which took the object's id from the
    whole (measured on the dumps of 17 main-job runs: 9 more pairs of one object joined, 1 more of two
    among 45,617; no real-set proposal is nearer than 0.42 m). Without depth nothing is a part.

    The rules are computed on arrays, and only for pairs within the largest of the rules' distances:
    a pair loop in Python cost over half a second on a frame at the extractor's object cap.
    """
    n = len(proposals)
    if n == 0:
        return set()
    area = np.array([p.area for p in proposals], dtype=float)
    order = np.argsort(-area, kind="stable")  # the largest first; a part's whole is among those before it
    box = np.array([[float(v) for v in proposals[i].box] for i in order]).reshape(n, 4)
    cen = np.array([np.asarray(proposals[i].centroid, dtype=float).reshape(3) for i in order])
    ext = np.array([np.asarray(proposals[i].size, dtype=float).reshape(3) for i in order])
    depth = np.all(np.isfinite(cen), axis=1)
    names: dict[str, int] = {}
    lab = np.array([names.setdefault(labels[i], len(names)) if labels is not None and labels[i] else -1
                    for i in order], dtype=np.int64)
    rules = _PartRules(min_overlap, max_distance_m, same_label_overlap, same_label_distance_m, close_up_m,
                       side_piece_m, side_piece_volume, side_piece_overlap, close_up_piece_m)
    is_part = np.zeros(n, bool)
    reach = max(max_distance_m, same_label_distance_m, side_piece_m, close_up_piece_m)  # every rule's distance
    ok_small, ok_big = depth & (area[order] > 0), depth
    for a in range(0, n, _PART_ROWS):  # rows in blocks: memory stays bounded for any number of proposals
        b = min(n, a + _PART_ROWS)
        d = cen[a:b, None, :] - cen[None, :b, :]
        apart = np.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2])
        near = (apart <= reach) & ok_small[a:b, None] & ok_big[None, :b]
        near &= np.arange(a, b)[:, None] > np.arange(b)[None, :]  # only larger ones (earlier ranks) can hold it
        i, j = np.nonzero(near)
        pair = np.zeros((b - a, b), bool)
        pair[i, j] = _part_pairs(box, cen, ext, area[order], lab, i + a, j, apart[i, j], rules)
        for r in np.flatnonzero(pair.any(axis=1)) + a:  # in rank order: a part is no whole for a smaller one
            is_part[r] = bool(np.any(pair[r - a, :r] & ~is_part[:r]))
    return {int(order[r]) for r in np.flatnonzero(is_part)}


# Rows of the distance matrix computed at once by nested_parts (rows x all proposals, 3 floats each).
_PART_ROWS = 256


@dataclass(frozen=True)
class _PartRules:
    """nested_parts's thresholds, handed to the pair test as one value."""
    min_overlap: float
    max_distance_m: float
    same_label_overlap: float
    same_label_distance_m: float
    close_up_m: float
    side_piece_m: float
    side_piece_volume: float
    side_piece_overlap: float
    close_up_piece_m: float


def _part_pairs(box: np.ndarray, cen: np.ndarray, ext: np.ndarray, area: np.ndarray, lab: np.ndarray,
                i: np.ndarray, j: np.ndarray, apart: np.ndarray, k: _PartRules) -> np.ndarray:
    """For pairs of ranks ``i`` (the smaller, with depth and an area) and ``j`` (a larger one, with
    depth), ``apart`` between their centroids: whether ``i`` is a part of ``j`` by nested_parts's
    rules, ignoring whether ``j`` is itself a part. The arithmetic of :func:`share_extent` and
    :func:`side_piece` on arrays of pairs, so the answer is the pair-by-pair one."""
    bs, bb = box[i], box[j]
    iw = np.minimum(bs[:, 2], bb[:, 2]) - np.maximum(bs[:, 0], bb[:, 0])
    ih = np.minimum(bs[:, 3], bb[:, 3]) - np.maximum(bs[:, 1], bb[:, 1])
    inside = np.maximum(iw, 0.0) * np.maximum(ih, 0.0) / area[i]
    cs, cb, es, eb = cen[i], cen[j], ext[i], ext[j]
    away = np.sqrt(cen[:, 0] * cen[:, 0] + cen[:, 1] * cen[:, 1] + cen[:, 2] * cen[:, 2])
    close = np.maximum(away[i], away[j]) < k.close_up_m
    alike = (lab[i] >= 0) & (lab[i] == lab[j])
    gap = np.abs(cs - cb)
    shared = np.all(gap <= es / 2, axis=-1) & np.all(gap <= eb / 2, axis=-1)
    lo = np.maximum(cs - es / 2, cb - eb / 2)
    hi = np.minimum(cs + es / 2, cb + eb / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.clip(hi - lo, 0.0, None) / es
    vol = ext[:, 0] * ext[:, 1] * ext[:, 2]
    small_enough = vol[i] <= k.side_piece_volume * vol[j]
    sx, sy, sz = share[:, 0], share[:, 1], share[:, 2]
    stick_out = np.where(sy < sx, sy, sx) <= SIDE_SHARE  # min(x, y) as Python takes it (NaN first stays NaN)
    half_inside = sx * sy * sz >= NESTED_SHARE
    beside = (inside >= k.side_piece_overlap) & (sz >= SIDE_DEPTH_SHARE) & stick_out
    side = small_enough & (beside | ((apart <= k.max_distance_m) & half_inside))
    close_piece = small_enough & (apart <= k.close_up_piece_m) & half_inside
    return (((inside >= k.min_overlap) & (apart <= k.max_distance_m))
            | ((apart <= k.same_label_distance_m) & ((alike & (inside >= k.same_label_overlap))
                                                     | ((alike | close) & shared)))
            | ((apart <= k.side_piece_m) & side)
            | (close & (apart <= k.close_up_piece_m) & close_piece))


def share_extent(a: Proposal, b: Proposal) -> bool:
    """Whether each proposal's 3D centroid lies inside the other's extent (centroid +- size / 2, camera
    frame): two pieces of one object's points. Two objects side by side hold their own centres only;
    for each to hold the other's, their extents must overlap by half of each one's size on every
    axis. False without depth (NaN compares false)."""
    gap = np.abs(a.centroid - b.centroid)
    return bool(np.all(gap <= a.size / 2) and np.all(gap <= b.size / 2))


# side_piece's shares (nested_parts applies the same ones to whole arrays)
SIDE_DEPTH_SHARE, SIDE_SHARE, NESTED_SHARE = 0.9, 0.5, 0.5


def side_piece(small: Proposal, big: Proposal, boxes_overlap: bool = True, max_volume: float = 0.25,
               depth_share: float = SIDE_DEPTH_SHARE, side_share: float = SIDE_SHARE,
               nested_share: float = NESTED_SHARE,
               nested_m: float = 0.05) -> bool:
    """Whether ``small`` looks like a piece cut off ``big`` (a handle, an arm, a strip): at most
    ``max_volume`` of its 3D extent's volume (extents: centroid +- size / 2, camera frame), and either
    beside it (``boxes_overlap``: their image boxes overlap enough), its depth range (z) at least
    ``depth_share`` inside ``big``'s while it sticks out sideways (at most ``side_share`` of its width
    or of its height inside), or within ``nested_m``
    with at least ``nested_share`` of its extent's volume inside ``big``'s. A small object in front
    of or behind a larger one reaches out of its depth range (the main job's dominoes before bottles:
    39-41 % inside) or, seen from above, lies within its width and height (a real box before a clamp)
    and further than ``nested_m`` (6.9 cm or more in the main job). False without depth."""
    lo = np.maximum(small.centroid - small.size / 2, big.centroid - big.size / 2)
    hi = np.minimum(small.centroid + small.size / 2, big.centroid + big.size / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.clip(hi - lo, 0.0, None) / small.size  # of each axis of its extent, inside big's (x, y, z)
    if not np.prod(small.size) <= max_volume * np.prod(big.size):
        return False
    beside = boxes_overlap and share[2] >= depth_share and min(share[0], share[1]) <= side_share
    nested = float(np.linalg.norm(small.centroid - big.centroid)) <= nested_m and np.prod(share) >= nested_share
    return bool(beside or nested)


def clip_box(box: Sequence[float], image_shape: Sequence[int]) -> Box | None:
    """``box`` rounded outwards and clipped to an image of ``image_shape`` (H, W, ...); None if nothing
    of it lies inside the image or a value is not finite."""
    vals = [float(v) for v in box]
    if len(vals) != 4 or not all(np.isfinite(vals)):
        return None
    h, w = int(image_shape[0]), int(image_shape[1])
    x0, y0 = max(0, int(np.floor(vals[0]))), max(0, int(np.floor(vals[1])))
    x1, y1 = min(w, int(np.ceil(vals[2]))), min(h, int(np.ceil(vals[3])))
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1


# The fill outside an object's mask: the ImageNet mean colour, which the backbone's normalisation
# maps to ~0 (the least informative input), so the table and the neighbours leave the crop's vector.
NEUTRAL_RGB = (124, 116, 104)
# The mask is grown by this share of the box's longer side before filling: proposal masks are found at
# the proposer's work resolution and miss the object's rim; a little table is better than a cut object.
MASK_GROW = 0.05


def crop_images(rgb: np.ndarray, proposals: Sequence[Proposal], margin: float = 0.1,
                mask_background: bool = True) -> list[np.ndarray]:
    """Square crops around each proposal's box, for the backbone.

    The box is grown by ``margin`` of its longer side on each side and made square (the backbone
    wants square input and a squashed object is another object), then clipped to the image; so
    a crop holds a little context but mostly the object, whatever its aspect ratio.

    With ``mask_background`` and a proposal found with depth (a mask and a 3D centroid), the crop's
    pixels outside the mask (grown by ``MASK_GROW`` of the box side) are filled with ``NEUTRAL_RGB``:
    a box on a real table holds table, floor and neighbours, and their pixels made another view of
    the same object look like another object (docs/perception.md "Masked crops"). A
    proposal without a mask (a teacher's box) or without depth (the RGB method's colour masks, which
    cut objects wrongly often enough to lose accuracy) is cropped as it is.
    """
    if not isinstance(rgb, np.ndarray) or rgb.ndim != 3:
        raise ValueError(f"rgb must be an (H, W, C) array, got {getattr(rgb, 'shape', type(rgb).__name__)}")
    if not 0.0 <= float(margin) <= 2.0:
        raise ValueError(f"margin must be in [0, 2], got {margin}")
    h, w = rgb.shape[:2]
    out = []
    for p in proposals:
        x0, y0, x1, y1 = p.box
        side = max(x1 - x0, y1 - y0) * (1.0 + 2.0 * float(margin))
        cx, cy = (x0 + x1) / 2.0, (y0 + y1) / 2.0
        box = clip_box((cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2), (h, w))
        if box is None:  # a degenerate box: fall back to its own pixels (at least one)
            box = clip_box((x0, y0, max(x1, x0 + 1), max(y1, y0 + 1)), (h, w)) or (0, 0, 1, 1)
        bx0, by0, bx1, by1 = box
        crop = np.ascontiguousarray(rgb[by0:by1, bx0:bx1])
        if mask_background and p.mask is not None and p.has_depth:
            crop = _fill_outside(crop, p.mask, box, max(x1 - x0, y1 - y0))
        out.append(crop)
    return out


def _fill_outside(crop: np.ndarray, mask: np.ndarray, box: Box, side: int) -> np.ndarray:
    """``crop`` (the pixels of ``box``) with what lies outside ``mask`` (grown) set to the neutral colour.
    A mask of another size than the image, or one empty within the crop, leaves the crop as it is."""
    bx0, by0, bx1, by1 = box
    m = np.asarray(mask)
    if m.ndim != 2 or m.shape[0] < by1 or m.shape[1] < bx1:
        return crop
    m = m[by0:by1, bx0:bx1]
    if not m.any():
        return crop
    k = max(1, int(round(MASK_GROW * side)))
    grown = cv2.dilate(m.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_RECT, (2 * k + 1, 2 * k + 1))) > 0
    out = crop.copy()
    out[~grown] = NEUTRAL_RGB if crop.shape[2] == 3 else 0
    return out


def mask_for_box(proposals: Sequence[Proposal], box: Sequence[float], image_shape: Sequence[int],
                 min_iou: float = 0.5, min_fill: float = 0.1) -> tuple[np.ndarray | None, str]:
    """The object mask for a box drawn by hand, and where it came from.

    Only proposals found with depth count (``crop_images`` masks no others). "proposal": the mask of
    the proposal of best IoU with ``box`` (at least ``min_iou``), as the node would crop it;
    "foreground": else the union of all proposals' masks inside the box, when it fills at least
    ``min_fill`` of it (the part of the box that stands above the support surface); "none": no mask
    (the box is cropped as it is).
    """
    h, w = int(image_shape[0]), int(image_shape[1])
    b = clip_box(box, (h, w))
    if b is None:
        return None, "none"
    with_mask = [p for p in proposals if p.mask is not None and p.has_depth and p.mask.shape == (h, w)]
    best = max(with_mask, key=lambda p: box_iou(p.box, b), default=None)
    if best is not None and box_iou(best.box, b) >= min_iou:
        return best.mask, "proposal"
    x0, y0, x1, y1 = b
    inside = np.zeros((h, w), bool)
    for p in with_mask:
        inside[y0:y1, x0:x1] |= p.mask[y0:y1, x0:x1]
    if inside[y0:y1, x0:x1].mean() >= min_fill:
        return inside, "foreground"
    return None, "none"


# A drawn box holds an object when at least this share of the object's box lies inside it: a box on
# bare table beside a mug, or one that clips a mug's corner, holds no mug.
MIN_INSIDE = 0.5
# Two proposals inside one drawn box are pieces of one object when their image boxes touch (within
# PIECE_GAP_PX) and, with depth, their 3D centroids lie within PIECE_M: the depth split cuts one object
# along a crease into touching pieces; two objects the person put in one box lie further apart.
PIECE_M = 0.08
PIECE_GAP_PX = 4


@dataclass(frozen=True)
class BoxChoice:
    """What a drawn box holds: the proposals of one object (first the main piece), or none and why."""
    indices: tuple[int, ...]
    reason: str = ""

    @property
    def found(self) -> bool:
        return bool(self.indices)


def inside_share(box: Sequence[float], drawn: Sequence[float]) -> float:
    """The share of ``box``'s area (x0, y0, x1, y1) that lies inside ``drawn``; 0 for an empty box."""
    iw = min(float(box[2]), float(drawn[2])) - max(float(box[0]), float(drawn[0]))
    ih = min(float(box[3]), float(drawn[3])) - max(float(box[1]), float(drawn[1]))
    area = max(float(box[2]) - float(box[0]), 0.0) * max(float(box[3]) - float(box[1]), 0.0)
    return float(max(iw, 0.0) * max(ih, 0.0) / area) if area > 0 else 0.0


def _pieces_of_one(a: Proposal, b: Proposal) -> bool:
    """Whether ``a`` and ``b`` look like two pieces of one object (touching boxes, near in 3D)."""
    g = PIECE_GAP_PX
    touch = (min(a.box[2], b.box[2]) + g > max(a.box[0], b.box[0])
             and min(a.box[3], b.box[3]) + g > max(a.box[1], b.box[1]))
    if not touch:
        return False
    if a.has_depth and b.has_depth:
        return float(np.linalg.norm(a.centroid - b.centroid)) <= PIECE_M
    return not (a.has_depth or b.has_depth)  # no depth on either: the boxes are all there is


def _box_text(b: Sequence[float]) -> str:
    return f"({int(b[0])}, {int(b[1])})-({int(b[2])}, {int(b[3])})"


def choose_in_box(proposals: Sequence[Proposal], image_shape: Sequence[int], box: Sequence[float],
                  min_inside: float = MIN_INSIDE) -> BoxChoice:
    """The object a hand-drawn ``box`` (x0, y0, x1, y1 pixels) holds: the proposals with at least
    ``min_inside`` of their box inside it, when they are one object or pieces of one (the piece most
    inside first). None, with a sentence for the person, when the box holds no object that much, or
    holds two objects."""
    clipped = clip_box(box, image_shape)
    if clipped is None:
        return BoxChoice((), "the box lies outside the picture")
    shares = [inside_share(p.box, clipped) for p in proposals]
    held = [i for i, v in enumerate(shares) if v >= min_inside]
    if not held:
        near = max(range(len(shares)), key=shares.__getitem__, default=None)
        if near is None or shares[near] <= 0:
            return BoxChoice((), f"no object found in the box {_box_text(clipped)}")
        return BoxChoice((), f"no object lies mostly inside the box {_box_text(clipped)}: the nearest, at "
                             f"{_box_text(proposals[near].box)}, has {100 * shares[near]:.0f} % of it inside "
                             f"(at least {100 * min_inside:.0f} % needed); draw the box around the whole object")

    def covered(i: int) -> float:  # pixels of the drawn box it fills
        return shares[i] * proposals[i].area

    held.sort(key=lambda i: -covered(i))
    main = proposals[held[0]]
    apart = [i for i in held[1:] if not _pieces_of_one(main, proposals[i])]
    if apart:
        boxes = ", ".join(_box_text(proposals[i].box) for i in [held[0], *apart][:4])
        return BoxChoice((), f"the box holds {1 + len(apart)} objects ({boxes}): draw it around one")
    return BoxChoice(tuple(held))


def select_teaching_proposal(proposals: Sequence[Proposal], image_shape: Sequence[int],
                             box: Sequence[float] | None = None) -> int | None:
    """Index of the proposal a teacher means, or None when there is none.

    With ``box`` (pixels, from the request): the main piece of the object mostly inside it
    (:func:`choose_in_box`, which also says why there is none). Without: the object in view, i.e.
    the proposal with the best area times centrality (a large object at the centre wins over a
    larger one at the border, which a hand camera only half sees).
    """
    if not proposals:
        return None
    h, w = int(image_shape[0]), int(image_shape[1])
    if box is not None:
        choice = choose_in_box(proposals, (h, w), box)
        return choice.indices[0] if choice.found else None
    return pick_in_view([p.box for p in proposals], (h, w))


def pick_in_view(boxes: Sequence[Sequence[float]], image_shape: Sequence[int]) -> int | None:
    """Index of the object in view among (x0, y0, x1, y1) boxes: the best area times squared
    centrality (a large object at the centre wins over a larger one at the border, which a hand
    camera only half sees); None when there is no box."""
    h, w = int(image_shape[0]), int(image_shape[1])
    diag = float(np.hypot(w, h)) / 2
    best_i, best_v = None, -1.0
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        d = float(np.hypot((x0 + x1) / 2 - w / 2, (y0 + y1) / 2 - h / 2)) / diag
        v = max(0.0, float(x1) - float(x0)) * max(0.0, float(y1) - float(y0)) * max(0.0, 1.0 - d) ** 2
        if v > best_v:
            best_i, best_v = i, v
    return best_i
