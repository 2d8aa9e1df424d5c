"""A part that hangs on a larger piece is that piece (a mug's handle); objects that stand stay apart.

Scenes are ray-cast exactly: a table (z = 0) and axis-aligned boxes in the table frame (metres), seen
by a pinhole camera above the table looking down at it obliquely, as the robot's hand camera does.
"""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.perception import CameraIntrinsics, ProposalConfig, propose

from synthetic import camera_rays

Box3 = tuple[tuple[float, float, float], tuple[float, float, float]]

BODY: Box3 = ((-0.04, 0.0, 0.0), (0.04, 0.08, 0.10))  # a mug's body: 8 cm wide, 10 cm high
HANDLE: Box3 = ((0.04, 0.035, 0.035), (0.075, 0.045, 0.085))  # on its side, 3.5 cm above the table
BESIDE: Box3 = ((-0.075, 0.01, 0.0), (-0.04, 0.05, 0.05))  # a small box standing against its other side
ON_TOP: Box3 = ((-0.02, 0.02, 0.10), (0.015, 0.05, 0.13))  # a small box standing on the body's top
FLOATING: Box3 = ((0.12, 0.03, 0.04), (0.16, 0.06, 0.08))  # hangs in the air, touching nothing


def raycast(boxes: list[Box3], eye=(0.0, -0.28, 0.42), target=(0.0, 0.04, 0.0), w: int = 320, h: int = 240,
            f: float = 280.0) -> tuple[np.ndarray, np.ndarray, CameraIntrinsics, np.ndarray]:
    """(rgb, depth in metres, intrinsics, index map: 0 table, i the i-th box) of the boxes on the table."""
    eye, d, K = camera_rays(eye, target, w, h, f)  # d: depth 1 along each ray
    t_best = np.where(d[..., 2] < 0, -eye[2] / d[..., 2], np.inf)  # the table
    index = np.zeros((h, w), int)
    for i, (lo, hi) in enumerate(boxes, start=1):
        with np.errstate(divide="ignore", invalid="ignore"):
            t1, t2 = (np.asarray(lo) - eye) / d, (np.asarray(hi) - eye) / d
        t_in = np.nanmax(np.minimum(t1, t2), axis=-1)
        t_out = np.nanmin(np.maximum(t1, t2), axis=-1)
        hit = (t_in <= t_out) & (t_in > 0) & (t_in < t_best)
        t_best = np.where(hit, t_in, t_best)
        index[hit] = i
    return np.full((h, w, 3), 180, np.uint8), t_best.astype(np.float32), K, index


def objects_of(boxes: list[Box3], config: ProposalConfig) -> list[set[int]]:
    """Per proposal, the boxes it holds (at least a quarter of the box's visible pixels)."""
    rgb, depth, K, index = raycast(boxes)
    seen = np.bincount(index.ravel(), minlength=len(boxes) + 1)
    return [{i for i in range(1, len(boxes) + 1) if (index[p.mask] == i).sum() >= 0.25 * seen[i]}
            for p in propose(rgb, depth, K, config)]


ON = ProposalConfig()
OFF = ProposalConfig.with_overrides(overhang_share=0.0)


def test_a_handle_cut_off_by_the_depth_jump_joins_its_body():
    assert sorted(map(sorted, objects_of([BODY, HANDLE], OFF))) == [[1], [2]]  # the cut the rule repairs
    assert objects_of([BODY, HANDLE], ON) == [{1, 2}]


def test_a_small_object_standing_against_a_larger_one_stays_apart():
    assert sorted(map(sorted, objects_of([BODY, BESIDE], ON))) == [[1], [2]]


def test_handle_joins_while_a_touching_neighbour_stays_apart_in_one_scene():
    assert sorted(map(sorted, objects_of([BODY, HANDLE, BESIDE], ON))) == [[1, 2], [3]]


def test_a_box_standing_on_another_stays_apart():
    assert sorted(map(sorted, objects_of([BODY, ON_TOP], ON))) == [[1], [2]]


def test_a_hanging_piece_that_touches_nothing_stays_its_own():
    assert sorted(map(sorted, objects_of([BODY, FLOATING], ON))) == [[1], [2]]


def test_a_hanging_piece_joins_only_a_much_larger_piece():
    # the same handle, but the "body" is hardly larger than it: two objects, not an object and its part
    stub: Box3 = ((0.0, 0.02, 0.0), (0.04, 0.06, 0.11))  # 3 times the handle's pixels, under attach_max_ratio's 4
    assert sorted(map(sorted, objects_of([stub, HANDLE], ON))) == [[1], [2]]
    assert objects_of([stub, HANDLE], ProposalConfig.with_overrides(attach_max_ratio=0.5)) == [{1, 2}]


@pytest.mark.parametrize("bad", [{"overhang_share": 1.5}, {"overhang_share": -0.1}, {"attach_max_ratio": 0.0},
                                 {"attach_max_ratio": 1.0}, {"attach_gap_m": 0.0}, {"overhang_min_height_m": -0.01}])
def test_attach_settings_are_validated(bad):
    with pytest.raises(ValueError):
        ProposalConfig.with_overrides(**bad)
