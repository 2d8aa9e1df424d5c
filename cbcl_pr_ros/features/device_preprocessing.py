"""Crop, resize and normalise uint8 frames with torch ops on the backbone's device (the GPU path).

A GPU backbone should receive the camera's uint8 frame (a quarter of the bytes of a float32
batch) and do the rest where the network runs. The numbers must be those of the CPU path
(``preprocessing.crop_and_resize`` with OpenCV, then the same normalisation), so the resize is
written as two small matrix products with OpenCV's own ``INTER_AREA`` weights (exact pixel-area
coverage) and rounded to whole grey levels as OpenCV rounds them: half to even, or half up on its
factor-2 fast path. Only shrinking is done on the device (a camera frame is larger than the
crop); a frame smaller than that is cut on the host (``device_resizes``). Tested against OpenCV on
CPU torch in ``test_features_device_preprocessing.py``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from .preprocessing import PreprocessSpec, crop_box

__all__ = ["DevicePreprocessor", "area_weights", "device_resizes", "fp32_math"]


def area_weights(src: int, dst: int) -> np.ndarray:
    """(dst, src) weights of an area-averaging shrink: each output pixel averages the source
    interval it covers, fractional pixels weighted by the covered fraction (OpenCV ``INTER_AREA``)."""
    scale = src / dst
    lo = np.arange(dst, dtype=np.float64)[:, None] * scale
    hi = lo + scale
    j = np.arange(src, dtype=np.float64)[None, :]
    cover = np.clip(np.minimum(hi, j + 1.0) - np.maximum(lo, j), 0.0, None)
    return cover / scale


def device_resizes(height: int, width: int, spec: PreprocessSpec) -> bool:
    """Whether the device reproduces the CPU resize of an (height, width) frame exactly: when it
    shrinks (area averaging). Frames whose crop is enlarged (smaller than ``resize_shorter``) are
    cut and resized on the host: the source is small, and OpenCV's fixed-point bilinear would
    differ by a grey level in ~10 % of pixels."""
    return crop_box(height, width, spec)[2] > spec.crop


@contextmanager
def fp32_math(tf32: bool) -> Iterator[None]:
    """Set CUDA float32 matmul/convolution to IEEE (``tf32=False``) or TF32 for the block, then restore.

    PyTorch's own default lets cuDNN convolutions use TF32 (~1e-3 relative error); these flags are
    process-wide, so they are set around each call rather than once.
    """
    import torch

    mm = torch.backends.cuda.matmul
    conv = getattr(torch.backends.cudnn, "conv", None)
    val = "tf32" if tf32 else "ieee"
    if conv is not None and hasattr(conv, "fp32_precision") and hasattr(mm, "fp32_precision"):
        old = (mm.fp32_precision, conv.fp32_precision)
        mm.fp32_precision, conv.fp32_precision = val, val
        try:
            yield
        finally:
            mm.fp32_precision, conv.fp32_precision = old
    else:  # older torch: the allow_tf32 flags
        old = (mm.allow_tf32, torch.backends.cudnn.allow_tf32)
        mm.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
        try:
            yield
        finally:
            mm.allow_tf32, torch.backends.cudnn.allow_tf32 = old


class DevicePreprocessor:
    """uint8 (n, H, W, 3) tensors on ``device`` -> the normalised (n, 3, crop, crop) float32 batch
    (frames that ``device_resizes``; others go through ``normalise_crops`` after a host crop).

    Resize matrices are built once per source size and kept on the device. Call it under
    ``fp32_math(False)`` on CUDA so the resize itself is never done in TF32.
    """

    def __init__(self, spec: PreprocessSpec, device: str) -> None:
        import torch

        self.spec = spec
        self.device = torch.device(device)
        self._mean = torch.tensor(spec.mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self._inv_std = torch.tensor([1.0 / s for s in spec.std], dtype=torch.float32,
                                     device=self.device).view(1, 3, 1, 1)
        self._weights: dict[int, Any] = {}

    def _matrix(self, side: int) -> Any:
        import torch

        if side not in self._weights:
            w = area_weights(side, self.spec.crop).astype(np.float32)
            self._weights[side] = torch.from_numpy(w).to(self.device)
        return self._weights[side]

    def crop_resize(self, frames: Any) -> Any:
        """uint8 (n, H, W, 3) -> float32 (n, 3, crop, crop) holding whole grey levels 0..255."""
        import torch

        if frames.dtype != torch.uint8 or frames.ndim != 4 or frames.shape[3] != 3:
            raise ValueError(f"frames must be a uint8 (n, H, W, 3) tensor, got {frames.dtype} {tuple(frames.shape)}")
        h, w = int(frames.shape[1]), int(frames.shape[2])
        if not device_resizes(h, w, self.spec):
            raise ValueError(f"a {w}x{h} frame is enlarged, not shrunk: cut it on the host (crop_and_resize)")
        top, left, side = crop_box(h, w, self.spec)
        region = frames[:, top:top + side, left:left + side, :].permute(0, 3, 1, 2).float()
        m = self._matrix(side)
        out = torch.matmul(torch.matmul(m, region), m.t())
        if side == 2 * self.spec.crop:  # OpenCV's 2x2 fast path: (a + b + c + d + 2) >> 2, half up
            return out.add_(0.5).floor_()
        return out.round_()  # OpenCV's general path: saturate_cast, half to even

    def normalise(self, pixels: Any) -> Any:
        """Float (n, 3, c, c) grey levels -> the backbone's input, as the CPU path computes it."""
        return (pixels - self._mean) * self._inv_std

    def __call__(self, frames: Any) -> Any:
        return self.normalise(self.crop_resize(frames))

    def normalise_crops(self, crops: Any) -> Any:
        """uint8 (n, crop, crop, 3) already cut and resized (on the host) -> the backbone's input."""
        return self.normalise(crops.permute(0, 3, 1, 2).float())
