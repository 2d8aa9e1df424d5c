"""What one object is: the rules that join the pieces of one object, and their thresholds in one table.

First the proposer cuts a frame into pieces and joins some back, within one segmentation, by
geometry and colour, before any class is known (``perception.proposals``, thresholds in
``ProposalRules``): a blob less convex than ``split_solidity`` is split where the boundary evidence
(``region_*``) says two objects (``regions.split_nonconvex``), one with level tops ``layer_gap_m``
apart is split per height (``regions.split_layers``), and touching pieces within ``join_m`` of one
colour (``join_colour_de``) and one body (``join_share``) are joined (``proposals._join_pieces``).
After it, the rules below decide, in this order:

1. **Candidate joins** (extractor, :func:`candidate_pairs`): touching pieces near each other in 3D
   whose union crop is sent with the frame. A shape or colour rule that joined them would also join
   two objects side by side: a duck's beak differs in colour from its head, a seated teddy's head lies
   6 cm from its body; two mugs touching look as much like one thing.
2. **Recognised joins** (learner, :func:`recognised_joins`, :func:`join_recognised`): a candidate
   union is kept where the classifier says the two pieces together look *more* like the taught
   object than the larger piece alone (the whole duck is more duck than its head; two mugs are a
   poor mug), or a little less (``join_slack``) where both pieces are named alike or the same join
   was made in the last frame (``hold_m``). Untaught objects are never joined.
3. **Parts** (learner, :func:`nested_parts`): a proposal that lies inside or beside a larger one
   (a mug's handle, a teddy's foot) is that object and gets no track of its own.

Every threshold of these rules is a field of :class:`PiecePolicy` (``PIECES``: the measured values);
benches and tests change a copy (``dataclasses.replace``) to measure what a rule is worth.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Collection, Sequence

import cv2
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from cbcl_pr_ros.perception.types import CameraIntrinsics, Proposal

from .frame import ObjectFrame

__all__ = ["PiecePolicy", "PIECES", "MAX_CANDIDATES", "candidate_pairs", "union_proposal", "recognised_joins",
           "join_groups", "join_recognised", "held_joins", "nested_parts", "share_extent", "side_piece"]

MAX_CANDIDATES = 16  # most candidate pairs one frame may carry (a bound on the message, not a setting)


@dataclass(frozen=True)
class PiecePolicy:
    """The thresholds of every rule that joins pieces after the proposer (distances in metres).

    Candidate joins (the extractor sends these pairs' unions): centroids at most ``pair_centroid_m``
    apart, masks within ``pair_touch_px`` pixels, nearest 3D points where they meet within
    ``pair_contact_m`` (one object's surface cut in two; a piece before another object is a
    centimetre or more in front of it), at most ``join_candidates`` pairs (nearest first; 0 = none).

    Recognised joins: a union may lie ``join_slack`` (a share) farther from its class than the larger
    piece and still join where the two pieces are named alike or the join was made in the last frame,
    i.e. its union lies within ``hold_m`` of a union joined then. In the main job's logged pairs a
    union of one object's pieces lay 0.80-1.04 times the larger piece's distance, often within 1 % of
    it (a tie that flipped the join frame to frame); two objects' unions lay 1.04-1.66 times it.

    Parts (:func:`nested_parts`): a piece whose box lies ``part_overlap`` inside a larger one's
    (intersection over its own area) within ``part_distance_m``; or, both named the same class, within
    ``same_label_distance_m`` and ``same_label_overlap`` inside or sharing one 3D extent (no name needed
    when both are nearer than ``close_up_m``); or a small piece beside it (:func:`side_piece`: at most
    ``side_piece_volume`` of its volume, ``side_depth_share`` of its depth range inside while at most
    ``side_share`` of its width or height is, boxes ``side_piece_overlap`` inside) within
    ``side_piece_m``, or half inside its extent (``nested_share``) within ``part_distance_m``, or
    within ``close_up_piece_m`` in a close-up.
    """

    pair_centroid_m: float = 0.1
    pair_touch_px: int = 2
    pair_contact_m: float = 0.015
    join_candidates: int = 3
    join_slack: float = 0.03
    hold_m: float = 0.02
    part_overlap: float = 0.4
    part_distance_m: float = 0.05
    same_label_overlap: float = 0.2
    same_label_distance_m: float = 0.06
    close_up_m: float = 0.35
    side_piece_m: float = 0.065
    side_piece_volume: float = 0.25
    side_piece_overlap: float = 0.2
    close_up_piece_m: float = 0.08
    side_depth_share: float = 0.9
    side_share: float = 0.5
    nested_share: float = 0.5

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "int":
                hi = MAX_CANDIDATES if f.name == "join_candidates" else 20
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= hi:
                    raise ValueError(f"{f.name} must be an integer in [0, {hi}], got {v!r}")
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                    or not math.isfinite(float(v)) or v < 0:
                raise ValueError(f"{f.name} must be a finite number >= 0, got {v!r}")
        for name in ("pair_centroid_m", "pair_contact_m"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("part_overlap", "same_label_overlap", "side_piece_overlap", "side_piece_volume",
                     "side_depth_share", "side_share", "nested_share", "join_slack"):
            if not getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")

    @property
    def part_reach_m(self) -> float:
        """The farthest any part rule reaches: pairs farther apart are never a part and its whole."""
        return max(self.part_distance_m, self.same_label_distance_m, self.side_piece_m, self.close_up_piece_m)


PIECES = PiecePolicy()


# ---------------------------------------------------------------------------------------- 1. candidates
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
                    policy: PiecePolicy = PIECES) -> list[tuple[int, int]]:
    """Index pairs (i < j) of proposals that touch in 3D and lie near each other, nearest first (at
    most ``policy.join_candidates``). ``depth`` in metres, registered to the colour image (of another
    size it is resized to the masks' size, as ``propose`` does), ``intrinsics`` those of the colour
    image; only proposals with a mask and a 3D centroid count. No depth or no intrinsics: no pairs."""
    if policy.join_candidates == 0 or depth is None or intrinsics is None or len(proposals) < 2:
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
            if d <= policy.pair_centroid_m:
                near.append((d, i, j))
    out = []
    for _, i, j in sorted(near):
        if _contact(proposals[i], proposals[j], depth, intrinsics, policy.pair_touch_px) <= policy.pair_contact_m:
            out.append((i, j))
            if len(out) == policy.join_candidates:
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


# ---------------------------------------------------------------------------------------- 2. recognised
def _volume(p: Proposal) -> float:
    v = float(np.prod(p.size))
    return v if math.isfinite(v) else float(p.area)


def recognised_joins(pairs: Sequence[tuple[int, int]], proposals: Sequence[Proposal], pieces: Sequence[Any],
                     unions: Sequence[Any], held: Collection[int] = (), policy: PiecePolicy = PIECES) -> list[int]:
    """Indices of the ``pairs`` to join: those whose union (prediction ``unions[k]``) is known as the
    class the larger piece (by 3D extent) is known as, and lies nearer that class than the larger
    piece alone (``distance``, core ``Prediction``); or at most ``policy.join_slack`` farther where the
    smaller piece is known as that class too, or the pair was joined a moment ago (``held``: pair
    indices whose union lies where a union was joined in the last frame, :func:`held_joins`).

    Pieces without a name (unknown) are never joined, nor predictions without a distance (the gate
    off). A piece may be in several chosen pairs (a teddy's head and arm each join its body):
    :func:`join_groups` makes one object of them."""
    chosen = []
    for k, ((i, j), u) in enumerate(zip(pairs, unions)):
        big, small = (i, j) if _volume(proposals[i]) >= _volume(proposals[j]) else (j, i)
        p = pieces[big]
        if not (p.known and u.known and u.label == p.label):
            continue
        alike = bool(pieces[small].known) and pieces[small].label == p.label
        slack = policy.join_slack if alike or k in held else 0.0
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


def held_joins(unions: np.ndarray, last_joined: np.ndarray, policy: PiecePolicy = PIECES) -> set[int]:
    """Indices of the (n, 3) ``unions`` centroids that lie within ``policy.hold_m`` of one of the (m, 3)
    centroids joined in the last frame (both in one frame of reference): that join, seen again."""
    if not len(last_joined) or not len(unions):
        return set()
    with np.errstate(invalid="ignore"):
        near = np.linalg.norm(unions[:, None, :] - last_joined[None, :, :], axis=2) <= policy.hold_m
    return {int(k) for k in np.flatnonzero(near.any(axis=1))}


def join_recognised(frame: ObjectFrame, predictions: Sequence[Any], union_predictions: Sequence[Any],
                    held: set[int], policy: PiecePolicy = PIECES) -> tuple[ObjectFrame, list[Any], list[Proposal]]:
    """The frame and its predictions with the pieces that recognition joins made one object each:
    the union of the group's proposals, with the vector and prediction of its chosen pair of
    clearest gain (the union nearest its class), in its first piece's place; and the chosen pairs'
    unions. ``held``: the candidate joins that were joined in the last frame."""
    joins = frame.joins
    chosen = recognised_joins(joins.pairs, frame.proposals, predictions, union_predictions, held, policy)
    if not chosen:
        return frame, list(predictions), []
    props, preds, rows = [], [], []
    for members in join_groups(len(frame.proposals), joins.pairs, chosen):
        if len(members) == 1:
            i = members[0]
            props.append(frame.proposals[i])
            preds.append(predictions[i])
            rows.append(frame.features[i])
            continue
        mine = [k for k in chosen if joins.pairs[k][0] in members]
        best = min(mine, key=lambda k: float(union_predictions[k].distance))
        union = frame.proposals[members[0]]
        for i in members[1:]:
            union = union_proposal(union, frame.proposals[i])
        props.append(union)
        preds.append(union_predictions[best])
        rows.append(joins.features[best])
    joined = ObjectFrame(props, np.stack(rows).astype(frame.features.dtype), frame.shape)
    return joined, preds, [joins.unions[k] for k in chosen]


# ---------------------------------------------------------------------------------------- 3. parts
def nested_parts(proposals: Sequence[Proposal], labels: Sequence[str] | None = None,
                 policy: PiecePolicy = PIECES) -> set[int]:
    """Indices of proposals that are a part of a larger one in the same frame (the rules and their
    thresholds: :class:`PiecePolicy`); ``labels`` the classes they were named ("" = unknown).

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
    whole (measured on the dumps of the main job's runs: 9 more pairs of one object joined, 1 more of two
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
    is_part = np.zeros(n, bool)
    reach = policy.part_reach_m
    ok_small, ok_big = depth & (area[order] > 0), depth
    for a in range(0, n, _PART_ROWS):  # rows in blocks: memory stays bounded for any number of proposals
        b = min(n, a + _PART_ROWS)
        d = cen[a:b, None, :] - cen[None, :b, :]
        apart = np.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2])
        near = (apart <= reach) & ok_small[a:b, None] & ok_big[None, :b]
        near &= np.arange(a, b)[:, None] > np.arange(b)[None, :]  # only larger ones (earlier ranks) can hold it
        i, j = np.nonzero(near)
        pair = np.zeros((b - a, b), bool)
        pair[i, j] = _part_pairs(box, cen, ext, area[order], lab, i + a, j, apart[i, j], policy)
        for r in np.flatnonzero(pair.any(axis=1)) + a:  # in rank order: a part is no whole for a smaller one
            is_part[r] = bool(np.any(pair[r - a, :r] & ~is_part[:r]))
    return {int(order[r]) for r in np.flatnonzero(is_part)}


# Rows of the distance matrix computed at once by nested_parts (rows x all proposals, 3 floats each).
_PART_ROWS = 256


def _part_pairs(box: np.ndarray, cen: np.ndarray, ext: np.ndarray, area: np.ndarray, lab: np.ndarray,
                i: np.ndarray, j: np.ndarray, apart: np.ndarray, k: PiecePolicy) -> np.ndarray:
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
    stick_out = np.where(sy < sx, sy, sx) <= k.side_share  # min(x, y) as Python takes it (NaN first stays NaN)
    half_inside = sx * sy * sz >= k.nested_share
    beside = (inside >= k.side_piece_overlap) & (sz >= k.side_depth_share) & stick_out
    side = small_enough & (beside | ((apart <= k.part_distance_m) & half_inside))
    close_piece = small_enough & (apart <= k.close_up_piece_m) & half_inside
    return (((inside >= k.part_overlap) & (apart <= k.part_distance_m))
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


def side_piece(small: Proposal, big: Proposal, boxes_overlap: bool = True, nested_m: float | None = None,
               policy: PiecePolicy = PIECES) -> bool:
    """Whether ``small`` looks like a piece cut off ``big`` (a handle, an arm, a strip): at most
    ``policy.side_piece_volume`` of its 3D extent's volume (extents: centroid +- size / 2, camera
    frame), and either beside it (``boxes_overlap``: their image boxes overlap enough), its depth range
    (z) at least ``side_depth_share`` inside ``big``'s while it sticks out sideways (at most
    ``side_share`` of its width or of its height inside), or within ``nested_m`` (default
    ``part_distance_m``) with at least ``nested_share`` of its extent's volume inside ``big``'s. A
    small object in front of or behind a larger one reaches out of its depth range (the main job's
    dominoes before bottles: 39-41 % inside) or, seen from above, lies within its width and height (a
    real box before a clamp) and further than ``nested_m`` (6.9 cm or more in the main job). False
    without depth."""
    nested_m = policy.part_distance_m if nested_m is None else nested_m
    lo = np.maximum(small.centroid - small.size / 2, big.centroid - big.size / 2)
    hi = np.minimum(small.centroid + small.size / 2, big.centroid + big.size / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.clip(hi - lo, 0.0, None) / small.size  # of each axis of its extent, inside big's (x, y, z)
    if not np.prod(small.size) <= policy.side_piece_volume * np.prod(big.size):
        return False
    beside = (boxes_overlap and share[2] >= policy.side_depth_share
              and min(share[0], share[1]) <= policy.side_share)
    nested = (float(np.linalg.norm(small.centroid - big.centroid)) <= nested_m
              and np.prod(share) >= policy.nested_share)
    return bool(beside or nested)
