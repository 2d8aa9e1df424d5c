"""The issue's bad frames through every proposal method the extractor offers (``object_proposals``
depth, learned and hybrid), as the extractor calls them: never a crash, never a 3D position that is not
where an object is, and never more objects than the extractor allows."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.objects.extract import ExtractSettings, frame_proposals, proposal_segmenter, up_axis

from tabletop import DESK_BOXES, desk as _desk, desk_pose as _desk_pose, scene as _scene

METHODS = ("depth", "learned", "hybrid")


@pytest.fixture(scope="module", params=METHODS)
def settings(request) -> ExtractSettings:
    method = request.param
    return ExtractSettings(segmenter=proposal_segmenter(method), referee=method == "hybrid")


def _props(rgb, depth, K, settings, pose=None):
    props, pairs, unions = frame_proposals(rgb, depth, K, pose, None, settings)
    assert len(props) <= settings.max_objects
    return props


def _with_3d(props) -> list:
    return [p for p in props if p.has_depth]


def test_a_wall_at_30_cm(settings):
    wall = (0.0, 0.0, 0.0, lambda x, y: np.ones_like(x, bool))
    rgb, depth, K, _ = _scene([], [wall], (0.0, 0.0, 0.30), (0.0, 0.001, 0.0))
    noisy = (depth + np.random.default_rng(1).normal(0, 0.0005, depth.shape)).astype(np.float32)
    assert _with_3d(_props(rgb, noisy, K, settings)) == []


def test_a_floor_and_no_table(settings):
    floor = (0.0, 0.0, 0.0, lambda x, y: np.ones_like(x, bool))
    rgb, depth, K, _ = _scene([], [floor], (0.0, -0.6, 1.2), (0.0, 0.3, 0.0))
    noisy = depth + np.random.default_rng(2).normal(0, 1, depth.shape).astype(np.float32) * 0.003 * depth ** 2
    assert _with_3d(_props(rgb, noisy.astype(np.float32), K, settings)) == []


def test_depth_with_holes_everywhere(settings):
    rgb, depth, K, _ = _desk()
    holes = depth.copy()
    holes[np.random.default_rng(4).random(depth.shape) < 0.97] = np.nan
    assert _with_3d(_props(rgb, holes, K, settings)) == []


def test_no_depth_at_all(settings):
    rgb, depth, K, _ = _desk()
    assert _with_3d(_props(rgb, np.full_like(depth, np.nan), K, settings)) == []
    assert _with_3d(_props(rgb, None, None, settings)) == []


def test_an_upside_down_camera_with_its_pose_places_each_object_on_one(settings):
    rgb, depth, K, index = _desk()
    flipped = [np.ascontiguousarray(a[::-1, ::-1]) for a in (rgb, depth)]
    pose = _desk_pose(roll_deg=180.0)
    placed = _with_3d(_props(*flipped, K, settings, pose=pose))
    assert placed, "the desk's objects have depth and a level support: some must be placed"
    for p in placed:  # in the desk's frame, within 2 cm of one of the boxes it holds
        x, y, z = pose.to_fixed(p.centroid[None])[0]
        assert any(lo[0] - 0.02 <= x <= hi[0] + 0.02 and lo[1] - 0.02 <= y <= hi[1] + 0.02
                   and -0.02 <= z <= hi[2] + 0.02 for lo, hi in DESK_BOXES), (x, y, z)


def test_forty_objects_in_a_bin(settings):
    rng = np.random.default_rng(5)
    boxes = []
    for _ in range(40):
        x, y = -0.2 + 0.4 * rng.random(), -0.05 + 0.3 * rng.random()
        s, hgt = 0.02 + 0.03 * rng.random(), 0.02 + 0.08 * rng.random()
        boxes.append(((x, y, 0.0), (x + s, y + s, hgt)))
    bin_floor = (0.0, 0.0, 0.0, lambda x, y: np.ones_like(x, bool))
    rgb, depth, K, _ = _scene(boxes, [bin_floor], (0.0, -0.1, 0.7), (0.0, 0.1, 0.0))
    props = _props(rgb, depth, K, settings)
    assert props
    for p in _with_3d(props):
        assert 0.3 < p.centroid[2] < 1.2


def test_a_camera_pose_that_says_no_surface_is_level(settings):
    rgb, depth, K, _ = _desk()
    pose = _desk_pose(pitch_deg=180.0)  # the table seen from below: a ceiling
    assert up_axis(pose) is not None
    assert _with_3d(_props(rgb, depth, K, settings, pose=pose)) == []
