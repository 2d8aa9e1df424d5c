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


def test_turn_towards_as_the_expressions_written_out():
    from cbcl_pr_ros.perception.proposals import _turn_towards

    rng = np.random.default_rng(4)
    for rep in range(100):
        shape = (int(rng.integers(1, 90)), int(rng.integers(1, 120)))
        na, nb, pa, pb = ([(rng.standard_normal(shape) * 10.0 ** int(rng.integers(-3, 1))).astype(np.float32)
                           for _ in range(3)] for _ in range(4))
        if rep % 5 == 0:  # equal normals and points somewhere: zero turns and steps
            nb[0][: shape[0] // 2], pb[2][: shape[0] // 2] = na[0][: shape[0] // 2], pa[2][: shape[0] // 2]
        t2 = np.float32(rng.uniform(0.0, 1.0)) ** 2
        dX, dY, dZ = pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2]
        turn = -((nb[0] - na[0]) * dX + (nb[1] - na[1]) * dY + (nb[2] - na[2]) * dZ)
        want = (turn > 0) & (turn * turn > t2 * (dX * dX + dY * dY + dZ * dZ))
        before = [a.copy() for a in na + nb + pa + pb]
        assert np.array_equal(_turn_towards(tuple(na), tuple(nb), tuple(pa), tuple(pb), t2), want)
        assert all(np.array_equal(a, b) for a, b in zip(na + nb + pa + pb, before))  # inputs untouched
