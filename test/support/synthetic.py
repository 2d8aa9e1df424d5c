"""Synthetic RGB-D table scenes for the perception tests: a tilted plane and box-shaped objects.

Depth is exact: the table is a plane seen by a pinhole camera (inverse depth linear in the
normalised image coordinates), and each object is a box whose top face is ``height`` closer to the
camera along the viewing ray's depth, drawn where its footprint projects.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cbcl_pr_ros.perception import CameraIntrinsics

W, H = 320, 240
K = CameraIntrinsics(280.0, 280.0, (W - 1) / 2, (H - 1) / 2)
TABLE_RGB = (200, 190, 170)


@dataclass(frozen=True)
class SynthObject:
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels
    height: float  # metres above the table
    rgb: tuple[int, int, int]


def scene(objects: list[SynthObject], seed: int = 0, tilt: float = 0.25, distance: float = 0.6,
          width: int = W, height: int = H) -> tuple[np.ndarray, np.ndarray, CameraIntrinsics, list[np.ndarray]]:
    """(rgb uint8, depth float32 metres, intrinsics, true camera-frame centres of the objects' tops)."""
    rng = np.random.default_rng(seed)
    k = CameraIntrinsics(K.fx * width / W, K.fy * height / H, (width - 1) / 2, (height - 1) / 2)
    u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    xb, yb = (u - k.cx) / k.fx, (v - k.cy) / k.fy
    z = distance / (1.0 - tilt * yb)  # a plane tilted about the camera's x axis
    depth = z.copy()
    rgb = np.empty((height, width, 3), np.uint8)
    noise = rng.integers(-8, 9, size=(height, width, 1))
    rgb[:] = np.clip(np.asarray(TABLE_RGB)[None, None, :] + noise, 0, 255).astype(np.uint8)
    centres = []
    for o in objects:
        x0, y0, x1, y1 = o.box
        sl = (slice(max(0, y0), min(height, y1)), slice(max(0, x0), min(width, x1)))
        depth[sl] = z[sl] - o.height
        rgb[sl] = np.asarray(o.rgb, np.uint8)
        zc = float(np.mean(depth[sl]))
        centres.append(np.array([float(np.mean(xb[sl])) * zc, float(np.mean(yb[sl])) * zc, zc]))
    return rgb, depth.astype(np.float32), k, centres


def camera_rays(eye=(0.0, -0.28, 0.42), target=(0.0, 0.04, 0.0), w: int = W, h: int = H,
                f: float = 280.0) -> tuple[np.ndarray, np.ndarray, CameraIntrinsics]:
    """(eye, ray per pixel in the table frame scaled to camera depth 1, intrinsics) of a pinhole
    camera at ``eye`` looking at ``target`` (z up), for ray-cast scenes."""
    eye = np.asarray(eye, float)
    fwd = np.asarray(target, float) - eye
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    R = np.stack([right, np.cross(fwd, right), fwd], axis=1)  # optical axes (x right, y down, z forward)
    K = CameraIntrinsics(f, f, (w - 1) / 2, (h - 1) / 2)
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    return eye, np.stack([(u - K.cx) / K.fx, (v - K.cy) / K.fy, np.ones((h, w))], axis=-1) @ R.T, K


def cast_boxes(eye: np.ndarray, d: np.ndarray, t_best: np.ndarray, boxes) -> tuple[np.ndarray, np.ndarray]:
    """(``t_best`` with the axis-aligned ``boxes`` ((lo, hi) corners) cast into it, index: 0 where no box
    is nearest, i where the i-th box is) for the rays ``d`` from ``eye`` of :func:`camera_rays`."""
    index = np.zeros(t_best.shape, int)
    for i, (lo, hi) in enumerate(boxes, start=1):
        with np.errstate(divide="ignore", invalid="ignore"):
            t1, t2 = (np.asarray(lo) - eye) / d, (np.asarray(hi) - eye) / d
        t_in, t_out = np.nanmax(np.minimum(t1, t2), axis=-1), np.nanmin(np.maximum(t1, t2), axis=-1)
        hit = (t_in <= t_out) & (t_in > 0) & (t_in < t_best)
        t_best = np.where(hit, t_in, t_best)
        index[hit] = i
    return t_best, index
