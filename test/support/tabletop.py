"""Ray-cast table scenes for the proposal tests: a desk with a lower tilted surface, and any boxes on
any planes, exact in metres (table frame, z up)."""
from __future__ import annotations

import math

import numpy as np
from scipy.spatial.transform import Rotation

from cbcl_pr_ros.perception.camera_pose import CameraPose

from synthetic import camera_rays, cast_boxes

Box3 = tuple[tuple[float, float, float], tuple[float, float, float]]


def scene(boxes: list[Box3], surfaces, eye, target, w: int = 320, h: int = 240, f: float = 280.0):
    """(rgb, depth, intrinsics, index: 0 a surface, i the i-th box). ``surfaces``: (a, b, c, inside) planes
    z = a x + b y + c seen where ``inside(x, y)`` holds at the hit point; the nearest hit wins."""
    eye, d, K = camera_rays(eye, target, w, h, f)
    t_best = np.full((h, w), np.inf)
    for a, b, c, inside in surfaces:
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (a * eye[0] + b * eye[1] + c - eye[2]) / (d[..., 2] - a * d[..., 0] - b * d[..., 1])
        x, y = eye[0] + t * d[..., 0], eye[1] + t * d[..., 1]
        hit = (t > 0) & (t < t_best) & inside(x, y)
        t_best = np.where(hit, t, t_best)
    t_best, index = cast_boxes(eye, d, t_best, boxes)
    depth = np.where(np.isfinite(t_best), t_best, np.nan).astype(np.float32)
    return np.full((h, w, 3), 180, np.uint8), depth, K, index


# A desk (z = 0, front edge at y = -0.16) seen from 50 cm up; in front of and beside it the camera sees a
# surface tilted 10 degrees, 4 to 12 cm below the desk (a floor and the desk's front face, as RANSAC
# mixed them in a real desk scene).
DESK_EYE, DESK_TARGET = (0.0, -0.30, 0.50), (0.0, 0.10, 0.0)
TILT = math.tan(math.radians(10.0))
DESK_BOXES: list[Box3] = [((-0.12, 0.05, 0.0), (-0.06, 0.11, 0.06)), ((0.0, 0.08, 0.0), (0.05, 0.14, 0.10)),
                          ((0.08, 0.02, 0.0), (0.14, 0.06, 0.04))]


def desk():
    desk = (0.0, 0.0, 0.0, lambda x, y: (y >= -0.16) & (np.abs(x) <= 0.3))
    below = (0.0, TILT, -0.12 + TILT * 0.2, lambda x, y: np.ones_like(x, bool))
    return scene(DESK_BOXES, [desk, below], DESK_EYE, DESK_TARGET)


def desk_pose(roll_deg: float = 0.0, pitch_deg: float = 0.0):
    """The desk camera's optical frame in the desk's frame (z up), turned ``roll_deg`` about its optical
    axis and ``pitch_deg`` about its x axis (what a pose publisher may say)."""
    eye = np.asarray(DESK_EYE, float)
    fwd = (np.asarray(DESK_TARGET, float) - eye) / np.linalg.norm(np.subtract(DESK_TARGET, DESK_EYE))
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    rot = Rotation.from_matrix(np.stack([right, np.cross(fwd, right), fwd], axis=1))
    return CameraPose(eye, rot * Rotation.from_euler("zx", [roll_deg, pitch_deg], degrees=True), "desk")
