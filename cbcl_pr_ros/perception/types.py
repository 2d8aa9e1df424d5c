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
    another image, and 3D from them would be wrong: None, with the reason; so too for a K no camera
    has for this image (:func:`_camera_like`: whoever publishes CameraInfo chooses its numbers).
    """
    if K is None:
        return None, "no CameraInfo (or one with an invalid K) received: RGB-only proposals, no 3D"
    h, w = int(image_shape[0]), int(image_shape[1])
    cw, ch = (int(v) for v in calibrated_size) if calibrated_size else (0, 0)
    if cw > 0 and ch > 0 and (cw, ch) != (w, h):
        if abs(w / cw - h / ch) > 0.01 * max(w / cw, h / ch):
            return None, (f"CameraInfo is for {cw}x{ch} images but the image is {w}x{h} (another aspect ratio): "
                          "RGB-only proposals, no 3D")
        try:
            K = K.scaled(w / cw, h / ch)
        except ValueError:  # a K of 1e308 scaled up is no longer finite
            K = None
    if K is None or not _camera_like(K, w, h):
        shown = "" if K is None else f" (fx {K.fx:.3g}, fy {K.fy:.3g}, cx {K.cx:.3g}, cy {K.cy:.3g})"
        return None, (f"CameraInfo's K{shown} is no camera's for a {w}x{h} image (focal lengths "
                      f"{_FOCAL_RANGE[0]:g} to {_FOCAL_RANGE[1]:g} times the image's size, the principal point "
                      "within one image size of it): RGB-only proposals, no 3D")
    return K, ""


#: a focal length (pixels) as a multiple of the image's larger side: 0.01 is a field of view of 179°,
#: 1000 one of 0.06°; far beyond, the back-projection divides by products that underflow to zero
_FOCAL_RANGE = (0.01, 1000.0)


def _camera_like(K: CameraIntrinsics, w: int, h: int) -> bool:
    """Whether ``K`` could be a pinhole camera's for a ``w`` x ``h`` image: focal lengths within
    :data:`_FOCAL_RANGE` times its larger side, the principal point at most one image size outside it.
    Outside, the proposals' geometry overflows or divides by zero, and every frame would be lost."""
    side = float(max(w, h, 1))
    return (all(_FOCAL_RANGE[0] * side <= f <= _FOCAL_RANGE[1] * side for f in (K.fx, K.fy))
            and -w <= K.cx <= 2 * w and -h <= K.cy <= 2 * h)


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
