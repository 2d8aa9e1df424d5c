"""The one preprocessing path: camera message fields or files -> RGB uint8 -> backbone input.

Teaching, classifying, evaluation and the bag tools all go through these functions, so a
frame seen live and the same frame replayed from a bag give the same feature vector.
Decoding works on the raw ``sensor_msgs/Image`` fields (pure numpy, no ROS import) so it is
unit-testable and usable from rosbags without rclpy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import cv2
import numpy as np

from cbcl_pr_ros.core.validation import quote

__all__ = [
    "SUPPORTED_ENCODINGS",
    "PreprocessSpec",
    "EFFICIENTNET_LITE_SPEC",
    "EFFICIENTNET_LITE1_SPEC",
    "EFFICIENTNET_LITE2_SPEC",
    "IMAGENET_SPEC",
    "image_to_rgb",
    "compressed_to_rgb",
    "rgb_to_image_fields",
    "load_image_file",
    "check_rgb",
    "crop_box",
    "crop_and_resize",
    "crop_batch",
    "normalise",
    "preprocess_batch",
]

# encoding -> (channels, bytes per channel)
_LAYOUT: dict[str, tuple[int, int]] = {
    "rgb8": (3, 1),
    "bgr8": (3, 1),
    "rgba8": (4, 1),
    "bgra8": (4, 1),
    "mono8": (1, 1),
    "mono16": (1, 2),
}
SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(_LAYOUT)


def _as_uint8_buffer(data: Any) -> np.ndarray:
    """View any byte container (bytes, bytearray, array.array('B'), memoryview, ndarray) as flat uint8."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise TypeError(f"image data array must have dtype uint8, got {data.dtype}")
        return data.reshape(-1)
    if isinstance(data, (list, tuple)):
        return np.asarray(data, dtype=np.uint8)
    try:
        return np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    except TypeError as exc:
        raise TypeError(f"image data must be a bytes-like object, got {type(data).__name__}") from exc


def image_to_rgb(
    encoding: str,
    height: int,
    width: int,
    step: int,
    data: Any,
    is_bigendian: int | bool = 0,
) -> np.ndarray:
    """Decode the fields of a ``sensor_msgs/Image`` into a fresh (height, width, 3) RGB uint8 array.

    Row padding (``step`` larger than ``width * bytes_per_pixel``) is skipped. ``mono16`` honours
    ``is_bigendian`` and is scaled to 8 bits as round(v * 255 / 65535), as cv_bridge does. The
    result never aliases ``data``, so the message can be released.

    Raises
    ------
    ValueError
        For an unsupported encoding, a zero size, a ``step`` too small for the width, or a buffer
        whose length is not ``step * height`` (truncated or oversized).

    Examples
    --------
    >>> image_to_rgb("bgr8", 1, 2, 8, bytes([3, 2, 1, 6, 5, 4, 0, 0])).tolist()  # 2 bytes of row padding
    [[[1, 2, 3], [4, 5, 6]]]
    """
    enc = str(encoding).strip().lower()
    if enc not in _LAYOUT:
        raise ValueError(
            f"unsupported image encoding {quote(encoding, 32)}; supported: {', '.join(SUPPORTED_ENCODINGS)}"
        )
    h, w, step = int(height), int(width), int(step)
    if h <= 0 or w <= 0:
        raise ValueError(f"image has zero size: height={h}, width={w}")
    channels, depth = _LAYOUT[enc]
    row_bytes = w * channels * depth
    if step < row_bytes:
        raise ValueError(
            f"step {step} does not match encoding {enc!r} at width {w}: "
            f"a row needs at least {row_bytes} bytes"
        )
    buf = _as_uint8_buffer(data)
    expected = step * h
    if buf.size < expected:
        raise ValueError(
            f"truncated image buffer: got {buf.size} bytes, expected step*height = {step}*{h} = {expected}"
        )
    if buf.size > expected:
        raise ValueError(
            f"image buffer too long: got {buf.size} bytes, expected step*height = {step}*{h} = {expected}"
        )
    rows = buf.reshape(h, step)[:, :row_bytes]
    if depth == 2:
        dtype = np.dtype(">u2") if is_bigendian else np.dtype("<u2")
        mono16 = np.ascontiguousarray(rows).view(dtype).reshape(h, w).astype(np.uint32)
        mono = ((mono16 * 255 + 32767) // 65535).astype(np.uint8)
        return np.repeat(mono[:, :, None], 3, axis=2)
    px = rows.reshape(h, w, channels)
    if enc == "rgb8":
        return np.array(px, copy=True, order="C")
    if enc == "bgr8":
        return np.ascontiguousarray(px[:, :, ::-1])
    if enc == "rgba8":
        return np.ascontiguousarray(px[:, :, :3])
    if enc == "bgra8":
        return np.ascontiguousarray(px[:, :, 2::-1])
    return np.repeat(px, 3, axis=2)  # mono8


def compressed_to_rgb(format: str, data: Any) -> np.ndarray:  # noqa: A002 - the message field's name
    """Decode a ``sensor_msgs/CompressedImage`` (JPEG or PNG) into RGB uint8 via OpenCV.

    ``format`` is the message's field, e.g. ``"jpeg"`` or ``"rgb8; jpeg compressed bgr8"``;
    compressed depth images (``compressedDepth``) are refused.
    """
    fmt = str(format).lower()
    if "compresseddepth" in fmt:
        raise ValueError(f"compressed depth images are not colour frames: format {quote(format, 32)}")
    buf = _as_uint8_buffer(data)
    if buf.size == 0:
        raise ValueError("compressed image has an empty data buffer")
    img = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
    if img is None:
        raise ValueError(f"could not decode compressed image (format {quote(format, 32)}, {buf.size} bytes)")
    return _decoded_to_rgb(img, what=f"compressed image (format {quote(format, 32)})")


def _decoded_to_rgb(img: np.ndarray, what: str) -> np.ndarray:
    """OpenCV's decoded array (grey/BGR/BGRA, 8 or 16 bit) -> RGB uint8."""
    if img.dtype == np.uint16:
        img = ((img.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    elif img.dtype != np.uint8:
        raise ValueError(f"{what} has unsupported pixel type {img.dtype}")
    if img.ndim == 2:
        return cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
    if img.shape[2] == 1:
        return cv2.cvtColor(img[:, :, 0], cv2.COLOR_GRAY2RGB)
    if img.shape[2] == 3:
        return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    if img.shape[2] == 4:
        return cv2.cvtColor(img, cv2.COLOR_BGRA2RGB)
    raise ValueError(f"{what} has {img.shape[2]} channels")


def load_image_file(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an image file (any format OpenCV reads) as RGB uint8."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise FileNotFoundError(f"image file not found: {p}")
    img = cv2.imread(p, cv2.IMREAD_UNCHANGED)
    if img is None:
        raise ValueError(f"could not decode image file {p}")
    return _decoded_to_rgb(img, what=f"image file {p}")


def rgb_to_image_fields(rgb: np.ndarray, encoding: str = "rgb8") -> dict[str, Any]:
    """Encode an RGB uint8 array as ``sensor_msgs/Image`` fields (for publishing, e.g. debug images).

    Returns a dict with ``encoding, height, width, step, is_bigendian, data`` (``data`` is bytes,
    rows unpadded). Mono encodings use the BT.601 luma (exact for grey inputs).

    >>> f = rgb_to_image_fields(np.zeros((2, 3, 3), np.uint8), "bgra8")
    >>> f["step"], len(f["data"])
    (12, 24)
    """
    rgb = check_rgb(rgb)
    enc = str(encoding).strip().lower()
    if enc not in _LAYOUT:
        raise ValueError(
            f"unsupported image encoding {encoding!r}; supported: {', '.join(SUPPORTED_ENCODINGS)}"
        )
    h, w = rgb.shape[:2]
    if enc == "rgb8":
        px = rgb
    elif enc == "bgr8":
        px = rgb[:, :, ::-1]
    elif enc == "rgba8":
        px = np.dstack([rgb, np.full((h, w), 255, np.uint8)])
    elif enc == "bgra8":
        px = np.dstack([rgb[:, :, ::-1], np.full((h, w), 255, np.uint8)])
    elif enc == "mono8":
        px = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    else:  # mono16, little-endian
        px = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY).astype("<u2") * np.uint16(257)
    channels, depth = _LAYOUT[enc]
    return {
        "encoding": enc,
        "height": int(h),
        "width": int(w),
        "step": int(w * channels * depth),
        "is_bigendian": 0,
        "data": np.ascontiguousarray(px).tobytes(),
    }


def check_rgb(rgb: Any) -> np.ndarray:
    """Validate one RGB image: (H, W, 3) uint8 with H, W > 0."""
    if not isinstance(rgb, np.ndarray):
        raise TypeError(f"an image must be a numpy array, got {type(rgb).__name__}")
    if rgb.dtype != np.uint8:
        raise TypeError(f"an image must have dtype uint8, got {rgb.dtype}")
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"an image must have shape (H, W, 3), got {rgb.shape}")
    if rgb.shape[0] == 0 or rgb.shape[1] == 0:
        raise ValueError(f"image has zero size: shape {rgb.shape}")
    return rgb


@dataclass(frozen=True)
class PreprocessSpec:
    """How a backbone was trained to see images: centre crop, resize, normalise.

    The centre square of side ``min(H, W) * crop / resize_shorter`` is cut out and resized to
    ``crop x crop``; this is the same region as "resize the shorter side to ``resize_shorter``,
    then centre-crop ``crop``" but costs one resize of a smaller region. ``mean``/``std`` are on
    the 0..255 scale.
    """

    name: str
    crop: int = 224
    resize_shorter: int = 256
    mean: tuple[float, float, float] = (127.0, 127.0, 127.0)
    std: tuple[float, float, float] = (128.0, 128.0, 128.0)

    @property
    def id(self) -> str:
        """Stable identifier used in feature-cache keys and saved memories."""
        m = ",".join(f"{v:g}" for v in self.mean)
        s = ",".join(f"{v:g}" for v in self.std)
        return f"{self.name}:ccrop{self.crop}of{self.resize_shorter}:cv2area-linear:mean{m}:std{s}"


# TF EfficientNet-Lite eval: centre crop with 32 px padding (224 of 256), mean 127, std 128.
EFFICIENTNET_LITE_SPEC = PreprocessSpec("effnet-lite", 224, 256, (127.0,) * 3, (128.0,) * 3)
# Lite1 and Lite2 are trained at 240 and 260 px; TF's eval crop keeps the same 32 px padding.
EFFICIENTNET_LITE1_SPEC = PreprocessSpec("effnet-lite", 240, 272, (127.0,) * 3, (128.0,) * 3)
EFFICIENTNET_LITE2_SPEC = PreprocessSpec("effnet-lite", 260, 292, (127.0,) * 3, (128.0,) * 3)
# torchvision ImageNet eval: Resize(256), CenterCrop(224), ImageNet mean/std.
IMAGENET_SPEC = PreprocessSpec(
    "imagenet", 224, 256, (0.485 * 255, 0.456 * 255, 0.406 * 255), (0.229 * 255, 0.224 * 255, 0.225 * 255)
)


def crop_box(height: int, width: int, spec: PreprocessSpec) -> tuple[int, int, int]:
    """(top, left, side) of the centred square the backbone sees; shared by the CPU and GPU paths."""
    side = max(1, int(round(min(height, width) * spec.crop / spec.resize_shorter)))
    return (height - side) // 2, (width - side) // 2, side


def crop_and_resize(rgb: np.ndarray, spec: PreprocessSpec) -> np.ndarray:
    """Centre-crop the region the backbone expects and resize it to (crop, crop, 3) uint8."""
    rgb = check_rgb(rgb)
    top, left, side = crop_box(rgb.shape[0], rgb.shape[1], spec)
    region = rgb[top : top + side, left : left + side]
    if side == spec.crop:
        return np.ascontiguousarray(region)
    interp = cv2.INTER_AREA if side > spec.crop else cv2.INTER_LINEAR
    return cv2.resize(region, (spec.crop, spec.crop), interpolation=interp)


def _as_list(images: Sequence[np.ndarray] | np.ndarray) -> Sequence[np.ndarray]:
    if isinstance(images, np.ndarray):
        if images.ndim != 4:
            raise ValueError(f"an image batch array must have shape (n, H, W, 3), got {images.shape}")
        return list(images)
    return list(images)


def crop_batch(images: Sequence[np.ndarray] | np.ndarray, spec: PreprocessSpec) -> np.ndarray:
    """RGB uint8 images -> (n, crop, crop, 3) uint8 crops; errors name the image's index."""
    seq = _as_list(images)
    out = np.empty((len(seq), spec.crop, spec.crop, 3), dtype=np.uint8)
    for i, img in enumerate(seq):
        try:
            out[i] = crop_and_resize(img, spec)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"image {i}: {exc}") from None
    return out


def normalise(crops: np.ndarray, spec: PreprocessSpec) -> np.ndarray:
    """(n, crop, crop, 3) uint8 crops -> (n, 3, crop, crop) float32, ``(x - mean) / std``."""
    x = np.asarray(crops).astype(np.float32)
    x -= np.asarray(spec.mean, np.float32)
    x *= np.asarray([1.0 / s for s in spec.std], np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def preprocess_batch(images: Sequence[np.ndarray] | np.ndarray, spec: PreprocessSpec) -> np.ndarray:
    """RGB uint8 images (a list, or an (n, H, W, 3) array) -> (n, 3, crop, crop) float32, normalised."""
    return normalise(crop_batch(images, spec), spec)
