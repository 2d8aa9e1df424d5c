"""The hybrid's faster steps give the same values as their plain forms: the renumbering by first pixel,
the geometry's proposals as one label image, the part counts of the referee, the joins (within one region,
within the objects' box), the feet's share on the support, the lowest reading per piece, the grown insides."""
from __future__ import annotations

import cv2
import numpy as np
from scipy import ndimage

from cbcl_pr_ros.perception import CameraIntrinsics, Proposal
from cbcl_pr_ros.perception.proposals import _share_on
from cbcl_pr_ros.perception.segmenter import (_GROW_PX, _MIN_SEED_PX, _grown_insides, _homes, _lowest, _renumbered,
                                              join_hanging, join_pieces, join_within, part_merged, referee_labels)


def _plain_renumbered(lab: np.ndarray, n: int) -> np.ndarray:
    _, first = np.unique(lab.ravel(), return_index=True)
    ordered = lab.ravel()[np.sort(first)]
    renum = np.zeros(n + 1, np.int32)
    renum[ordered[ordered > 0]] = np.arange(1, int((ordered > 0).sum()) + 1)
    return renum[lab]


def test_renumbered_as_by_every_pixels_first_occurrence():
    rng = np.random.default_rng(3)
    for trial in range(300):
        h, w = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        n = int(rng.integers(0, 12))
        lab = rng.integers(0, n + 1, (h, w)).astype(np.int32)
        if trial % 3 == 0:  # blocky labels: long runs, as real label images
            lab = np.repeat(np.repeat(lab[: max(h // 4, 1), : max(w // 4, 1)], 4, 0), 4, 1)
        got = _renumbered(lab, int(lab.max()))
        assert got.dtype == np.int32 and np.array_equal(got, _plain_renumbered(lab, int(lab.max())))
    empty = np.zeros((0, 5), np.int32)
    assert _renumbered(empty, 0).shape == (0, 5)


def _proposal(mask: np.ndarray, box: tuple[int, int, int, int], score: float = 0.5) -> Proposal:
    return Proposal(box, mask, np.zeros(3), np.zeros(3), score)


def _plain_referee(geometry: list[Proposal], shape: tuple[int, int]) -> np.ndarray | None:
    referee = np.zeros(shape, np.int32)
    for i, g in enumerate(geometry, start=1):
        referee[g.mask & (referee == 0)] = i
    return referee if geometry else None


def _random_proposals(rng: np.random.Generator, shape: tuple[int, int], k: int) -> list[Proposal]:
    h, w = shape
    out = []
    for _ in range(k):
        y0, x0 = int(rng.integers(0, h - 1)), int(rng.integers(0, w - 1))
        y1, x1 = int(rng.integers(y0 + 1, h + 1)), int(rng.integers(x0 + 1, w + 1))
        mask = np.zeros(shape, bool)
        mask[y0:y1, x0:x1] = rng.random((y1 - y0, x1 - x0)) < 0.7
        box = (x0, y0, x1, y1)
        if rng.random() < 0.3:  # a box that does not hold its whole mask: every pixel still counts
            box = (x0, y0, max(x0 + 1, (x0 + x1) // 2), y1)
        out.append(_proposal(mask, box, float(rng.random())))
    return out


def test_referee_labels_as_written_over_the_whole_frame():
    rng = np.random.default_rng(5)
    for _ in range(200):
        shape = (int(rng.integers(2, 50)), int(rng.integers(2, 50)))
        geometry = _random_proposals(rng, shape, int(rng.integers(1, 6)))
        got = referee_labels(geometry, shape)
        assert np.array_equal(got, _plain_referee(geometry, shape))
    assert referee_labels([], (4, 4)) is None


def test_part_merged_counts_masks_outside_their_boxes():
    # a learned mask reaching beyond its box: its area is every pixel (the box alone would halve it)
    shape = (20, 40)
    wide = np.zeros(shape, bool)
    wide[5:15, 0:40] = True
    small = np.zeros(shape, bool)
    small[6:10, 2:8] = True
    geo = np.zeros(shape, bool)
    geo[4:16, 0:20] = True
    learned = [_proposal(wide, (0, 5, 20, 15), 0.9), _proposal(small, (2, 6, 8, 10), 0.4)]
    out = part_merged(learned, [_proposal(geo, (0, 4, 20, 16))], whole=0.5)
    # both learned objects lie in the one geometry region: the larger by every mask pixel (400 against
    # 24) stays, the smaller goes
    assert [p.box for p in out] == [(0, 5, 20, 15)]


def _plain_join_within(labels: np.ndarray, referee: np.ndarray, z: np.ndarray, sigmas: float,
                       share: float = 0.6) -> np.ndarray:
    lab = np.asarray(labels, np.int32)
    homes = _homes(lab, referee, share)
    if homes is None:
        return lab.copy()
    n, home = homes
    to = np.arange(n + 1)
    for region in np.unique(home[home > 0]):
        ids = np.flatnonzero(home == region)
        if len(ids) < 2:
            continue
        joined = join_pieces(np.where(np.isin(lab, ids), lab, 0), z, sigmas)
        for v in range(1, int(joined.max()) + 1):
            members = np.unique(lab[joined == v])
            to[members] = members.min()
    return _renumbered(to[lab], n)


def _strips(rng: np.random.Generator, h: int, w: int, empty_top: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A tilted plane with a step, noise and unread pixels, and labels in vertical strips over it (pieces
    of surfaces); ``empty_top`` leaves a random band of top rows unlabelled."""
    yy, xx = np.mgrid[0:h, 0:w]
    z = 1.0 + 0.002 * yy + 0.001 * xx + rng.normal(0, 2e-4, (h, w))
    z[:, w // 2:] += rng.choice([0.0, 0.05])
    z[rng.random((h, w)) < 0.05] = np.nan
    cuts = np.sort(rng.choice(np.arange(2, w - 2), int(rng.integers(1, 5)), replace=False))
    lab = np.searchsorted(cuts, xx, side="right").astype(np.int32) + 1
    if empty_top:
        lab[: int(rng.integers(0, h // 3))] = 0
    lab[rng.random((h, w)) < 0.02] = 0
    return z, lab


def test_join_within_joins_in_the_objects_box_as_over_the_whole_image():
    rng = np.random.default_rng(11)
    joined_some = 0
    for _ in range(120):
        h, w = int(rng.integers(12, 60)), int(rng.integers(12, 60))
        z, lab = _strips(rng, h, w, empty_top=True)
        referee = np.zeros((h, w), np.int32)
        referee[:, : int(rng.integers(w // 3, w))] = 1
        referee[referee == 0] = 2 if rng.random() < 0.5 else 0
        sigmas = float(rng.choice([2.0, 5.0, 50.0]))
        got = join_within(lab, referee, z, sigmas)
        assert np.array_equal(got, _plain_join_within(lab, referee, z, sigmas))
        joined_some += int(got.max()) < len(np.unique(lab[lab > 0]))
    assert joined_some > 10  # the cases join pieces, not only keep them apart


def _plain_share_on(region: np.ndarray, feet: np.ndarray, K: CameraIntrinsics) -> float:
    z = feet[:, 2]
    ok = z > 1e-3
    if not ok.any():
        return 0.0
    u = np.round(K.fx * feet[ok, 0] / z[ok] + K.cx).astype(np.int64)
    v = np.round(K.fy * feet[ok, 1] / z[ok] + K.cy).astype(np.int64)
    h, w = region.shape
    inside = (u >= 0) & (u < w) & (v >= 0) & (v < h)
    on = np.zeros(len(u), bool)
    on[inside] = region[v[inside], u[inside]]
    return float(on.sum()) / float(len(z))


def test_share_on_as_selecting_every_column():
    rng = np.random.default_rng(7)
    K = CameraIntrinsics(fx=150.0, fy=150.0, cx=80.0, cy=60.0)
    for trial in range(300):
        region = rng.random((120, 160)) < rng.random()
        n = int(rng.integers(1, 400))
        both = np.empty((3, 2 * n))  # feet as the columns of a transposed view, as plane_geometry holds them
        both[0] = rng.normal(0, 0.05 if trial % 2 else 0.5, 2 * n)
        both[1] = rng.normal(0, 0.05 if trial % 2 else 0.5, 2 * n)
        both[2] = rng.uniform(-0.2 if trial % 3 == 0 else 0.3, 1.5, 2 * n)  # some behind the camera
        feet = both[:, n:].T
        assert _share_on(region, feet, K) == _plain_share_on(region, feet, K)
    assert _share_on(np.ones((4, 4), bool), np.array([[0.0, 0.0, -1.0]]), K) == 0.0


def test_lowest_as_minimum_at():
    rng = np.random.default_rng(13)
    for _ in range(300):
        n = int(rng.integers(1, 20))
        k = int(rng.integers(0, 300))
        ids = rng.integers(0, n + 1, k)
        values = rng.normal(0, 0.1, k).astype(rng.choice([np.float32, np.float64]))
        start = np.where(rng.random(n + 1) < 0.2, rng.normal(0, 0.1, n + 1), np.inf)
        want, got = start.copy(), start.copy()
        np.minimum.at(want, ids, values)
        _lowest(got, ids, values)
        assert np.array_equal(got, want)


def test_join_pieces_in_the_objects_box_as_over_the_whole_image():
    # the whole-image result: the same labels embedded in a larger empty frame, cut back out
    rng = np.random.default_rng(17)
    for _ in range(120):
        h, w = int(rng.integers(8, 40)), int(rng.integers(8, 40))
        z, lab = _strips(rng, h, w)
        t, l, b, r = (int(v) for v in rng.integers(0, 7, 4))
        big = np.zeros((h + t + b, w + l + r), np.int32)
        big[t:t + h, l:l + w] = lab
        zbig = np.full(big.shape, np.nan)
        zbig[t:t + h, l:l + w] = z
        zbig[big == 0] = rng.uniform(0.5, 2.0, int((big == 0).sum()))  # readings off the objects are not read
        sigmas = float(rng.choice([2.0, 5.0, 50.0]))
        got = join_pieces(big, zbig, sigmas)
        assert not got[big == 0].any()
        assert np.array_equal(got[t:t + h, l:l + w], join_pieces(lab, z, sigmas))


def test_join_hanging_with_feet_given_late_as_given_at_once():
    # a piece above another in one region: whether it joins depends on its feet, given as an array or
    # by a function called only when a piece needs them
    lab = np.zeros((12, 12), np.int32)
    lab[1:6, 2:10] = 1  # the upper piece, no reading at the support's level
    lab[6:11, 2:10] = 2  # the lower piece, standing
    referee = np.where(lab > 0, 1, 0).astype(np.int32)
    height = np.where(lab == 1, 0.10, np.where(lab == 2, 0.0, np.nan))
    floor = np.full(lab.shape, 0.01)
    for on in (2, 1):  # feet on the lower piece: it rests there and joins; on itself: it stands apart
        feet = np.full((2, 12, 12), -1, np.int64)
        feet[0][lab == 1], feet[1][lab == 1] = (8, 5) if on == 2 else (3, 5)
        calls = []
        late = join_hanging(lab, referee, height, floor, lambda f=feet: calls.append(1) or f)
        assert np.array_equal(late, join_hanging(lab, referee, height, floor, feet))
        assert calls == [1] and int(late.max()) == (1 if on == 2 else 2)
    standing = np.where(lab == 1, 0.0, height)  # both reach the support: feet never asked for
    assert int(join_hanging(lab, referee, standing, floor, lambda: 1 / 0).max()) == 2


def _plain_grown(prob: np.ndarray, objects: np.ndarray, inside_p: float) -> np.ndarray:
    inside = (prob[1] >= inside_p).astype(np.uint8)
    n, lab, stats, _ = cv2.connectedComponentsWithStats(inside, connectivity=4)
    keep = np.zeros(n, np.int32)
    big = 1 + np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] >= _MIN_SEED_PX)
    keep[big] = np.arange(1, len(big) + 1)
    lab = keep[lab]
    if not len(big):
        return lab
    dist, idx = ndimage.distance_transform_edt(lab == 0, return_indices=True)
    return np.where(objects & (dist <= _GROW_PX), lab[idx[0], idx[1]], 0).astype(np.int32)


def test_grown_insides_in_their_box_as_over_the_whole_image():
    # blocks of "inside" on an integer grid: many pixels equally near two insides (the nearest's ties)
    rng = np.random.default_rng(19)
    for _ in range(1500):
        h, w = (int(v) for v in rng.integers(5, 60, 2))
        inside = np.zeros((h, w))
        for _ in range(int(rng.integers(0, 8))):
            y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
            a, b = (int(v) for v in rng.integers(1, 12, 2))
            inside[y:y + a, x:x + b] = 1.0
        if rng.random() < 0.5:
            inside[rng.random((h, w)) < 0.2] = 0.0
        prob = np.stack([1.0 - inside, inside, np.zeros((h, w))])
        objects = rng.random((h, w)) < 0.8
        got = _grown_insides(prob, objects, 0.5)
        assert got.dtype == np.int32 and np.array_equal(got, _plain_grown(prob, objects, 0.5))


def test_row_means_as_numpys_mean_down_the_rows():
    from cbcl_pr_ros.perception.proposals import _mean_rows

    rng = np.random.default_rng(5)
    for rep in range(300):
        h, w = int(rng.integers(1, 130)), int(rng.integers(1, 170))
        rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if rep % 2:  # smooth colour, as a camera's: long runs of near values
            rgb = cv2.blur(rgb, (5, 5))
        x = (rgb.astype(np.float32) / 255.0).reshape(-1, 3)
        want, got = x.mean(axis=0), _mean_rows(x)
        assert got.dtype == want.dtype == np.float32 and got.tobytes() == want.tobytes()
        # the plane fits' points: float64 rows of metres, far from the origin as a table is
        pts = rng.normal([0.1, -0.2, 0.9], 0.3, (int(rng.integers(1, 20000)), 3))
        want, got = pts.mean(axis=0), _mean_rows(pts)
        assert got.dtype == want.dtype == np.float64 and got.tobytes() == want.tobytes()


def _plain_seams(lab: np.ndarray, zz: np.ndarray, scale: float, n: int) -> tuple[list, list]:
    """The seam pairs over the whole padded image: every test on every pixel, then the pixels selected."""
    from cbcl_pr_ros.perception.segmenter import _SEAM_REACH

    h, w = lab.shape
    pad = 3 * _SEAM_REACH
    L = np.pad(lab, pad)
    Z = np.pad(zz, pad, constant_values=np.nan)
    S = scale * Z * Z

    def at(k: int, dy: int, dx: int, arr: np.ndarray) -> np.ndarray:
        return arr[pad + k * dy:pad + k * dy + h, pad + k * dx:pad + k * dx + w]

    keys, ratios = [], []
    for d in range(1, _SEAM_REACH + 1):
        for dy, dx in ((0, d), (d, 0)):
            a, b = at(0, dy, dx, L), at(1, dy, dx, L)
            ok = (a > 0) & (b > 0) & (a != b) & (at(-1, dy, dx, L) == a) & (at(2, dy, dx, L) == b)
            if not ok.any():
                continue
            z0, zp, zq, z1 = (at(k, dy, dx, Z)[ok] for k in (-1, 0, 1, 2))
            with np.errstate(invalid="ignore"):
                r = np.maximum(np.abs(z0 - 2 * zp + zq) / at(0, dy, dx, S)[ok], np.abs(zp - 2 * zq + z1) / at(1, dy, dx, S)[ok])
            seen = np.isfinite(r)
            lo, hi = np.minimum(a[ok], b[ok])[seen], np.maximum(a[ok], b[ok])[seen]
            keys.append(lo.astype(np.int64) * (n + 1) + hi)
            ratios.append(r[seen])
    return keys, ratios


def test_seams_read_at_their_pixels_as_tested_over_the_whole_image():
    from cbcl_pr_ros.perception.segmenter import _seams

    rng = np.random.default_rng(19)
    for rep in range(200):
        h, w = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        if rep % 3 == 0 and h >= 8 and w >= 8:
            zz, lab = _strips(rng, h, w, empty_top=bool(rep % 2))
            if rep % 2:
                zz, lab = np.ascontiguousarray(zz.T), np.ascontiguousarray(lab.T)  # seams along the other axis
        else:  # blocks of labels of every size, holes and unread pixels
            k = int(rng.integers(1, 5))
            lab = np.repeat(np.repeat(rng.integers(0, 6, (h // k + 1, w // k + 1)), k, 0), k, 1)[:h, :w].astype(np.int32)
            lab[rng.random(lab.shape) < 0.05] = 0
            zz = rng.uniform(0.5, 2.0, lab.shape)
            zz[rng.random(lab.shape) < 0.1] = np.nan
        n = int(lab.max()) if lab.size else 0
        scale = float(rng.uniform(1e-4, 1e-2))
        got, want = _seams(lab, zz, scale, n), _plain_seams(lab, zz, scale, n)
        assert len(got[0]) == len(want[0])
        for g, wnt in zip(got[0] + got[1], want[0] + want[1]):
            assert g.dtype == wnt.dtype and g.tobytes() == wnt.tobytes()


def test_within_reach_as_the_distance_transforms_distances():
    from cbcl_pr_ros.perception.segmenter import _within

    rng = np.random.default_rng(23)
    for _ in range(300):
        h, w = (int(v) for v in rng.integers(1, 50, 2))
        background = rng.random((h, w)) < rng.uniform(0.001, 0.3)
        background.ravel()[int(rng.integers(0, h * w))] = True
        dist, idx = ndimage.distance_transform_edt(~background, return_indices=True)
        for reach in (0, 1, 2, 3, 5, 16):
            assert np.array_equal(_within(idx, reach), dist <= reach)


def test_drop_small_counting_once_as_counting_per_use(monkeypatch):
    from cbcl_pr_ros.perception import segmenter as S

    rng = np.random.default_rng(29)
    K = CameraIntrinsics(100.0, 100.0, 20.0, 15.0)
    cases = []
    for _ in range(150):
        h, w = (int(v) for v in rng.integers(8, 40, 2))
        lab = np.zeros((h, w), np.int32)
        for i in range(1, int(rng.integers(1, 8))):
            y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
            a, b = (int(v) for v in rng.integers(1, 14, 2))
            lab[y:y + a, x:x + b] = i
        ref = np.zeros((h, w), np.int32)
        for i in range(1, int(rng.integers(0, 5))):
            y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
            a, b = (int(v) for v in rng.integers(2, 20, 2))
            ref[y:y + a, x:x + b] = i
        z = rng.uniform(0.3, 1.5, (h, w)).astype(np.float32)
        cases.append((lab, ref, z, float(rng.uniform(0.005, 0.05)), float(rng.uniform(0.2, 1.0)), bool(rng.random() < 0.7)))
    got = [S.drop_small(lab, z, K, face, True, ref, cover, absorb=absorb) for lab, ref, z, face, cover, absorb in cases]
    monkeypatch.setattr(S, "_region_counts", lambda lab, referee, n: None)  # each use counts for itself
    for (lab, ref, z, face, cover, absorb), g in zip(cases, got):
        assert np.array_equal(g, S.drop_small(lab, z, K, face, True, ref, cover, absorb=absorb))


def _plain_trim_outline(proposals, depth, K, plane, floor, band):
    out = []
    h, w = depth.shape
    nx, ny, nz = (float(v) for v in plane.normal)
    for p in proposals:
        x0, y0, x1, y1 = p.box
        x0, y0, x1, y1 = max(x0 - 1, 0), max(y0 - 1, 0), min(x1 + 1, w), min(y1 + 1, h)
        m = p.mask[y0:y1, x0:x1]
        edge = m & ~ndimage.binary_erosion(m, ndimage.generate_binary_structure(2, 1), iterations=band, border_value=0)
        ys, xs = np.nonzero(edge)
        z = depth[y0:y1, x0:x1][ys, xs]
        with np.errstate(invalid="ignore"):
            height = (nx * (xs + x0 - K.cx) / K.fx + ny * (ys + y0 - K.cy) / K.fy + nz) * z + plane.offset
            level = np.isfinite(z) & (z > 0) & (height <= np.maximum(floor[0], floor[1] * z * z))
        mask = p.mask.copy()
        mask[ys[level] + y0, xs[level] + x0] = False
        out.append(Proposal(p.box, mask, p.centroid, p.size, p.score) if level.any() and mask.any() else p)
    return out


def _random_masks(rng: np.random.Generator, h: int, w: int, n: int) -> list[Proposal]:
    out = []
    for _ in range(n):
        m = np.zeros((h, w), bool)
        for _ in range(int(rng.integers(1, 4))):
            y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
            m[y:y + int(rng.integers(1, 15)), x:x + int(rng.integers(1, 15))] = True
        if rng.random() < 0.3:
            m &= rng.random((h, w)) < 0.8
        if not m.any():
            m[0, 0] = True
        ys, xs = np.nonzero(m)
        box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
        if rng.random() < 0.2:  # a box smaller than its mask (a merged or trimmed proposal)
            box = (box[0], box[1], max(box[0] + 1, box[2] - 3), max(box[1] + 1, box[3] - 3))
        out.append(Proposal(box, m, rng.random(3), rng.random(3), float(rng.random())))
    return out


def test_trim_outline_as_its_plain_form():
    from cbcl_pr_ros.perception.proposals import _Plane
    from cbcl_pr_ros.perception.segmenter import trim_outline

    rng = np.random.default_rng(31)
    for _ in range(200):
        h, w = (int(v) for v in rng.integers(4, 40, 2))
        K = CameraIntrinsics(50.0, 50.0, w / 2, h / 2)
        depth = rng.uniform(0.5, 1.2, (h, w)).astype(np.float32)
        depth[rng.random((h, w)) < 0.1] = np.nan
        normal = rng.normal(0, 0.1, 3) + np.array([0.0, -1.0, -0.3])
        normal /= np.linalg.norm(normal)
        plane = _Plane(normal, float(rng.uniform(0.3, 1.0)), 0.5)
        props = _random_masks(rng, h, w, int(rng.integers(1, 5)))
        floor = (float(rng.uniform(0.0, 0.5)), float(rng.uniform(0.0, 0.5)))
        band = int(rng.integers(1, 5))
        got = trim_outline(props, depth, K, plane, floor, band)
        want = _plain_trim_outline(props, depth, K, plane, floor, band)
        for g, wnt, p in zip(got, want, props):
            assert np.array_equal(g.mask, wnt.mask) and g.box == wnt.box and (g is p) == (wnt is p)
    # a box beyond the frame (an empty window) leaves the proposal as it is, as the plain form does
    m = np.zeros((10, 12), bool)
    m[2:4, 2:4] = True
    far = Proposal((20, 20, 25, 25), m, np.zeros(3), np.zeros(3), 0.5)
    plane = _Plane(np.array([0.0, -1.0, 0.0]), 0.5, 0.5)
    K = CameraIntrinsics(50.0, 50.0, 6.0, 5.0)
    depth = np.ones((10, 12), np.float32)
    assert trim_outline([far], depth, K, plane, (0.1, 0.0), 2)[0] is far
    assert _plain_trim_outline([far], depth, K, plane, (0.1, 0.0), 2)[0] is far


def _plain_part_merged_shares(learned, geometry):
    def inside(a, b):
        return np.count_nonzero(a.mask & b.mask & _in_box(a) & _in_box(b)) / max(np.count_nonzero(a.mask & _in_box(a)), 1)
    return ([[inside(p, g) for g in geometry] for p in learned], [[inside(g, p) for g in geometry] for p in learned])


def _in_box(p: Proposal) -> np.ndarray:
    x0, y0, x1, y1 = p.box
    b = np.zeros(p.mask.shape, bool)
    b[y0:y1, x0:x1] = True
    return b


def test_part_merged_as_with_each_share_counted_on_its_own(monkeypatch):
    from cbcl_pr_ros.perception import segmenter as S

    rng = np.random.default_rng(37)
    for _ in range(150):
        h, w = (int(v) for v in rng.integers(10, 40, 2))
        learned, geometry = _random_masks(rng, h, w, int(rng.integers(1, 6))), _random_masks(rng, h, w, int(rng.integers(1, 6)))
        whole = None if rng.random() < 0.3 else float(rng.uniform(0.2, 1.0))
        got = S.part_merged(learned, geometry, 32, whole)
        # the plain shares, each counted from the whole masks: the same as the intersections counted once
        fwd, back = _plain_part_merged_shares(learned, geometry)
        for k, p in enumerate(learned):
            for i, g in enumerate(geometry):
                assert S._inside(p, g) == fwd[k][i] and S._inside(g, p) == back[k][i]
        with monkeypatch.context() as mp:  # each share by _inside, both ways round
            mp.setattr(S, "_common", lambda a, b: int(np.count_nonzero(a.mask & b.mask & _in_box(a) & _in_box(b))))
            want = S.part_merged(learned, geometry, 32, whole)
        assert [id(p) for p in got] == [id(p) for p in want]
