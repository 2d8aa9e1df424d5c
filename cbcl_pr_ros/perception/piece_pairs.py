"""Touching pieces that may be one object, and whether recognition says they are.

The proposer joins the touching pieces of one object where geometry and colour say so
(``ProposalRules.join_m``). Where they cannot, a shape or colour rule that joined them would also
join two objects side by side: a duck's beak differs in colour from its head, a seated teddy's head
lies 6 cm from its body, a lying bunny's head and body overlap little; two mugs touching look as
much like one thing. The learner can tell them apart once the object is taught: the two pieces
together look *more* like the taught object than the larger piece alone (the whole duck is more
duck than its head), two objects side by side look *less* like either one than it alone (two mugs
are a poor mug). So the extractor sends, with each frame, every nearby touching pair's union
(:func:`candidate_pairs`, :func:`union_proposal`) and its vector, and the learner keeps a union
only where its classifier says so (:func:`recognised_joins`). Untaught objects are never joined:
without a class there is nothing to recognise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Collection, Sequence

import cv2
import numpy as np

from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .types import CameraIntrinsics, Proposal

__all__ = ["JoinCheck", "candidate_pairs", "union_proposal", "recognised_joins", "join_groups", "MAX_CANDIDATES",
           "JOIN_SLACK"]

MAX_CANDIDATES = 16  # most candidate pairs one frame may carry (a bound on the message, not a setting)
# How much farther than the larger piece a union may lie from its class and still join, where the
# two pieces are named alike or were joined in the last frame. In the main job's logged pairs a union
# of one object's pieces lay 0.80-1.04 times the larger piece's distance, often within 1 % of it (a
# tie that flipped the join frame to frame); two objects' unions lay 1.04-1.66 times it, all but one
# (a bottle misnamed "ball" beside a domino also named "ball": 1.00, joined either way).
JOIN_SLACK = 0.03


@dataclass(frozen=True)
class JoinCheck:
    """Which touching pairs the extractor sends: centroids at most ``max_centroid_m`` apart, masks
    within ``touch_px`` pixels, nearest 3D points (of the pixels where they meet) within
    ``contact_m`` (one object's surface cut in two; a piece before another object is a centimetre
    or more in front of it), at most ``limit`` pairs (nearest first; 0 = none)."""

    max_centroid_m: float = 0.1
    touch_px: int = 2
    contact_m: float = 0.015
    limit: int = 3

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_centroid_m) and self.max_centroid_m > 0):
            raise ValueError(f"max_centroid_m must be > 0, got {self.max_centroid_m!r}")
        if not (math.isfinite(self.contact_m) and self.contact_m > 0):
            raise ValueError(f"contact_m must be > 0, got {self.contact_m!r}")
        for name, v, hi in (("touch_px", self.touch_px, 20), ("limit", self.limit, MAX_CANDIDATES)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= hi:
                raise ValueError(f"{name} must be an integer in [0, {hi}], got {v!r}")


def _points(depth: np.ndarray, K: CameraIntrinsics, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    z = depth[ys, xs].astype(np.float64)
    ok = np.isfinite(z) & (z > 0)
    ys, xs, z = ys[ok], xs[ok], z[ok]
    return np.stack([(xs - K.cx) / K.fx * z, (ys - K.cy) / K.fy * z, z], axis=1)


def _contact(a: Proposal, b: Proposal, depth: np.ndarray, K: CameraIntrinsics, touch_px: int,
             most: int = 200) -> float:
    """Smallest 3D distance between the pixels of ``a`` and ``b`` that lie within ``touch_px`` of
    the other's mask; inf when the masks do not come that close or the pixels have no depth."""
    h, w = a.mask.shape
    x0 = max(0, min(a.box[0], b.box[0]) - touch_px - 1)
    y0 = max(0, min(a.box[1], b.box[1]) - touch_px - 1)
    x1 = min(w, max(a.box[2], b.box[2]) + touch_px + 1)
    y1 = min(h, max(a.box[3], b.box[3]) + touch_px + 1)
    ma, mb = a.mask[y0:y1, x0:x1], b.mask[y0:y1, x0:x1]
    kernel = np.ones((2 * touch_px + 1, 2 * touch_px + 1), np.uint8)
    sides = []
    for me, other in ((ma, mb), (mb, ma)):
        near = me & (cv2.dilate(other.astype(np.uint8), kernel) > 0)
        ys, xs = np.nonzero(near)
        if not len(ys):
            return math.inf
        step = max(1, len(ys) // most)
        pts = _points(depth, K, ys[::step] + y0, xs[::step] + x0)
        if not len(pts):
            return math.inf
        sides.append(pts)
    return float(np.sqrt(((sides[0][:, None] - sides[1][None]) ** 2).sum(-1)).min())


def candidate_pairs(proposals: Sequence[Proposal], depth: np.ndarray | None, intrinsics: CameraIntrinsics | None,
                    check: JoinCheck = JoinCheck()) -> list[tuple[int, int]]:
    """Index pairs (i < j) of proposals that touch in 3D and lie near each other, nearest first (at
    most ``check.limit``). ``depth`` in metres, registered to the colour image (of another size it is
    resized to the masks' size, as ``propose`` does), ``intrinsics`` those of the colour image; only
    proposals with a mask and a 3D centroid count. No depth or no intrinsics: no pairs."""
    if check.limit == 0 or depth is None or intrinsics is None or len(proposals) < 2:
        return []
    shape = next((np.shape(p.mask) for p in proposals if p.mask is not None), None)
    depth = np.asarray(depth, np.float32)
    if shape is None or depth.ndim != 2:
        return []
    if depth.shape != shape:
        depth = cv2.resize(depth, (shape[1], shape[0]), interpolation=cv2.INTER_NEAREST)
    usable = [i for i, p in enumerate(proposals)
              if p.mask is not None and p.has_depth and np.shape(p.mask) == shape]
    near = []
    for k, i in enumerate(usable):
        for j in usable[k + 1:]:
            d = float(np.linalg.norm(proposals[i].centroid - proposals[j].centroid))
            if d <= check.max_centroid_m:
                near.append((d, i, j))
    out = []
    for _, i, j in sorted(near):
        if _contact(proposals[i], proposals[j], depth, intrinsics, check.touch_px) <= check.contact_m:
            out.append((i, j))
            if len(out) == check.limit:
                break
    return out


def union_proposal(a: Proposal, b: Proposal) -> Proposal:
    """The proposal two pieces make together: both boxes, both masks, the 3D extent holding both
    extents (centroid at its middle), the better score."""
    box = (min(a.box[0], b.box[0]), min(a.box[1], b.box[1]), max(a.box[2], b.box[2]), max(a.box[3], b.box[3]))
    mask = None if a.mask is None or b.mask is None or a.mask.shape != b.mask.shape else (a.mask | b.mask)
    lo = np.minimum(a.centroid - a.size / 2, b.centroid - b.size / 2)
    hi = np.maximum(a.centroid + a.size / 2, b.centroid + b.size / 2)
    return Proposal(box, mask, (lo + hi) / 2, hi - lo, max(a.score, b.score))


def _volume(p: Proposal) -> float:
    v = float(np.prod(p.size))
    return v if math.isfinite(v) else float(p.area)


def recognised_joins(pairs: Sequence[tuple[int, int]], proposals: Sequence[Proposal], pieces: Sequence[Any],
                     unions: Sequence[Any], held: Collection[int] = ()) -> list[int]:
    """Indices of the ``pairs`` to join: those whose union (prediction ``unions[k]``) is known as the
    class the larger piece (by 3D extent) is known as, and lies nearer that class than the larger
    piece alone (``distance``, core ``Prediction``); or at most ``JOIN_SLACK`` farther where the
    smaller piece is known as that class too, or the pair was joined a moment ago (``held``: pair
    indices whose union lies where a union was joined in the last frame).

    Two objects side by side make a union farther from either's class than each alone; pieces of
    one object make a union nearer it. Pieces without a name (unknown) are never joined, nor
    predictions without a distance (the gate off). A piece may be in several chosen pairs (a
    teddy's head and arm each join its body): :func:`join_groups` makes one object of them."""
    chosen = []
    for k, ((i, j), u) in enumerate(zip(pairs, unions)):
        big, small = (i, j) if _volume(proposals[i]) >= _volume(proposals[j]) else (j, i)
        p = pieces[big]
        if not (p.known and u.known and u.label == p.label):
            continue
        alike = bool(pieces[small].known) and pieces[small].label == p.label
        slack = JOIN_SLACK if alike or k in held else 0.0
        d_big, d_union = float(p.distance), float(u.distance)
        if math.isfinite(d_big) and math.isfinite(d_union) and d_union < d_big * (1.0 + slack):
            chosen.append(k)
    return chosen


def join_groups(n: int, pairs: Sequence[tuple[int, int]], chosen: Sequence[int]) -> list[list[int]]:
    """The ``n`` pieces grouped by the chosen pairs (a chain of pairs makes one group), each group
    its members in order, groups in the order of their first member."""
    if not chosen:
        return [[i] for i in range(n)]
    ia = np.array([pairs[k][0] for k in chosen])
    ib = np.array([pairs[k][1] for k in chosen])
    _, label = connected_components(coo_matrix((np.ones(len(chosen)), (ia, ib)), shape=(n, n)), directed=False)
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(label):
        groups.setdefault(int(g), []).append(i)
    return sorted(groups.values(), key=lambda members: members[0])
