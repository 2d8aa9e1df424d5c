"""Box geometry, object crops, and the choice of which proposal a teacher means."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from .types import Proposal

__all__ = ["NEUTRAL_RGB", "MASK_GROW", "MIN_INSIDE", "BoxChoice", "box_iou", "choose_in_box", "clip_box",
           "crop_images", "inside_share", "mask_for_box", "pick_in_view", "select_teaching_proposal"]

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
