"""The value types of the perception layer: camera intrinsics and object proposals."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["CameraIntrinsics", "Proposal", "intrinsics_for_image"]


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
            # plain floats: a numpy float64 would promote the float32 back-projection to float64, and the same
            # frame would give other proposals depending on where its CameraInfo came from
            object.__setattr__(self, name, float(v))
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


def intrinsics_for_image(K: CameraIntrinsics | None, calibrated_size: tuple[int, int] | None,
                         image_shape: Sequence[int]) -> tuple[CameraIntrinsics | None, str]:
    """The intrinsics to use for an image of ``image_shape`` (H, W, ...), and why there are none.

    ``calibrated_size`` is the (width, height) the intrinsics were calibrated for (CameraInfo's
    width/height; None or zeros = unknown, taken as the image's). Of another size with the same
    aspect ratio (a camera's resized stream) they are scaled; of another aspect ratio they belong to
    another image, and 3D from them would be wrong: None, with the reason.
    """
    if K is None:
        return None, "no CameraInfo (or one with an invalid K) received: RGB-only proposals, no 3D"
    h, w = int(image_shape[0]), int(image_shape[1])
    if not calibrated_size or not all(int(v) > 0 for v in calibrated_size):
        return K, ""
    cw, ch = (int(v) for v in calibrated_size)
    if (cw, ch) == (w, h):
        return K, ""
    if abs(w / cw - h / ch) <= 0.01 * max(w / cw, h / ch):
        return K.scaled(w / cw, h / ch), ""
    return None, (f"CameraInfo is for {cw}x{ch} images but the image is {w}x{h} (another aspect ratio): "
                  "RGB-only proposals, no 3D")


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
