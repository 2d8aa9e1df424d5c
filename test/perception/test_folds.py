"""Two convex objects touching meet in a concave fold of the surface normals (proposals ``_folds``).

Balls side by side, of one colour and one height, have no level top to split them by and no colour edge;
a sensor smooths depth across the valley between them, so no depth jump cuts it either. The normals of
the two sides still turn towards each other there, and the fold cuts them apart.
Scenes are ray-cast exactly (a table z = 0, spheres and upright cylinders, in metres), then blurred as a
sensor's depth is; the camera looks at the table obliquely from the front, as the robot's hand camera does.
"""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from cbcl_pr_ros.perception import CameraIntrinsics, ProposalConfig, propose

from synthetic import camera_rays

Shape = tuple[str, tuple[float, float, float], float, float]  # kind, centre (a cylinder's: its foot), radius, height


def _render(shapes: list[Shape]) -> tuple[np.ndarray, np.ndarray, CameraIntrinsics, np.ndarray]:
    """(grey rgb, depth in metres, intrinsics, index map: 0 table, i the i-th shape)."""
    eye, d, K = camera_rays()
    t_best = np.where(d[..., 2] < 0, -eye[2] / d[..., 2], np.inf)  # the table
    index = np.zeros(t_best.shape, int)
    for i, (kind, centre, r, height) in enumerate(shapes, start=1):
        o = eye - np.asarray(centre, float)
        if kind == "sphere":
            a, b, c = np.einsum("...k,...k->...", d, d), d @ o, o @ o - r * r
        else:  # an upright cylinder's wall: the same in x and y only
            a, b, c = d[..., 0] ** 2 + d[..., 1] ** 2, d[..., 0] * o[0] + d[..., 1] * o[1], o[0] ** 2 + o[1] ** 2 - r * r
        disc = b * b - a * c
        with np.errstate(invalid="ignore", divide="ignore"):
            t = (-b - np.sqrt(disc)) / a
        hit = (disc >= 0) & (t > 0)
        if kind != "sphere":
            zs = eye[2] + t * d[..., 2]
            hit &= (zs >= centre[2]) & (zs <= centre[2] + height)
            top = (centre[2] + height - eye[2]) / d[..., 2]  # the lid
            px, py = eye[0] + top * d[..., 0] - centre[0], eye[1] + top * d[..., 1] - centre[1]
            lid = (top > 0) & (px * px + py * py <= r * r) & ~hit
            t, hit = np.where(lid, top, t), hit | lid
        hit &= t < t_best
        t_best = np.where(hit, t, t_best)
        index[hit] = i
    return np.full(t_best.shape + (3,), 180, np.uint8), t_best.astype(np.float32), K, index


def _objects(shapes: list[Shape], config: ProposalConfig, blur: int) -> list[list[int]]:
    """Per proposal, the shapes it holds (a quarter of their visible pixels), on depth blurred as a sensor's."""
    rgb, depth, K, index = _render(shapes)
    depth = cv2.GaussianBlur(depth, (blur, blur), 0)
    seen = np.bincount(index.ravel(), minlength=len(shapes) + 1)
    return sorted(sorted(i for i in range(1, len(shapes) + 1) if (index[p.mask] == i).sum() >= 0.25 * seen[i])
                  for p in propose(rgb, depth, K, config))


R = 0.04
BALLS: list[Shape] = [("sphere", (-R, 0.04, R), R, 0.0), ("sphere", (R, 0.04, R), R, 0.0)]  # touching, one colour


@pytest.mark.parametrize("blur", [3, 5])
def test_two_touching_balls_are_split_by_the_fold_between_them(blur: int):
    assert _objects(BALLS, ProposalConfig.with_overrides(fold_turn=0.0), blur) == [[1, 2]]  # what the fold repairs
    assert _objects(BALLS, ProposalConfig(), blur) == [[1], [2]]


@pytest.mark.parametrize("shape", [BALLS[0], ("cylinder", (0.0, 0.04, 0.0), R, 0.10)])
def test_one_convex_object_stays_whole(shape: Shape):
    assert _objects([shape], ProposalConfig(), blur=5) == [[1]]


def test_fold_settings_are_checked():
    with pytest.raises(ValueError):
        ProposalConfig.with_overrides(fold_turn=-0.1)
    with pytest.raises(ValueError):
        ProposalConfig.with_overrides(fold_span=1)
