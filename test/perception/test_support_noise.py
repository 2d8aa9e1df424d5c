"""The support surface is the one objects stand on; height is judged against the camera's depth noise;
the same frame always gives the same proposals; bad frames give no wrong 3D.

Scenes are ray-cast exactly (table frame in metres, z up) and, where a real camera's noise matters,
given noise that grows with the square of the distance, as a structured-light or stereo camera's does.
"""
from __future__ import annotations

import hashlib
import logging
import math
import subprocess
import sys

import numpy as np

from cbcl_pr_ros.perception import ProposalConfig, box_iou, propose
from cbcl_pr_ros.perception.proposals import choose_support, support_planes

from tabletop import DESK_BOXES, Box3, desk as _desk, desk_pose as _desk_pose, scene as _scene


def _found(props, index: np.ndarray, n: int) -> list[set[int]]:
    """Per proposal, the boxes it holds (at least half of each box's visible pixels)."""
    seen = np.bincount(index.ravel(), minlength=n + 1)
    return [{i for i in range(1, n + 1) if (index[p.mask] == i).sum() >= 0.5 * seen[i]} for p in props]


def _points(depth: np.ndarray, K) -> tuple[np.ndarray, np.ndarray]:
    valid = np.isfinite(depth)
    zf = np.where(valid, depth, 0.0).astype(np.float32)
    h, w = depth.shape
    xs = ((np.arange(w) - K.cx) / K.fx)[None, :] * zf
    ys = ((np.arange(h) - K.cy) / K.fy)[:, None] * zf
    return np.stack([xs, ys, zf], axis=-1).astype(np.float32), valid


def test_a_desk_keeps_its_objects_over_a_lower_tilted_plane():
    rgb, depth, K, index = _desk()
    P, valid = _points(depth, K)
    cfg = ProposalConfig()
    planes = support_planes(P[valid], cfg)
    level = [p for p in planes if abs(float(p.normal @ planes[0].normal)) >= math.cos(math.radians(cfg.max_tilt_deg))]
    assert len(level) >= 2  # the trap: a second level plane, below the desk (farther from the camera)
    desk_offset = max(level, key=lambda p: p.inlier_fraction).offset
    assert max(p.offset for p in level) > desk_offset + 0.03  # "the lowest level plane" would be the wrong one
    chosen = choose_support(planes, cfg, P, valid)
    on_desk = np.abs(P[valid & (index == 0)] @ chosen.normal + chosen.offset) < 0.01
    assert on_desk.mean() > 0.5
    props = propose(rgb, depth, K)
    assert sorted(map(sorted, _found(props, index, 3))) == [[1], [2], [3]]


# A table 1 m below a RealSense-like camera; noise 4 mm at 1 m, growing with distance squared.
TABLE_EYE, TABLE_TARGET = (0.0, -0.45, 0.95), (0.0, 0.15, 0.0)
BOWL: Box3 = ((-0.06, 0.10, 0.0), (0.06, 0.22, 0.05))  # 5 cm high
BOTTLE: Box3 = ((0.12, 0.10, 0.0), (0.18, 0.16, 0.20))


def _noisy_table(seed: int = 3):
    table = (0.0, 0.0, 0.0, lambda x, y: np.ones_like(x, bool))
    rgb, depth, K, index = _scene([BOWL, BOTTLE], [table], TABLE_EYE, TABLE_TARGET)
    rng = np.random.default_rng(seed)
    noisy = depth + rng.normal(0.0, 1.0, depth.shape).astype(np.float32) * 0.004 * depth * depth
    return rgb, noisy.astype(np.float32), K, index


def _box_of(index: np.ndarray, i: int) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(index == i)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def test_a_noisy_camera_at_one_metre_keeps_a_5_cm_bowl_and_a_bottle_whole():
    rgb, depth, K, index = _noisy_table()
    assert 1.0 < float(np.nanmedian(depth)) < 1.3
    props = propose(rgb, depth, K)
    assert len(props) == 2
    for i in (1, 2):  # each object's box found, its 3D on the table
        best = max(props, key=lambda p: box_iou(p.box, _box_of(index, i)))
        assert box_iou(best.box, _box_of(index, i)) >= 0.7 and best.has_depth
    # one threshold of 13 times the table's spread (about 6 cm here) loses the bowl
    old = propose(rgb, depth, K, ProposalConfig(height_sigmas=13.0, seed_sigmas=13.0))
    assert max((box_iou(p.box, _box_of(index, 1)) for p in old), default=0.0) < 0.5


def _digest(props) -> str:
    h = hashlib.sha256()
    for p in props:
        h.update(np.asarray(p.box, np.int64).tobytes())
        h.update(np.packbits(p.mask).tobytes())
        h.update(np.round(np.concatenate([p.centroid, p.size, [p.score]]), 9).tobytes())
    return h.hexdigest()


_FRESH = """
import hashlib, sys
import numpy as np
from cbcl_pr_ros.perception import CameraIntrinsics, propose
f = np.load(sys.argv[1])
h = hashlib.sha256()
for p in propose(f["rgb"], f["depth"], CameraIntrinsics(*f["k"])):
    h.update(np.asarray(p.box, np.int64).tobytes())
    h.update(np.packbits(p.mask).tobytes())
    h.update(np.round(np.concatenate([p.centroid, p.size, [p.score]]), 9).tobytes())
print(h.hexdigest())
"""


def test_one_frame_gives_the_same_proposals_every_time_and_in_a_fresh_process(tmp_path):
    rgb, depth, K, _ = _noisy_table()
    first = _digest(propose(rgb, depth, K))
    np.random.seed(123)  # the global random state is no input
    assert {_digest(propose(rgb, depth, K)) for _ in range(20)} == {first}
    np.savez(tmp_path / "frame.npz", rgb=rgb, depth=depth, k=[K.fx, K.fy, K.cx, K.cy])
    out = subprocess.run([sys.executable, "-P", "-c", _FRESH, str(tmp_path / "frame.npz")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == first


# ----------------------------------------------------------------------------- bad frames


def _valid_3d(props) -> list:
    return [p for p in props if p.has_depth]


def test_a_wall_at_30_cm_gives_no_object_with_3d(caplog):
    wall = (0.0, 0.0, 0.0, lambda x, y: np.ones_like(x, bool))
    rgb, depth, K, _ = _scene([], [wall], (0.0, 0.0, 0.30), (0.0, 0.001, 0.0))
    assert 0.29 < float(np.nanmedian(depth)) < 0.35
    noisy = depth + np.random.default_rng(1).normal(0, 0.0005, depth.shape).astype(np.float32)
    with caplog.at_level(logging.INFO, logger="cbcl_pr_ros.perception.proposals"):
        props = propose(rgb, noisy, K)
    assert _valid_3d(props) == []


def test_a_floor_and_no_table_gives_no_object():
    floor = (0.0, 0.0, 0.0, lambda x, y: np.ones_like(x, bool))
    rgb, depth, K, _ = _scene([], [floor], (0.0, -0.6, 1.2), (0.0, 0.3, 0.0))
    noisy = depth + np.random.default_rng(2).normal(0, 1, depth.shape).astype(np.float32) * 0.003 * depth ** 2
    assert propose(rgb, noisy.astype(np.float32), K) == []


def test_an_upside_down_camera_finds_the_same_objects():
    rgb, depth, K, index = _desk()
    flipped = propose(np.ascontiguousarray(rgb[::-1, ::-1]), np.ascontiguousarray(depth[::-1, ::-1]), K)
    assert sorted(map(sorted, _found(flipped, index[::-1, ::-1], 3))) == [[1], [2], [3]]


def test_a_camera_on_its_side_finds_the_same_objects():
    """Without a camera pose nothing assumes which image direction is up: turned a quarter, the same boxes."""
    from cbcl_pr_ros.perception import CameraIntrinsics

    rgb, depth, K, index = _desk()
    h, w = depth.shape
    turned = CameraIntrinsics(K.fy, K.fx, K.cy, w - 1 - K.cx)  # np.rot90: (row, col) -> (w - 1 - col, row)
    props = propose(np.ascontiguousarray(np.rot90(rgb)), np.ascontiguousarray(np.rot90(depth)), turned)
    assert sorted(map(sorted, _found(props, np.rot90(index), 3))) == [[1], [2], [3]]
    assert all(p.has_depth for p in props)


def test_a_camera_pose_that_says_no_surface_is_level_gives_no_3d(caplog):
    from cbcl_pr_ros.perception import proposals

    rgb, depth, K, _ = _desk()
    proposals._SAID.clear()
    with caplog.at_level(logging.WARNING, logger="cbcl_pr_ros.perception.proposals"):
        props = propose(rgb, depth, K, ProposalConfig(up_axis=(1.0, 0.0, 0.0)))
    assert _valid_3d(props) == []
    assert any("no level surface" in r.getMessage() for r in caplog.records)


def test_an_upside_down_camera_with_its_pose_places_the_objects_where_they_are():
    from cbcl_pr_ros.objects.extract import up_axis

    rgb, depth, K, index = _desk()
    flipped = [np.ascontiguousarray(a[::-1, ::-1]) for a in (rgb, depth, index)]
    pose = _desk_pose(roll_deg=180.0)  # the camera turned over about its optical axis, and its pose says so
    props = propose(flipped[0], flipped[1], K, ProposalConfig(up_axis=up_axis(pose)))
    found = _found(props, flipped[2], 3)
    assert sorted(map(sorted, found)) == [[1], [2], [3]]
    for p, (i,) in zip(props, found):
        centre = np.add(*DESK_BOXES[i - 1]) / 2  # in the desk's frame, as the learner's position is
        assert np.linalg.norm(pose.to_fixed(p.centroid[None])[0] - centre) < 0.01


def test_a_pose_with_the_camera_below_the_surface_gives_no_3d(caplog):
    """A pose that says the camera looks up at the surface it sees (turned over about its x axis) makes
    the table a ceiling: nothing stands on a ceiling, and the pose would put every object a metre off."""
    from cbcl_pr_ros.objects.extract import up_axis
    from cbcl_pr_ros.perception import proposals

    rgb, depth, K, _ = _desk()
    proposals._SAID.clear()
    with caplog.at_level(logging.WARNING, logger="cbcl_pr_ros.perception.proposals"):
        props = propose(rgb, depth, K, ProposalConfig(up_axis=up_axis(_desk_pose(pitch_deg=180.0))))
    assert _valid_3d(props) == []
    assert any("no level surface" in r.getMessage() for r in caplog.records)


def test_a_frame_too_sparse_for_depth_says_so(caplog):
    from cbcl_pr_ros.perception import proposals

    rgb, depth, K, _ = _desk()
    holes = depth.copy()
    holes[np.random.default_rng(6).random(depth.shape) < 0.99] = np.nan
    proposals._SAID.clear()
    with caplog.at_level(logging.WARNING, logger="cbcl_pr_ros.perception.proposals"):
        props = propose(rgb, holes, K)
        propose(rgb, holes, K)  # the same complaint again at once: not repeated as a warning
    assert _valid_3d(props) == []
    said = [r for r in caplog.records if "hold a reading" in r.getMessage() and r.levelno == logging.WARNING]
    assert len(said) == 1


def test_depth_with_holes_everywhere_gives_no_wrong_3d():
    rgb, depth, K, index = _desk()
    holes = depth.copy()
    holes[np.random.default_rng(4).random(depth.shape) < 0.97] = np.nan
    props = propose(rgb, holes, K)
    assert _valid_3d(props) == []  # too few readings: the RGB method, no 3D claimed


def test_forty_objects_in_a_bin_stay_bounded():
    rng = np.random.default_rng(5)
    boxes = []
    for i in range(40):
        x, y = -0.2 + 0.4 * rng.random(), -0.05 + 0.3 * rng.random()
        s, hgt = 0.02 + 0.03 * rng.random(), 0.02 + 0.08 * rng.random()
        boxes.append(((x, y, 0.0), (x + s, y + s, hgt)))
    bin_floor = (0.0, 0.0, 0.0, lambda x, y: np.ones_like(x, bool))
    rgb, depth, K, _ = _scene(boxes, [bin_floor], (0.0, -0.1, 0.7), (0.0, 0.1, 0.0))
    cfg = ProposalConfig()
    props = propose(rgb, depth, K, cfg)
    assert 1 <= len(props) <= cfg.max_proposals
    for p in _valid_3d(props):
        assert 0.3 < p.centroid[2] < 1.2


def test_depth_asked_for_but_unusable_is_said_once_not_every_frame(caplog):
    """With ``method="depth"`` (the hybrid's referee asks for it on every frame) a camera that sees no
    level surface fell back to the RGB method with a warning on every frame: 30 lines a second."""
    from cbcl_pr_ros.perception import proposals

    rgb, depth, K, _ = _desk()
    proposals._SAID.clear()
    cfg = ProposalConfig(method="depth", up_axis=(1.0, 0.0, 0.0))  # a pose that makes no surface level
    with caplog.at_level(logging.WARNING, logger="cbcl_pr_ros.perception.proposals"):
        for _ in range(3):
            props = propose(rgb, depth, K, cfg)
    assert _valid_3d(props) == []
    said = [r for r in caplog.records if "depth unusable" in r.getMessage() and r.levelno == logging.WARNING]
    assert len(said) == 1
