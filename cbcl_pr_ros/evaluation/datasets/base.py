"""The one shape every loader returns: labelled train/test images, decoded lazily.

Why lazy: a data set is read once to compute features (which are cached); holding 70k decoded images
in memory, or decoding images that a subsample skips, would be waste.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ImageDataset", "ArrayImages", "FileImages", "to_rgb", "read_image", "IMAGE_SUFFIXES"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


def to_rgb(img: np.ndarray) -> np.ndarray:
    """Any grey/RGB/RGBA uint8 array as contiguous H×W×3 uint8 RGB."""
    arr = np.asarray(img)
    if arr.dtype != np.uint8:
        raise TypeError(f"image dtype must be uint8, got {arr.dtype}")
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    elif arr.ndim == 3 and arr.shape[2] == 1:
        arr = np.repeat(arr, 3, axis=2)
    elif arr.ndim == 3 and arr.shape[2] == 4:
        arr = arr[:, :, :3]
    elif not (arr.ndim == 3 and arr.shape[2] == 3):
        raise ValueError(f"image shape must be HxW, HxWx1, HxWx3 or HxWx4, got {arr.shape}")
    return np.ascontiguousarray(arr)


def read_image(path: str | Path) -> np.ndarray:
    """Read an image file as RGB uint8 (OpenCV decodes BGR, so channels are swapped back)."""
    import cv2

    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise ValueError(f"cannot decode image file {path}")
    if img.dtype == np.uint16:
        img = (img >> 8).astype(np.uint8)
    if img.ndim == 3 and img.shape[2] == 3:
        img = img[:, :, ::-1]
    elif img.ndim == 3 and img.shape[2] == 4:
        img = img[:, :, [2, 1, 0]]
    return to_rgb(img)


class ArrayImages(Sequence):
    """Images held in one (n, H, W[, C]) uint8 array."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.asarray(array)
        if self.array.dtype != np.uint8 or self.array.ndim not in (3, 4):
            raise ValueError(f"need an (n,H,W[,C]) uint8 array, got {self.array.dtype} {self.array.shape}")

    def __len__(self) -> int:
        return int(self.array.shape[0])

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return ArrayImages(self.array[i])
        return to_rgb(self.array[int(i)])

    def ref(self, i: int) -> str:
        return str(int(i))


class FileImages(Sequence):
    """Images stored as files, decoded on access."""

    def __init__(self, paths: Sequence[str | Path], reader: Callable[[Path], np.ndarray] = read_image) -> None:
        self.paths = [Path(p) for p in paths]
        self.reader = reader

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return FileImages(self.paths[i], self.reader)
        return self.reader(self.paths[int(i)])

    def ref(self, i: int) -> str:
        return str(self.paths[int(i)])


@dataclass
class ImageDataset:
    """Labelled images split into train and test; labels index ``classes``."""

    name: str
    classes: tuple[str, ...]
    train_images: Sequence
    train_labels: np.ndarray
    test_images: Sequence
    test_labels: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.train_labels = np.asarray(self.train_labels, dtype=np.int64)
        self.test_labels = np.asarray(self.test_labels, dtype=np.int64)
        if len(self.train_images) != len(self.train_labels):
            raise ValueError(f"{self.name}: {len(self.train_images)} train images but {len(self.train_labels)} labels")
        if len(self.test_images) != len(self.test_labels):
            raise ValueError(f"{self.name}: {len(self.test_images)} test images but {len(self.test_labels)} labels")
        n = len(self.classes)
        for split, lab in (("train", self.train_labels), ("test", self.test_labels)):
            if lab.size and (lab.min() < 0 or lab.max() >= n):
                raise ValueError(f"{self.name}: {split} label out of range 0..{n - 1}")

    def train_ref(self, i: int) -> str:
        """A stable name of train image ``i`` (a path or an index), used by session index files."""
        ref = getattr(self.train_images, "ref", None)
        return ref(i) if ref else str(int(i))

    def summary(self) -> str:
        return (f"{self.name}: {len(self.classes)} classes, {len(self.train_labels)} train, "
                f"{len(self.test_labels)} test images")
