"""The value types of the perception layer: camera intrinsics and object proposals."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["CameraIntrinsics", "Proposal"]


@dataclass(frozen=True)
class CameraIntrinsics:
    """Pinhole intrinsics in pixels (no distortion: rectified images, as ROS ``image_rect`` topics)."""

    fx: float
    fy: float
    cx: float
    cy: float

    def __post_init__(self) -> None:
        for name in ("fx", "fy", "cx", "cy"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(float(v)):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if self.fx <= 0 or self.fy <= 0:
            raise ValueError(f"focal lengths must be > 0, got fx={self.fx}, fy={self.fy}")

    @classmethod
    def from_k(cls, k: Sequence[float]) -> "CameraIntrinsics":
        """From a row-major 3x3 camera matrix (``sensor_msgs/CameraInfo.k``) or a 3x3 array."""
        a = np.asarray(k, dtype=float).reshape(-1)
        if a.size != 9:
            raise ValueError(f"k must hold 9 numbers (row-major 3x3), got {a.size}")
        return cls(float(a[0]), float(a[4]), float(a[2]), float(a[5]))

    def scaled(self, sx: float, sy: float) -> "CameraIntrinsics":
        """The intrinsics of the same camera after resizing its image by (sx, sy)."""
        return CameraIntrinsics(self.fx * sx, self.fy * sy, (self.cx + 0.5) * sx - 0.5, (self.cy + 0.5) * sy - 0.5)


@dataclass(frozen=True)
class Proposal:
    """One object candidate in one image.

    ``box`` is (x0, y0, x1, y1) in pixels, half-open and clipped to the image; ``mask`` a bool HxW
    array or None; ``centroid`` and ``size`` are metres in the camera optical frame (z forward,
    x right, y down), NaN when there was no depth; ``score`` an objectness in [0, 1].
    """

    box: tuple[int, int, int, int]
    mask: np.ndarray | None
    centroid: np.ndarray
    size: np.ndarray
    score: float

    @property
    def area(self) -> int:
        """Box area in pixels."""
        x0, y0, x1, y1 = self.box
        return max(0, x1 - x0) * max(0, y1 - y0)

    @property
    def has_depth(self) -> bool:
        return bool(np.all(np.isfinite(self.centroid)))
