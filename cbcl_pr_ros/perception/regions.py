"""Splitting a blob of touching objects by the evidence along whole boundaries.

A real depth camera's edge between two touching objects is ragged: mixed pixels, holes and noise
leave gaps in the cut lines, and one gap is enough for connected components to merge the two
objects. A component that looks like several objects (not convex, not a ring) is over-segmented
(the pieces its thickened cut lines leave, grown back by OpenCV's colour watershed, so a boundary
follows colour where depth is ambiguous), and neighbouring pieces are joined again unless their
*whole* shared boundary says two objects: the median depth step across it (pixels a few apart,
over the mixed pixels), or a crease along most of it between pieces of different colour. A gap in
a cut line is a few pixels of a boundary, so it no longer decides.

Also here: level tops at different heights (``split_layers``), and objects the depth camera reads no depth
on, found as holes in its readings enclosed by the table (``unseen_objects``).
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from scipy.ndimage import binary_fill_holes, distance_transform_edt
from scipy.ndimage import find_objects as ndimage_find_objects

__all__ = ["BoundaryRule", "oversegment", "boundary_stats", "merge_pieces", "group_labels", "label_areas", "nonzero_box",
           "find_boxes", "outline_points",
           "filled_area", "solidity", "split_nonconvex", "flat_pixels", "split_layers", "unseen_objects"]


@dataclass(frozen=True)
class BoundaryRule:
    """When two neighbouring pieces are two objects.

    step_m / step_rel : the median depth step across the boundary exceeds ``step_m + step_rel * z``;
    crease_share / colour_de : or at least ``crease_share`` of the boundary's pixel pairs cross a crease
        (0 = off) and the two pieces' mean Lab colours differ by at least ``colour_de`` (0 = any colours).
    offset_px : pixel pairs compared across the boundary are this far apart (jumps over mixed pixels).
    min_core_px : pieces left by the cut lines smaller than this are no seed (they join a neighbour).
    core_dilate_px : the cut lines are thickened by this many pixels before the pieces are taken, so a
        gap of a pixel or two in them no longer joins two objects.
    """

    step_m: float = 0.02
    step_rel: float = 0.02
    crease_share: float = 0.7
    offset_px: int = 3
    min_core_px: int = 8
    core_dilate_px: int = 1
    colour_de: float = 20.0


def oversegment(fg: np.ndarray, cut: np.ndarray, rgb_small: np.ndarray, fillable: np.ndarray,
                rule: BoundaryRule) -> np.ndarray:
    """Pieces (int32 labels, 0 = none): the components of ``fg`` minus ``cut`` of at least
    ``min_core_px`` pixels, grown over the cut pixels and ``fillable`` holes by a colour watershed."""
    if rule.core_dilate_px > 0:  # close the gaps of ragged cut lines
        k = 2 * int(rule.core_dilate_px) + 1
        cut = cv2.dilate(cut.astype(np.uint8), np.ones((k, k), np.uint8)).astype(bool)
    n, lab, areas = label_areas((fg & ~cut).astype(np.uint8), 4)
    keep = np.zeros(n, bool)
    keep[1:] = areas[1:] >= rule.min_core_px
    remap = np.zeros(n, np.int32)
    remap[keep] = np.arange(1, int(keep.sum()) + 1)
    markers = remap[lab]
    k = int(keep.sum())
    if k == 0:
        return markers
    region = fg | fillable
    markers[~region] = k + 1  # everything else floods as one background seed
    ws = cv2.watershed(np.ascontiguousarray(rgb_small[..., ::-1]), markers)
    ws[(ws < 1) | (ws > k)] = 0
    ws[~region] = 0
    return ws


def _pairs(seg: np.ndarray, s: int):
    """Pixel pairs ``s`` apart (along x and y) whose pieces differ, both nonzero: flat indices (p, q)."""
    h, w = seg.shape
    idx = np.arange(h * w).reshape(h, w)
    out_p, out_q = [], []
    for a, b, ia, ib in ((seg[:, :-s], seg[:, s:], idx[:, :-s], idx[:, s:]),
                         (seg[:-s, :], seg[s:, :], idx[:-s, :], idx[s:, :])):
        m = (a != b) & (a > 0) & (b > 0)
        out_p.append(ia[m])
        out_q.append(ib[m])
    return np.concatenate(out_p), np.concatenate(out_q)


def boundary_stats(seg: np.ndarray, z: np.ndarray, crease: np.ndarray,
                   rule: BoundaryRule) -> tuple[np.ndarray, ...]:
    """Per neighbouring pair of pieces (a < b): pixel pairs across the boundary (``offset_px`` apart),
    the median signed depth step from a to b, the largest depth along it (the step threshold grows
    with depth), and the share of pairs with a crease between their two pixels.

    Returns (a, b, count, step, depth, crease_share) arrays (empty when no pieces touch)."""
    s = max(1, int(rule.offset_px))
    p, q = _pairs(seg, s)
    flat, zf, cf = seg.ravel(), z.ravel(), crease.ravel()
    la, lb = flat[p], flat[q]
    swap = la > lb
    a, b = np.where(swap, lb, la), np.where(swap, la, lb)
    dz = np.where(swap, zf[p] - zf[q], zf[q] - zf[p])
    zm = np.fmin(zf[p], zf[q])
    # a crease between the two pixels of a pair: any crease pixel on the segment (p, q)
    h, w = seg.shape
    py, px, qy, qx = p // w, p % w, q // w, q % w
    cr = np.zeros(len(p), bool)
    for t in range(s + 1):
        cr |= cf[((py * (s - t) + qy * t) // s) * w + (px * (s - t) + qx * t) // s]
    key = a.astype(np.int64) * (int(seg.max()) + 1) + b
    order = np.lexsort((np.nan_to_num(dz, nan=np.inf), key))
    key, dz, zm, cr, a, b = key[order], dz[order], zm[order], cr[order], a[order], b[order]
    if len(key) == 0:
        e = np.zeros(0)
        return e.astype(np.int32), e.astype(np.int32), e, e, e, e
    start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    count = np.diff(np.r_[start, len(key)])
    finite = np.isfinite(dz)
    n_fin = np.add.reduceat(finite.astype(np.int64), start)
    # finite steps sort first within a group (NaN as +inf): the (lower) median is at start + (n_fin - 1) // 2
    mid = start + np.maximum(n_fin - 1, 0) // 2
    step = np.where(n_fin > 0, dz[mid], np.nan)
    depth = np.where(n_fin > 0, np.fmax.reduceat(np.where(finite, zm, np.nan), start), np.nan)
    share = np.add.reduceat(cr.astype(np.int64), start) / count
    return a[start], b[start], count, step, depth, share


def _mean_lab(seg: np.ndarray, rgb_small: np.ndarray) -> np.ndarray:
    """(n + 1, 3) mean Lab colour of each piece (OpenCV's 8-bit Lab scale)."""
    lab = cv2.cvtColor(rgb_small, cv2.COLOR_RGB2LAB).reshape(-1, 3).astype(np.float64)
    flat = seg.ravel()
    n = int(seg.max()) + 1
    cnt = np.maximum(np.bincount(flat, minlength=n), 1)
    return np.stack([np.bincount(flat, lab[:, c], minlength=n) / cnt for c in range(3)], axis=1)


def merge_pieces(seg: np.ndarray, z: np.ndarray, crease: np.ndarray, rule: BoundaryRule,
                 rgb_small: np.ndarray | None = None) -> np.ndarray:
    """Join neighbouring pieces whose shared boundary shows neither a depth step nor a crease (with
    ``colour_de`` > 0: a crease parts two pieces only when their mean colours also differ by that much)."""
    n = int(seg.max())
    if n <= 1:
        return seg
    a, b, count, step, depth, share = boundary_stats(seg, z, crease, rule)
    thr = rule.step_m + rule.step_rel * np.nan_to_num(depth, nan=0.0)
    apart = (np.abs(np.nan_to_num(step, nan=0.0)) > thr)
    if rule.crease_share > 0:
        creased = share >= rule.crease_share
        if rule.colour_de > 0 and rgb_small is not None and creased.any():  # the colours asked only then
            mean = _mean_lab(seg, rgb_small)
            creased &= np.linalg.norm(mean[a] - mean[b], axis=1) >= rule.colour_de
        apart |= creased
    join = ~apart
    return group_labels(n, a[join], b[join])[seg]


def group_labels(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Label table (0 .. n -> group, 0 stays 0): labels 1 .. n joined along the pairs (``a``, ``b``), the groups
    numbered 1.. in the order of their smallest label (as scipy's ``connected_components`` on that graph
    numbers them). Each label points to the smallest label known to share its group, lowered along the
    pairs and shortcut until nothing changes: for the few dozen pieces of a blob, without building a
    sparse matrix."""
    root = np.arange(n + 1)
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    while len(a):
        before = root.copy()
        low = np.minimum(root[a], root[b])
        np.minimum.at(root, a, low)
        np.minimum.at(root, b, low)
        root = root[root]
        if np.array_equal(root, before):
            break
    _, group = np.unique(root[1:], return_inverse=True)
    lut = np.zeros(n + 1, np.int32)
    lut[1:] = group.ravel() + 1
    return lut


def label_areas(mask: np.ndarray, connectivity: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(count, labels, pixels per label) of the connected components of a uint8 ``mask``: OpenCV's labels
    (label 0 the background) and the areas its ``connectedComponentsWithStats`` gives, counted from the
    labels, which costs about half as much as OpenCV's full statistics."""
    n, labels = cv2.connectedComponents(mask, connectivity=connectivity)
    if n <= 65536 and labels.size < 2 ** 24:
        # the labels fit 16 bits and every count a float32: OpenCV's histogram of them gives np.bincount's
        # counts, in about half the time
        areas = cv2.calcHist([labels.astype(np.uint16)], [0], None, [n], [0, n]).ravel().astype(np.intp)
        return n, labels, areas
    return n, labels, np.bincount(labels.ravel(), minlength=n)


def nonzero_box(a: np.ndarray, margin: int = 0) -> tuple[slice, slice] | None:
    """The smallest box (row and column slices) holding every non-zero value of the 2-D array ``a``, grown
    by ``margin`` pixels each way and clipped to ``a``; None when ``a`` is all zero. The steps that need
    only the objects' surroundings work there instead of on the whole frame. OpenCV's bounding rectangle
    of the non-zero bytes gives the same box a few times faster than NumPy's row and column tests."""
    h, w = a.shape
    if a.size == 0:
        return None
    x, y, bw, bh = cv2.boundingRect(a.view(np.uint8) if a.dtype == bool else (a != 0).view(np.uint8))
    if bw == 0:
        return None
    return (slice(max(y - margin, 0), min(y + bh + margin, h)), slice(max(x - margin, 0), min(x + bw + margin, w)))


def find_boxes(labels: np.ndarray, max_label: int = 0) -> list:
    """``scipy.ndimage.find_objects(labels, max_label)`` of a 2-D image of non-negative labels, the same slices:
    looked for only within the box of its non-zero pixels (every label lies there, so each label's rows and
    columns are the same, shifted), which on a table view is about half the frame and costs about half as much."""
    box = nonzero_box(labels)
    h, w = labels.shape
    if box is None or box == (slice(0, h), slice(0, w)):
        return ndimage_find_objects(labels, max_label)
    r0, c0 = box[0].start, box[1].start
    return [None if sl is None else (slice(sl[0].start + r0, sl[0].stop + r0), slice(sl[1].start + c0, sl[1].stop + c0))
            for sl in ndimage_find_objects(labels[box], max_label)]


def outline_points(mask: np.ndarray) -> np.ndarray | None:
    """The points of a region's outer outlines ((n, 1, 2) x, y), or None for an empty mask. Their convex
    hull is the region's (every other pixel lies inside an outline), from a few dozen points instead of
    every pixel."""
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    return np.vstack(contours) if contours else None


def filled_area(mask: np.ndarray) -> int:
    """The pixel count of ``mask`` with its holes filled (``binary_fill_holes(mask).sum()``): a hole is a
    4-connected part of the rest that does not reach the array's border."""
    n, _, stats, _ = cv2.connectedComponentsWithStats((~mask.astype(bool)).astype(np.uint8), connectivity=4)
    h, w = mask.shape
    x, y, bw, bh = (stats[1:, i] for i in (cv2.CC_STAT_LEFT, cv2.CC_STAT_TOP, cv2.CC_STAT_WIDTH, cv2.CC_STAT_HEIGHT))
    inside = (x > 0) & (y > 0) & (x + bw < w) & (y + bh < h)
    return int(np.count_nonzero(mask)) + int(stats[1:, cv2.CC_STAT_AREA][inside].sum())


def solidity(mask: np.ndarray) -> float:
    """Area of a region over the area of its convex hull (1 for a convex blob)."""
    area = int(np.count_nonzero(mask))
    if area < 3:
        return 1.0
    hull = cv2.contourArea(cv2.convexHull(outline_points(mask)))
    return float(area) / max(hull, 1.0)


OPEN_RING = 0.5
SEED_PX = 12  # smallest level patch that seeds a layer in split_layers


def _ring(mask: np.ndarray, share: float = 0.15) -> bool:
    """Whether a region encloses a hole of at least ``share`` of its area: a bowl, a tray or a cup seen
    from above is a ring of rim and walls around a low floor; touching objects enclose nothing."""
    area = float(np.count_nonzero(mask))
    if float(filled_area(mask)) >= (1.0 + share) * area:
        return True
    # an open ring (a tray whose near wall hides below the threshold): one hull gap as large as the region
    hull = np.zeros(mask.shape, np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(outline_points(mask)), 1)
    n, _, areas = label_areas((hull.astype(bool) & ~mask).astype(np.uint8), 4)
    return n > 1 and float(areas[1:].max()) >= OPEN_RING * area


def _blobs(labels: np.ndarray, min_pixels: int):
    """Each component of ``labels`` with at least ``2 * min_pixels`` pixels (room for two parts): (box, mask)."""
    for lab, sl in enumerate(find_boxes(labels), start=1):
        if sl is None:
            continue
        m = labels[sl] == lab
        if np.count_nonzero(m) >= 2 * min_pixels:
            yield sl, m


def _replace(out: np.ndarray, sl: tuple[slice, slice], m: np.ndarray, parts: list[np.ndarray], nxt: int) -> int:
    """Give the component ``m`` (in the box ``sl`` of ``out``) new labels from ``nxt``, one per part; returns
    the next free label."""
    block = out[sl]
    block[m] = 0
    for p in parts:
        block[p] = nxt
        nxt += 1
    return nxt


def split_nonconvex(labels: np.ndarray, cut: np.ndarray, crease: np.ndarray, rgb_small: np.ndarray, z: np.ndarray,
                    rule: BoundaryRule, max_solidity: float, gain: float, min_pixels: int) -> np.ndarray:
    """Split components that look like several objects: a component less convex than ``max_solidity`` is
    over-segmented and merged back by its boundaries (:func:`oversegment`, :func:`merge_pieces`); the split
    is kept when it gives two or more parts of ``min_pixels`` whose area-weighted solidity is at least
    ``gain`` above the component's (touching objects make a non-convex blob; one object's pieces do not
    become more convex by splitting it)."""
    out = labels.copy()
    nxt = int(labels.max()) + 1
    for sl, m in _blobs(labels, min_pixels):
        s0 = solidity(m)
        if s0 >= max_solidity or _ring(m):
            continue
        seg = oversegment(m, cut[sl] & m, rgb_small[sl], np.zeros_like(m), rule)
        if seg.max() < 2:
            continue
        zb = z[sl]  # the depth as float32 with NaN where none, in this blob's box only
        seg = merge_pieces(seg, np.where(np.isfinite(zb), zb, np.nan).astype(np.float32), crease[sl], rule, rgb_small[sl])
        parts = [seg == k for k in range(1, int(seg.max()) + 1)]
        parts = [p for p in parts if np.count_nonzero(p) >= min_pixels]
        if len(parts) < 2:
            continue
        area = np.array([np.count_nonzero(p) for p in parts], float)
        s1 = float(np.sum(area * np.array([solidity(p) for p in parts])) / area.sum())
        if s1 < s0 + gain:
            continue
        nxt = _replace(out, sl, m, parts, nxt)
        # pixels of the component in no kept part go to the nearest part
        block = out[sl]
        rest = m & (block == 0)
        if rest.any():
            near = cv2.dilate(block.astype(np.float32), np.ones((5, 5), np.uint8))
            block[rest & (near > 0)] = near[rest & (near > 0)].astype(block.dtype)
    return out


def _squared_length(v: np.ndarray) -> np.ndarray:
    """``np.einsum("...k,...k->...", v, v)`` of vectors ``v`` (..., 3), the same values bit for bit: for float32
    einsum sums the three squares in order (x^2 + y^2, then + z^2), as done here on the channel planes,
    several times faster; other types (float64 einsum sums otherwise) go to einsum itself."""
    if v.dtype != np.float32:
        return np.einsum("...k,...k->...", v, v)
    out = np.square(v[..., 0])
    out += np.square(v[..., 1])
    out += np.square(v[..., 2])
    return out


def flat_pixels(P: np.ndarray, height: np.ndarray, max_tilt_sine: float, span: int = 5) -> np.ndarray:
    """Pixels on a level surface: over ``span`` pixels either way (box-smoothed), the height changes by less
    than ``max_tilt_sine`` of the distance moved in 3D (the sine of the surface's tilt from level). A top (of a
    box, a lid, a book) is level, the walls below it are not. A real sensor's millimetre steps make the
    slope between neighbouring pixels noise; ``span`` pixels apart they average out."""
    k = (span, span)
    hs = cv2.blur(np.nan_to_num(height, nan=0.0).astype(np.float32, copy=False), k)
    Ps = cv2.blur(np.ascontiguousarray(P, dtype=np.float32), k)
    s = max(1, span // 2)
    t2 = np.float32(max_tilt_sine) ** 2
    level = np.isfinite(height)
    for axis in (0, 1):  # compared squared: dh^2 < t^2 * |dP|^2, no roots or divisions
        a = [slice(None)] * 2
        b = [slice(None)] * 2
        a[axis], b[axis] = slice(2 * s, None), slice(None, -2 * s)
        dP = Ps[tuple(a)] - Ps[tuple(b)]
        dh = hs[tuple(a)] - hs[tuple(b)]
        ok = dh * dh < t2 * _squared_length(dP)
        c = [slice(None)] * 2
        c[axis] = slice(s, -s)
        level[tuple(c)] &= ok
        e = [slice(None)] * 2  # the first and last s rows (columns) take their neighbour's answer
        e[axis] = slice(0, s)
        level[tuple(e)] &= np.take(ok, [0], axis=axis)
        e[axis] = slice(-s, None)
        level[tuple(e)] &= np.take(ok, [-1], axis=axis)
    return level


def _nearest_fill(m: np.ndarray, ws: np.ndarray) -> np.ndarray:
    """Pixels of ``m`` without a part (0) take the part of the nearest pixel that has one."""
    if (m & (ws == 0)).any() and (ws > 0).any():
        _, (iy, ix) = distance_transform_edt(ws == 0, return_indices=True)
        ws = np.where(m, ws[iy, ix], 0)
    return ws


def _walls_by_colour(m: np.ndarray, markers: np.ndarray, rgb: np.ndarray) -> np.ndarray:
    """The rest of ``m`` goes to the seeds by OpenCV's colour watershed."""
    bg = int(markers.max()) + 1
    mk = np.where(m, markers, bg).astype(np.int32)
    ws = cv2.watershed(np.ascontiguousarray(rgb[..., ::-1]), mk)
    return _nearest_fill(m, np.where(m & (ws >= 1) & (ws < bg), ws, 0))


def split_layers(labels: np.ndarray, flat: np.ndarray, height: np.ndarray, rgb_small: np.ndarray,
                 gap_m: float, min_pixels: int) -> np.ndarray:
    """Split components whose level tops lie at clearly different heights: an object stacked on, leaning on
    or standing in another shows its own top, ``gap_m`` or more above or below the other's.

    The level patches of a component (``flat``, eroded by a pixel so a thin bridge does not join them) of at
    least ``min_pixels`` are grouped by height (a new layer where their sorted levels jump by ``gap_m``). With
    two or more layers, every level patch of ``SEED_PX`` or more (not eroded: the top of an object that another
    stands on may show only as thin strips around it) seeds the layer nearest its height, and the rest of the
    component (the walls) goes to the seeds by OpenCV's colour watershed. Parts under ``min_pixels`` leave the
    component whole. One object with two level tops far apart is split too: the bench decides the gap."""
    out = labels.copy()
    nxt = int(labels.max()) + 1
    k3 = np.ones((3, 3), np.uint8)
    for sl, m in _blobs(labels, min_pixels):
        tops = cv2.erode((m & flat[sl]).astype(np.uint8), k3).astype(bool)
        n, lab_t, areas = label_areas(tops.astype(np.uint8), 4)
        big = [i for i in range(1, n) if areas[i] >= min_pixels]
        if len(big) < 2:
            continue
        hb = height[sl]
        level = np.array([float(np.nanmedian(hb[lab_t == i])) for i in big])
        order = np.argsort(level)
        group = np.zeros(len(big), int)
        for j in range(1, len(order)):  # a new layer where the sorted levels jump by gap_m
            group[order[j]] = group[order[j - 1]] + (level[order[j]] - level[order[j - 1]] >= gap_m)
        if group.max() < 1:
            continue
        means = np.array([level[group == g].mean() for g in range(int(group.max()) + 1)])
        markers = np.zeros(m.shape, np.int32)
        n2, lab2, areas2 = label_areas((m & flat[sl]).astype(np.uint8), 4)
        for i in range(1, n2):
            if areas2[i] >= SEED_PX:
                markers[lab2 == i] = int(np.argmin(np.abs(means - float(np.nanmedian(hb[lab2 == i]))))) + 1
        ws = _walls_by_colour(m, markers, rgb_small[sl])
        parts = [ws == g + 1 for g in range(int(group.max()) + 1)]
        if min(np.count_nonzero(p) for p in parts) >= min_pixels:
            nxt = _replace(out, sl, m, parts, nxt)
    return out


MOST_HOLES = 64


def unseen_objects(valid: np.ndarray, objects: np.ndarray, table: np.ndarray, surface: np.ndarray | None,
                   edges: np.ndarray, metres_per_px: np.ndarray, min_width_m: float, max_size_m: float,
                   ring_share: float, edge_share: float, min_pixels: int) -> list[np.ndarray]:
    """Masks of objects the depth camera cannot see: holes in its readings that lie on the table.

    Glass, clear plastic, black and shiny objects return no reading (or a scattered few). The table
    around such an object is read, so the object shows as a hole of its size enclosed by the table.
    A hole counts when at least ``ring_share`` of the pixels around it (a 2-pixel ring) are table
    readings (``table``) and none are cut off by the image border, it lies on the support's image
    region (``surface``), it is clear of the objects already found (``objects``, labels) and not mostly
    inside one's outline (its convex hull: a bowl's shiny inside, a mug's dark inside), and it is at least
    ``min_width_m`` across where it is widest (twice its largest inscribed radius, at the table's
    distance ``metres_per_px``): the holes a camera leaves beside depth edges (its shadow bands) are
    a few pixels wide, an object has a body. And the colour image must see something there: at least
    ``edge_share`` of the hole's pixels on a colour edge (``edges``: an outline, a rim, a highlight).
    Where a bright sheet or a dark patch of the table itself returns no reading, the hole looks like the
    table around it and has no edge at all. Readings scattered inside the hole (seen through the glass)
    are part of it. The hole gives no height, so such an object gets no 3D. Only the ``MOST_HOLES`` largest
    holes are looked at, so a frame riddled with holes costs a bounded time."""
    taken = cv2.dilate((objects > 0).astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    hole = ~valid & ~taken
    if not hole.any():
        return []
    slices = ndimage_find_objects(objects)
    hulls: dict[int, np.ndarray] = {}
    n, lab, stats, _ = cv2.connectedComponentsWithStats(hole.astype(np.uint8), connectivity=8)
    h, w = valid.shape
    out = []
    areas = stats[1:, cv2.CC_STAT_AREA]
    order = 1 + np.lexsort((np.arange(n - 1), -areas))[:MOST_HOLES]  # largest first, ties by label: deterministic
    for i in order:
        x, y, bw, bh, area = (int(v) for v in stats[i])
        if area < min_pixels or x == 0 or y == 0 or x + bw >= w or y + bh >= h:
            continue
        y0, y1, x0, x1 = max(y - 3, 0), min(y + bh + 3, h), max(x - 3, 0), min(x + bw + 3, w)
        m = binary_fill_holes(lab[y0:y1, x0:x1] == i) & ~taken[y0:y1, x0:x1]
        ring = cv2.dilate(m.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool) & ~m
        if ring.sum() == 0 or table[y0:y1, x0:x1][ring].mean() < ring_share:
            continue
        if surface is not None and surface[y0:y1, x0:x1][m].mean() < 0.5:
            continue
        if edges[y0:y1, x0:x1][m].mean() < edge_share:
            continue  # looks like the table around it: the table itself unread (a bright sheet, a dark patch)
        around = [o for o, sl in enumerate(slices, start=1) if sl is not None and sl[0].start <= y0 and sl[0].stop >= y1
                  and sl[1].start <= x0 and sl[1].stop >= x1]  # objects whose box holds the hole's
        if any(_hull(objects, slices, o, hulls)[y0:y1, x0:x1][m].mean() >= 0.5 for o in around):
            continue  # inside a found object's outline: that object's unread part
        scale = float(np.median(metres_per_px[y0:y1, x0:x1][m]))
        if not np.isfinite(scale) or scale <= 0:
            continue
        width = 2.0 * float(distance_transform_edt(np.pad(m, 1))[1:-1, 1:-1].max()) * scale
        if width < min_width_m or (max(bw, bh) + 1) * scale > max_size_m:
            continue
        full = np.zeros((h, w), bool)
        full[y0:y1, x0:x1] = m
        out.append(full)
    return out


def _hull(labels: np.ndarray, slices: list, i: int, cache: dict[int, np.ndarray]) -> np.ndarray:
    """The filled convex hull of region ``i`` of ``labels`` (image-sized, computed once per region)."""
    if i not in cache:
        sl = slices[i - 1]
        pts = outline_points(labels[sl] == i)
        out = np.zeros(labels.shape, np.uint8)
        if pts is not None:
            hull = cv2.convexHull(pts) + np.array([sl[1].start, sl[0].start], np.int32)
            cv2.fillConvexPoly(out, hull, 1)
        cache[i] = out.astype(bool)
    return cache[i]
