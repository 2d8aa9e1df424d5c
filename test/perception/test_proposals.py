"""Object proposals on synthetic RGB-D scenes: plane + boxes, holes, other sizes, borders, RGB only."""
from __future__ import annotations

import numpy as np
import pytest
from synthetic import SynthObject, scene  # test/support: the RGB-D table scene

from cbcl_pr_ros.perception import CameraIntrinsics, Proposal, ProposalConfig, box_iou, fit_support_plane, propose

THREE = [
    SynthObject((40, 60, 90, 110), 0.06, (200, 30, 30)),
    SynthObject((140, 100, 180, 170), 0.10, (30, 40, 200)),
    SynthObject((220, 40, 280, 80), 0.04, (40, 160, 40)),
]


def _matches(props: list[Proposal], objects: list[SynthObject], min_iou: float = 0.7) -> list[int]:
    """Index of the proposal matching each object (by IoU), asserting each has one."""
    idx = []
    for o in objects:
        ious = [box_iou(p.box, o.box) for p in props]
        assert ious and max(ious) >= min_iou, f"object {o.box} not found; proposals {[p.box for p in props]}"
        idx.append(int(np.argmax(ious)))
    return idx


def test_plane_and_three_boxes_give_three_proposals_with_3d():
    rgb, depth, k, centres = scene(THREE)
    props = propose(rgb, depth, k)
    assert len(props) == 3
    for i, o in zip(_matches(props, THREE), THREE):
        p = props[i]
        assert p.mask is not None and p.mask.shape == rgb.shape[:2] and p.mask.dtype == bool
        x0, y0, x1, y1 = p.box
        assert p.mask[y0:y1, x0:x1].any() and not p.mask[:y0].any() and not p.mask[:, x1:].any()
        assert 0.0 <= p.score <= 1.0
        assert p.has_depth and np.all(np.isfinite(p.size))
        # completed down to the plane: the largest extent is at least the object's height
        assert p.size.max() >= 0.8 * o.height
    # the tallest box (0.10 m) is the one whose centroid is nearest the camera along the normal
    tall = props[_matches(props, THREE)[1]]
    assert np.linalg.norm(tall.centroid[:2] - centres[1][:2]) < 0.03


def test_plane_fit_recovers_the_table():
    rgb, depth, k, _ = scene([])
    v, u = np.nonzero(np.isfinite(depth))
    z = depth[v, u].astype(float)
    pts = np.stack([(u - k.cx) * z / k.fx, (v - k.cy) * z / k.fy, z], axis=1)
    plane = fit_support_plane(pts, ProposalConfig())
    assert plane is not None and plane.inlier_fraction > 0.95
    assert np.all(np.abs(pts @ plane.normal + plane.offset) < 0.006)
    assert plane.offset > 0  # the camera is above the table


def test_the_refined_support_plane_does_not_depend_on_the_ransac_seed():
    """RANSAC fits a random sample, so the plane (and the spread that sets the height threshold) moved
    with the seed: issue 20 measured 23 to 31 mm of threshold in one real frame. Fitted again to all the
    table's readings, the plane is the same for every seed."""
    from cbcl_pr_ros.perception.proposals import choose_support, refine_plane, support_planes

    rgb, depth, k, _ = scene([])
    depth = depth + np.random.default_rng(5).normal(0.0, 0.003, depth.shape).astype(np.float32)  # a noisy sensor
    valid = np.isfinite(depth)
    vv, uu = np.mgrid[: depth.shape[0], : depth.shape[1]]
    zz = np.where(valid, depth, 0.0)
    grid = np.stack([(uu - k.cx) * zz / k.fx, (vv - k.cy) * zz / k.fy, zz], axis=-1).astype(np.float32)
    pts = grid[valid].astype(float)

    def offsets(rounds: int) -> np.ndarray:
        out = []
        for seed in range(6):
            cfg = ProposalConfig.with_overrides(seed=seed)
            plane = refine_plane(choose_support(support_planes(pts, cfg), cfg, grid, valid), pts, cfg.rules.plane_tolerance_m, rounds)
            assert np.all(np.abs(pts @ plane.normal + plane.offset)[:: 97] < 0.02)
            out.append([*plane.normal, plane.offset])
        return np.asarray(out)

    raw, refined = offsets(0), offsets(ProposalConfig().rules.support_refits)
    assert np.ptp(refined[:, 3]) < 5e-5 and np.ptp(refined[:, :3], axis=0).max() < 1e-4
    assert np.ptp(refined[:, 3]) < 0.1 * np.ptp(raw[:, 3])  # what the sample alone gave
    with pytest.raises(ValueError, match="support_refits"):
        ProposalConfig.with_overrides(support_refits=-1)


def test_touching_boxes_of_different_height_are_split():
    objs = [SynthObject((80, 80, 140, 150), 0.05, (180, 60, 60)), SynthObject((140, 80, 200, 150), 0.11, (180, 70, 60))]
    props = propose(*scene(objs)[:3])
    assert len(props) == 2
    _matches(props, objs)


def test_touching_boxes_of_equal_height_split_by_colour_when_asked():
    objs = [SynthObject((80, 80, 140, 150), 0.06, (200, 30, 30)), SynthObject((140, 80, 200, 150), 0.06, (30, 40, 200))]
    rgb, depth, k, _ = scene(objs)
    assert len(propose(rgb, depth, k)) == 1  # default: depth alone cannot tell them apart
    props = propose(rgb, depth, k, ProposalConfig(depth_edges="grey+chroma"))
    assert len(props) == 2
    _matches(props, objs)


def test_nan_and_zero_holes_do_not_break_it():
    rgb, depth, k, _ = scene(THREE)
    rng = np.random.default_rng(1)
    holes = rng.random(depth.shape) < 0.2
    depth[holes & (rng.random(depth.shape) < 0.5)] = np.nan
    depth[holes] = np.where(np.isnan(depth[holes]), np.nan, 0.0)
    depth[150:, :60] = np.nan  # a large hole
    props = propose(rgb, depth, k)
    _matches(props, THREE, min_iou=0.6)


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_depth_of_another_size_is_resized(factor):
    rgb, depth, k, _ = scene(THREE)
    import cv2

    other = cv2.resize(depth, (int(depth.shape[1] * factor), int(depth.shape[0] * factor)), interpolation=cv2.INTER_NEAREST)
    props = propose(rgb, other, k)
    assert len(props) == 3
    assert all(p.has_depth for p in props)
    _matches(props, THREE)


def test_no_objects_gives_nothing():
    rgb, depth, k, _ = scene([])
    assert propose(rgb, depth, k) == []
    assert propose(rgb, None, None) == []


def test_object_at_the_border_is_clipped():
    objs = [SynthObject((-30, 100, 50, 160), 0.07, (30, 40, 200))]
    rgb, depth, k, _ = scene(objs)
    props = propose(rgb, depth, k)
    assert len(props) == 1
    x0, y0, x1, y1 = props[0].box
    assert x0 == 0 and 0 <= y0 < y1 <= rgb.shape[0] and x1 <= rgb.shape[1]
    assert box_iou(props[0].box, (0, 100, 50, 160)) > 0.7


def test_rgb_only_finds_coloured_objects_without_3d():
    rgb, _, _, _ = scene(THREE)
    props = propose(rgb, None, None)
    _matches(props, THREE, min_iou=0.6)
    assert all(not p.has_depth and np.all(np.isnan(p.size)) for p in props)
    # asking for RGB explicitly ignores a good depth image
    rgb, depth, k, _ = scene(THREE)
    assert all(not p.has_depth for p in propose(rgb, depth, k, ProposalConfig(method="rgb")))


@pytest.mark.parametrize("bad", [
    "all_nan", "zeros", "three_channels", "one_row", "strings", "no_intrinsics", "no_plane", "millimetres",
    "other_aspect",
])
def test_unusable_depth_falls_back_to_rgb(bad):
    rgb, depth, k, _ = scene(THREE)
    if bad == "all_nan":
        depth = np.full_like(depth, np.nan)
    elif bad == "zeros":
        depth = np.zeros_like(depth)
    elif bad == "three_channels":
        depth = np.repeat(depth[:, :, None], 3, axis=2)
    elif bad == "one_row":
        depth = depth[:1]
    elif bad == "strings":
        depth = np.array([["a", "b"], ["c", "d"]])
    elif bad == "no_intrinsics":
        k = None
    elif bad == "millimetres":  # a 16UC1 image in mm passed as metres: no reading is at table distance
        depth = depth * 1000.0
    elif bad == "no_plane":  # random depths: no plane holds a fifth of them
        depth = np.random.default_rng(0).uniform(0.3, 3.0, depth.shape).astype(np.float32)
    elif bad == "other_aspect":  # a raw (not aligned) depth stream of another shape: resizing it would misplace 3D
        depth = depth[:180]
    props = propose(rgb, depth, k)
    _matches(props, THREE, min_iou=0.6)
    assert all(not p.has_depth for p in props)


def test_depth_fallback_is_logged_when_depth_was_asked_for(caplog):
    from cbcl_pr_ros.perception import proposals

    rgb, depth, k, _ = scene(THREE)
    proposals._SAID.clear()  # said at most every 10 s per kind: an earlier test may have said it
    with caplog.at_level("WARNING"):
        props = propose(rgb, np.full_like(depth, np.nan), k, ProposalConfig(method="depth"))
    assert "using the RGB method" in caplog.text and all(not p.has_depth for p in props)


def test_up_axis_rejects_a_support_that_is_not_level():
    rgb, depth, k, _ = scene(THREE)
    level = propose(rgb, depth, k)
    assert level and all(p.has_depth for p in level)
    # the same table declared vertical (up along the optical axis x): no level support, no 3D claimed
    props = propose(rgb, depth, k, ProposalConfig(up_axis=(1.0, 0.0, 0.0)))
    assert all(not p.has_depth for p in props)


def test_bad_rgb_is_a_clear_error():
    with pytest.raises(ValueError, match="rgb"):
        propose(np.zeros((10, 10), np.uint8), None, None)
    with pytest.raises(TypeError, match="uint8"):
        propose(np.zeros((10, 10, 3), np.float32), None, None)


def test_config_is_validated():
    with pytest.raises(ValueError, match="method"):
        ProposalConfig(method="yolo")
    with pytest.raises(ValueError, match="min_size_m"):
        ProposalConfig(min_size_m=0.5, max_size_m=0.1)
    with pytest.raises(ValueError, match="depth_edges"):
        ProposalConfig(depth_edges="sobel")
    with pytest.raises(ValueError, match="max_tilt_deg"):
        ProposalConfig(max_tilt_deg=90)
    with pytest.raises(ValueError, match="up_axis"):
        ProposalConfig(up_axis=(0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="height_sigmas"):
        ProposalConfig(height_sigmas=-1)
    with pytest.raises(ValueError, match="max_planes"):
        ProposalConfig.with_overrides(max_planes=0)


def test_intrinsics_from_k_and_scaling():
    k = CameraIntrinsics.from_k([500.0, 0, 319.5, 0, 510.0, 239.5, 0, 0, 1])
    assert (k.fx, k.fy, k.cx, k.cy) == (500.0, 510.0, 319.5, 239.5)
    half = k.scaled(0.5, 0.5)
    assert half.fx == 250.0 and half.cx == pytest.approx(159.5)
    with pytest.raises(ValueError, match="9 numbers"):
        CameraIntrinsics.from_k([1, 2, 3])
    with pytest.raises(ValueError, match="focal"):
        CameraIntrinsics(0.0, 1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="finite"):
        CameraIntrinsics(float("nan"), 1.0, 0.0, 0.0)


def test_full_resolution_masks_and_boxes_at_640x480():
    rgb, depth, k, _ = scene([SynthObject((100, 120, 200, 260), 0.08, (200, 30, 30))], width=640, height=480)
    props = propose(rgb, depth, k)
    assert len(props) == 1 and props[0].mask.shape == (480, 640)
    assert box_iou(props[0].box, (100, 120, 200, 260)) > 0.9


def test_intrinsics_are_scaled_to_the_image_or_refused():
    from cbcl_pr_ros.perception.types import intrinsics_for_image

    K = CameraIntrinsics(600.0, 600.0, 319.5, 239.5)
    assert intrinsics_for_image(K, (640, 480), (480, 640, 3)) == (K, "")
    assert intrinsics_for_image(K, (0, 0), (240, 320)) == (K, "")  # size unknown: taken as the image's
    half, why = intrinsics_for_image(K, (640, 480), (240, 320, 3))
    assert why == "" and half.fx == pytest.approx(300.0) and half.cx == pytest.approx(159.5)
    none, why = intrinsics_for_image(K, (1280, 720), (480, 640))
    assert none is None and "1280x720" in why and "no 3D" in why
    none, why = intrinsics_for_image(None, None, (480, 640))
    assert none is None and "no CameraInfo" in why
    for odd in (CameraIntrinsics(1e-300, 1e-300, 319.5, 239.5), CameraIntrinsics(6.3, 600.0, 319.5, 239.5),
                CameraIntrinsics(7e5, 600.0, 319.5, 239.5), CameraIntrinsics(600.0, 600.0, 1281.0, 239.5),
                CameraIntrinsics(600.0, 600.0, 319.5, -481.0)):
        none, why = intrinsics_for_image(odd, None, (480, 640))
        assert none is None and "is no camera's for a 640x480 image" in why
    for wide_or_long in (CameraIntrinsics(6.5, 6.5, -600.0, 900.0), CameraIntrinsics(6e5, 6e5, 319.5, 239.5)):
        assert intrinsics_for_image(wide_or_long, None, (480, 640)) == (wide_or_long, "")
    none, why = intrinsics_for_image(CameraIntrinsics(600.0, 600.0, 1e308, 1e308), (320, 240), (480, 640))
    assert none is None and "no camera's" in why  # scaled twice: no longer finite


@pytest.mark.parametrize("change, expect", [
    (lambda d: d, ""),
    (lambda d: d[::2, ::2], ""),  # half size, same aspect ratio: a reduced aligned stream, resized
    (lambda d: d[:180], "another aspect ratio"),
    (lambda d: np.full_like(d, np.nan), "no reading"),
    (lambda d: np.zeros_like(d), "no reading"),
    (lambda d: d * 1000.0, "millimetres sent as 32FC1"),
    (lambda d: np.round(d) * 0.001, "metres sent as 16UC1"),  # 0.6 m written as 1 (mm) in a 16UC1 image
    (lambda d: d[:, :, None].repeat(3, axis=2), "not a 2-D image"),
    (lambda d: np.array([["a", "b"], ["c", "d"]]), "not numeric"),
])
def test_depth_problem_names_what_is_wrong(change, expect):
    """The reason a camera node warns with; "" exactly when the depth can give 3D for the image."""
    from cbcl_pr_ros.perception import depth_problem

    rgb, depth, k, _ = scene(THREE)
    why = depth_problem(change(depth), rgb.shape)
    assert (expect in why and why) if expect else why == "", why
    if expect:  # whatever depth_problem refuses, propose does not turn into 3D
        props = propose(rgb, change(depth), k)
        assert props and all(not p.has_depth for p in props)


def test_the_per_object_quantile_is_numpys_bit_for_bit():
    from cbcl_pr_ros.perception.proposals import _quantile

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 7, 50, 333):
        # twice per size and type: the second time the same order statistics are taken from the first's plan
        for dtype in (np.float32, np.float64, np.float32, np.float64):
            x = (rng.normal(0, 1, (n, 3)) * 0.1).astype(dtype)
            x[: n // 3] = x[0]  # ties
            for q in (0.0, 0.02, 0.5, 0.98, 1.0):
                a, b = np.quantile(x[:, 1], q), _quantile(x[:, 1], q)
                assert type(a) is type(b) and a.tobytes() == b.tobytes()
            a, b = np.quantile(x, [0.02, 0.98], axis=0), _quantile(x, (0.02, 0.98))
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    from cbcl_pr_ros.perception.proposals import _quantile_plan

    plan = _quantile_plan(50, (0.02, 0.98), 2)
    assert all(not arr.flags.writeable for arr in plan if isinstance(arr, np.ndarray))  # shared: never written
    x = rng.normal(0, 1, (20, 3))
    x[4, 1] = np.nan  # a column with NaN gives NaN, as numpy's
    assert np.array_equal(_quantile(x, (0.02, 0.98)), np.quantile(x, [0.02, 0.98], axis=0), equal_nan=True)


def test_the_per_seam_median_is_numpys_bit_for_bit():
    from cbcl_pr_ros.perception.proposals import _median

    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 4, 9, 50, 51):
        for dtype in (np.float32, np.float64):
            x = (rng.normal(0, 1, n) * 0.01).astype(dtype)
            x[: n // 3] = x[-1]  # ties
            a, b = np.median(x), _median(x)
            assert type(a) is type(b) and a.tobytes() == b.tobytes()
    assert np.isnan(_median(np.array([1.0, np.nan, 2.0])))


def test_boxes_of_enlarged_labels_are_those_of_the_whole_full_size_image():
    import cv2
    from scipy import ndimage

    from cbcl_pr_ros.perception.proposals import _enlarged_slices

    rng = np.random.default_rng(0)
    for sh, sw, h, w in ((240, 320, 480, 640), (120, 160, 480, 640), (187, 320, 300, 513), (2, 3, 5, 7)):
        for rep in range(10):
            lab = np.zeros((sh, sw), np.int32)
            for i in range(1, int(rng.integers(2, 8))):
                y, x = rng.integers(0, sh), rng.integers(0, sw)
                lab[y:y + rng.integers(1, max(2, sh // 3)), x:x + rng.integers(1, max(2, sw // 3))] = i
                lab[rng.integers(0, sh), rng.integers(0, sw)] = i  # a stray pixel far from the rest
            n = int(lab.max()) + 1  # one label more than there are: None, as find_objects gives
            full = cv2.resize(lab, (w, h), interpolation=cv2.INTER_NEAREST)
            assert _enlarged_slices(lab, full, n) == ndimage.find_objects(full, max_label=n)


def test_masks_of_labels_a_power_of_two_smaller_are_those_of_the_enlarged_image():
    import cv2

    from cbcl_pr_ros.perception.proposals import ProposalConfig, _assemble, _block_factor

    assert [_block_factor(s, (480, 640)) for s in ((240, 320), (120, 160), (60, 80), (160, 213), (480, 640))] \
        == [2, 4, 8, 0, 0]
    assert _block_factor((120, 160), (480, 320)) == 0  # not the same factor both ways
    rng = np.random.default_rng(1)
    config = ProposalConfig(max_proposals=64)
    for sh, sw, f in ((240, 320, 2), (120, 160, 4), (60, 80, 8), (3, 5, 16)):
        for rep in range(15):
            lab = np.zeros((sh, sw), np.int32)
            n = int(rng.integers(1, 9))
            for i in range(1, n + 1):
                y, x = rng.integers(0, sh), rng.integers(0, sw)
                lab[y:y + rng.integers(1, max(2, sh // 3)), x:x + rng.integers(1, max(2, sw // 3))] = i
                lab[rng.integers(0, sh), rng.integers(0, sw)] = i  # a stray pixel far from the rest
            geo = [(np.full(3, 0.1 * i), np.full(3, 0.05), float(rng.random())) for i in range(n + 1)]
            full = cv2.resize(lab, (sw * f, sh * f), interpolation=cv2.INTER_NEAREST)
            got, want = _assemble(lab, geo, full.shape, config), _assemble(full, geo, full.shape, config)
            assert len(got) == len(want) == len(np.unique(lab[lab > 0]))
            for a, b in zip(got, want):
                assert a.box == b.box and a.score == b.score and np.array_equal(a.mask, b.mask)
                assert np.array_equal(a.centroid, b.centroid)


def _grow_down_everywhere(labels: np.ndarray, fg: np.ndarray) -> np.ndarray:
    """The growth of ``_grow_down`` over the whole image in float32 labels: what it must equal."""
    import cv2

    from cbcl_pr_ros.perception.proposals import _GROW_PX

    out = labels.astype(np.int32).copy()
    rest = fg & (out == 0)
    if rest.any() and out.any():
        for _ in range(_GROW_PX):
            grown = cv2.dilate(out.astype(np.float32), np.ones((3, 3), np.uint8)).astype(np.int32)
            add = rest & (grown > 0)
            if not add.any():
                break
            out[add] = grown[add]
            rest &= ~add
    return out


def test_objects_grow_down_as_over_the_whole_image():
    from cbcl_pr_ros.perception.proposals import _grow_down

    rng = np.random.default_rng(0)
    for rep in range(200):
        h, w = (int(v) for v in rng.integers(2, 60, 2))
        labels = np.zeros((h, w), np.int32)
        for i in range(1, int(rng.integers(1, 6))):
            y, x = rng.integers(0, h), rng.integers(0, w)
            labels[y:y + rng.integers(1, 12), x:x + rng.integers(1, 12)] = i
        if rep % 10 == 0:
            labels[labels > 0] += 70000  # labels beyond 16 bits
        fg = (rng.random((h, w)) < rng.random()) | (labels > 0)
        if rep % 3 == 0:  # connected bands to grow along, far from the objects too
            fg |= _band(h, w, rng)
        grown = _grow_down(labels, fg, 5)
        ref = _grow_down_everywhere(labels, fg)
        # the growth is the same; what no object reached becomes objects of their own or stays 0
        reached = ref > 0
        assert np.array_equal(grown[reached], ref[reached])
        assert not np.isin(grown[~reached & (grown > 0)], labels[labels > 0]).any()
        assert grown.dtype == np.int32


def _band(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A one-to-three-pixel-wide horizontal band across the image."""
    band = np.zeros((h, w), bool)
    y = int(rng.integers(0, h))
    band[y:y + int(rng.integers(1, 4))] = True
    return band


def test_depth_steps_are_those_of_the_edge_padded_neighbours():
    from cbcl_pr_ros.perception.proposals import _steps

    rng = np.random.default_rng(2)
    for rep in range(300):
        h, w = (int(v) for v in rng.integers(1, 9, 2))
        zz = rng.random((h, w)).astype(np.float32 if rep % 2 else np.float64)
        zz[rng.random((h, w)) < 0.3] = 0
        for axis in (0, 1):
            if zz.shape[axis] < 2:
                continue
            d = np.abs(np.diff(zz, axis=axis))
            pad = [(0, 0), (0, 0)]
            pad[axis] = (1, 1)
            e = np.pad(d, pad, mode="edge")  # each difference's neighbours, the ends repeated
            n = d.shape[axis]
            lo = np.minimum(np.take(e, range(0, n), axis=axis), np.take(e, range(2, n + 2), axis=axis))
            for ratio in (0.0, 1.0, 2.0):
                want = d >= ratio * lo if ratio > 0 else np.ones(d.shape, bool)
                assert np.array_equal(_steps(d, axis, ratio), want)


def test_usable_depth_and_noise_sigma_are_their_plain_formulas():
    from cbcl_pr_ros.perception.proposals import _noise_scale, _noise_sigma, _usable_depth

    rng = np.random.default_rng(3)
    for rep in range(50):
        d = rng.uniform(-0.5, 3.0, (24, 32)).astype(np.float32)
        d.ravel()[rng.integers(0, d.size, 40)] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], 40)
        given = d.copy()
        got = _usable_depth(d, d.shape)
        want = np.where(np.isfinite(given) & (given > 0), given, np.nan).astype(np.float32)
        assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
        assert np.array_equal(d, given, equal_nan=True)  # the caller's depth is left alone
        z = np.nan_to_num(got, nan=0.0)
        valid = z > 0
        height = np.where(valid, rng.normal(0, 0.003, d.shape), np.nan).astype(np.float32)
        for zz in (z, z.astype(np.float64)):
            for hh in (height, height.astype(np.float64)):
                near = valid & (np.abs(hh) < 0.03)
                want = max(1.4826 * float(np.median(np.abs(hh[near]) / (zz[near] * zz[near]))), 0.0008)
                assert _noise_scale(hh, zz, valid) == want
            want = (_noise_scale(height, zz, valid) * zz * zz).astype(np.float32)
            got = _noise_sigma(height, zz, valid, ProposalConfig())
            assert got.dtype == np.float32 and got.tobytes() == want.tobytes()


def test_object_geometry_is_that_of_the_plain_quantiles():
    from cbcl_pr_ros.perception.proposals import _geometry, _Plane

    rng = np.random.default_rng(4)
    K = CameraIntrinsics(fx=60.0, fy=60.0, cx=16.0, cy=12.0)
    config = ProposalConfig()
    normal = np.array([0.05, -0.9, -0.4])
    normal /= np.linalg.norm(normal)
    plane = _Plane(normal, 0.33, 0.5)
    answered = 0
    for rep in range(60):
        P = rng.uniform([-0.05, -0.05, 0.6], [0.05, 0.05, 0.68], (24, 32, 3)).astype(np.float32)
        height = (P @ normal.astype(np.float32) + np.float32(plane.offset)).astype(np.float32)
        fg = rng.random((24, 32)) < 0.8
        sl = (slice(int(rng.integers(0, 8)), int(rng.integers(14, 24))), slice(int(rng.integers(0, 8)), int(rng.integers(20, 32))))
        m = rng.random((sl[0].stop - sl[0].start, sl[1].stop - sl[1].start)) < 0.7
        surface = None if rep % 2 else rng.random((24, 32)) < 0.9
        got = _geometry(m, sl, fg, P, height, plane, surface, K, config)
        # the same answer from the plain formulas
        sel = m & fg[sl]
        pts, hs = P[sl][sel], height[sl][sel]
        feet = pts - hs[:, None] * plane.normal
        lo, hi = np.quantile(np.concatenate([pts, feet]), [0.02, 0.98], axis=0)
        if got is None:
            continue
        answered += 1
        flo, fhi = np.quantile(feet, [0.02, 0.98], axis=0)
        mid = (flo + fhi) / 2
        mid = mid - (mid @ plane.normal + plane.offset) * plane.normal
        top = float(np.quantile(hs, 0.98))
        assert got[1].tobytes() == (hi - lo).tobytes()
        assert got[0].tobytes() == (mid + plane.normal * (top / 2)).tobytes()
        fill = float(m.mean())  # the objectness from the plain mean of the box's bools
        assert got[2] == float(np.sqrt(min(1.0, fill / 0.6) * min(1.0, top / (4 * config.min_height_m))))
    assert answered > 10


def test_bool_counts_are_the_plain_sums_and_means():
    # the counts that replace bool sums and means: the same numbers, compared and divided the same way
    rng = np.random.default_rng(43)
    for _ in range(300):
        shape = tuple(int(v) for v in rng.integers(1, 300, int(rng.integers(1, 3))))
        b = rng.random(shape) < rng.choice([0.0, 0.001, 0.3, 0.999, 1.0])
        assert np.count_nonzero(b) == b.sum() and np.count_nonzero(b) / b.size == float(b.mean())


def test_vectors_selected_as_12_byte_items_are_numpys_selection():
    from cbcl_pr_ros.perception.proposals import _rows

    rng = np.random.default_rng(7)
    for rep in range(100):
        h, w = int(rng.integers(1, 30)), int(rng.integers(1, 30))
        P = rng.standard_normal((h, w, 3)).astype(np.float32 if rep % 5 else np.float64)
        P[rng.random((h, w)) < 0.1] = np.nan
        y0, x0 = int(rng.integers(0, h)), int(rng.integers(0, w))
        y1, x1 = int(rng.integers(y0, h + 1)), int(rng.integers(x0, w + 1))
        box = P[y0:y1, x0:x1]  # a view inside the image, as an object's box
        keep = rng.random(box.shape[:2]) < rng.choice([0.0, 0.5, 1.0])
        for a, k in ((box, keep), (P.reshape(-1, 3), (rng.random(h * w) < 0.6))):
            got, want = _rows(a, k), a[k]
            assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    # the plane fit's inlier counts, in int32 over the bools' bytes, are the bool sums
    inliers = rng.random((1500, 100)) < 0.3
    assert np.array_equal(inliers.view(np.uint8).sum(axis=0, dtype=np.int32), inliers.sum(axis=0))


def test_the_quantile_asks_only_for_the_places_it_reads_and_stays_numpys():
    from cbcl_pr_ros.perception.proposals import _quantile

    rng = np.random.default_rng(8)
    for rep in range(400):
        n = int(rng.integers(1, 400))
        dtype = np.float32 if rep % 2 else np.float64
        if rep % 4 < 2:  # few distinct values: many ties, some of them zeros of both signs
            x = rng.choice(np.array([-1.5, -0.0, 0.0, 0.25, 2.0, 7.0], dtype), (n, 3))
        else:
            x = rng.normal(0, 1, (n, 3)).astype(dtype)
        for q in (0.0, 0.02, 0.5, 0.98, 1.0):
            a, b = np.quantile(x[:, 0], q), _quantile(np.ascontiguousarray(x[:, 0]), q)
            assert type(a) is type(b) and a.tobytes() == b.tobytes()
        a, b = np.quantile(x, [0.02, 0.98], axis=0), _quantile(x, (0.02, 0.98))
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_support_region_is_that_of_the_plain_label_lookup():
    import cv2

    from cbcl_pr_ros.perception.proposals import _support_region
    from cbcl_pr_ros.perception.regions import label_areas

    def plain(inliers: np.ndarray, share: float) -> np.ndarray:
        m = cv2.morphologyEx(inliers.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
        n, lab, areas = label_areas(m, 8)
        region = np.zeros(inliers.shape, np.uint8)
        if n <= 1:
            return region.astype(bool)
        chosen = 1 + np.flatnonzero(areas[1:] >= min(share, 1.0) * areas[1:].max())
        pick = np.zeros(n, np.uint8)
        pick[chosen] = 1
        contours, _ = cv2.findContours(pick[lab], cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        cv2.fillConvexPoly(region, cv2.convexHull(np.vstack(contours)), 1)
        return cv2.dilate(region, np.ones((7, 7), np.uint8)).astype(bool)

    rng = np.random.default_rng(10)
    for rep in range(150):
        h, w = int(rng.integers(8, 80)), int(rng.integers(8, 80))
        inliers = rng.random((h, w)) < rng.choice([0.0, 0.05, 0.3, 0.8])
        if rep % 4 == 0:  # many small patches: more than a byte of labels
            inliers = np.zeros((160, 160), bool)
            inliers[::6, ::6] = True
        for share in (0.0, 0.2, 1.0):
            assert np.array_equal(_support_region(inliers, share), plain(inliers, share))


def test_the_median_between_sampled_bounds_is_the_full_partitions():
    from cbcl_pr_ros.perception.proposals import _median, _middle_between_bounds

    def partitioned(a: np.ndarray) -> np.floating:  # the plain form: one partition of every value
        h = a.shape[0] // 2
        if a.shape[0] % 2:
            return np.partition(a, h)[h]
        s = np.partition(a, (h - 1, h))
        return (s[h - 1] + s[h]) / 2

    rng = np.random.default_rng(11)
    fast = 0
    for rep in range(600):
        n = int(rng.choice([4096, 4097, 5001, int(rng.integers(4096, 50000))]))
        kind = rep % 6
        if kind == 0:
            a = rng.standard_normal(n)
        elif kind == 1:  # the table's spread: small positive values
            a = np.abs(rng.standard_normal(n)) * 1e-3
        elif kind == 2:  # few values, zeros of both signs among them
            a = rng.choice([-1.0, -0.0, 0.0, 0.5, 2.0], n)
        elif kind == 3:
            a = np.sort(rng.standard_normal(n))
        elif kind == 4:  # smooth, as an image's rows read in order
            a = np.cumsum(rng.standard_normal(n))
        else:  # every sampled value the same: the bounds hold one value
            a = np.tile(rng.standard_normal(16), n // 16 + 1)[:n]
        a = a.astype(np.float32 if rep % 2 else np.float64)
        got, want = _median(a), partitioned(a)
        assert type(got) is type(want) and got.tobytes() == want.tobytes()
        if not (a == 0).any():
            assert got.tobytes() == np.median(a).tobytes()
        fast += _middle_between_bounds(a, n // 2, n % 2 == 0) is not None
    assert fast > 300  # most take the bounds' way


def test_areas_of_the_pieces_asked_are_their_pixel_counts():
    from cbcl_pr_ros.perception.proposals import _areas_of

    rng = np.random.default_rng(41)
    for _ in range(200):
        h, w = (int(v) for v in rng.integers(1, 50, 2))
        n = int(rng.integers(1, 20))
        labels = rng.integers(0, n + 1, (h, w)).astype(np.int32)
        asked = np.unique(rng.integers(0, n + 1, int(rng.integers(0, 8))))
        want = np.zeros(n + 1, np.int64)
        for i in asked:
            want[i] = np.count_nonzero(labels == i)
        got = _areas_of(labels, asked, n)
        assert got.dtype == np.int64 and np.array_equal(got, want)


def test_a_3d_position_away_from_where_the_object_is_seen_is_not_reported():
    """A centroid lies inside the object's volume, seen where its box is: one projecting a whole box
    away (a wall taken for the support, a hand placed half-way down to the table) or behind the camera
    loses its 3D; the box, mask and score stay, and a centroid near its box keeps its 3D as it was."""
    from cbcl_pr_ros.perception.proposals import MISPLACED_BOXES, without_misplaced_3d

    K = CameraIntrinsics(500.0, 500.0, 320.0, 240.0)
    box = (300, 200, 340, 260)  # 40 x 60 px around the principal point
    mask = np.zeros((480, 640), bool)
    mask[200:260, 300:340] = True

    def at(u: float, v: float, z: float = 1.0) -> Proposal:
        return Proposal(box, mask, np.array([(u - 320.0) * z / 500.0, (v - 240.0) * z / 500.0, z]),
                        np.array([0.05, 0.1, 0.05]), 0.8)

    kept = [at(320, 230), at(300 - 39, 230), at(320, 260 + 59)]  # inside; within one box width / height
    gone = [at(300 - 41 - 40 * (MISPLACED_BOXES - 1), 230), at(320, 260 + 61 + 60 * (MISPLACED_BOXES - 1)),
            at(320, 230, z=-1.0)]
    flat = Proposal(box, mask, np.full(3, np.nan), np.full(3, np.nan), 0.5)  # RGB-only: untouched
    out = without_misplaced_3d(kept + gone + [flat], K)
    assert [p.has_depth for p in out] == [True, True, True, False, False, False, False]
    for before, after in zip(kept, out):
        assert after is before
    for p in out[3:6]:
        assert p.box == box and p.mask is mask and p.score == 0.8 and np.isnan(p.size).all()



def test_propose_and_the_extractor_report_no_3d_off_its_box(monkeypatch):
    """Every path the extractor takes (``propose``, the learned and the hybrid proposals) goes through
    the check: a proposal placed a wall's distance away comes out without 3D."""
    import cbcl_pr_ros.objects.extract as extract
    import cbcl_pr_ros.perception.proposals as proposals

    rgb, depth, K = scene([SynthObject((260, 200, 320, 260), 0.08, (200, 40, 40))])[:3]
    box = (260, 200, 320, 260)
    misplaced = Proposal(box, None, np.array([2.0, 0.0, 1.0]), np.full(3, 0.1), 0.9)  # 1000 px to the right
    monkeypatch.setattr(proposals, "propose_on_support", lambda *a, **k: ([misplaced], None))
    assert not propose(rgb, depth, K)[0].has_depth
    for referee in (False, True):
        learned = "propose_hybrid" if referee else "propose_learned"
        monkeypatch.setattr(extract, learned, lambda *a, **k: [misplaced])
        out = extract._propose(rgb, depth, K, None, segmenter=object(), referee=referee)
        assert len(out) == 1 and out[0].box == box and not out[0].has_depth
