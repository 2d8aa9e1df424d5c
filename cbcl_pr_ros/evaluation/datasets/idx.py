"""MNIST-style idx files (optionally gzipped): Fashion-MNIST as Debian ships it."""
from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from .base import ArrayImages, ImageDataset

__all__ = ["read_idx", "load_fashion_mnist", "FASHION_MNIST_CLASSES"]

FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                         "Sneaker", "Bag", "Ankle boot")
_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
          "t10k-labels-idx1-ubyte")


def read_idx(path: str | Path) -> np.ndarray:
    """Read one idx file (``.gz`` or raw) into an array of its declared shape and type."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        data = fh.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path} is not an idx file (bad magic)")
    code, ndim = data[2], data[3]
    if code not in _DTYPES:
        raise ValueError(f"{path}: unknown idx type code 0x{code:02x}")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    dtype = np.dtype(_DTYPES[code])
    expected = int(np.prod(dims)) * dtype.itemsize
    body = data[4 + 4 * ndim:]
    if len(body) != expected:
        raise ValueError(f"{path}: header says {dims} ({expected} bytes) but body has {len(body)} bytes")
    return np.frombuffer(body, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))


def _find(root: Path, stem: str) -> Path:
    for cand in (root / f"{stem}.gz", root / stem):
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"{stem}[.gz] not found in {root}")


def load_fashion_mnist(root: str | Path, name: str = "fashion-mnist") -> ImageDataset:
    """Fashion-MNIST (60k train, 10k test, 28×28 grey) from a directory of idx files."""
    root = Path(root)
    xtr, ytr, xte, yte = (read_idx(_find(root, s)) for s in _NAMES)
    if xtr.ndim != 3 or xtr.shape[0] != ytr.shape[0] or xte.shape[0] != yte.shape[0]:
        raise ValueError(f"{root}: inconsistent idx shapes {xtr.shape} {ytr.shape} {xte.shape} {yte.shape}")
    n_classes = int(max(ytr.max(), yte.max())) + 1
    classes = FASHION_MNIST_CLASSES if n_classes == 10 else tuple(str(i) for i in range(n_classes))
    return ImageDataset(name, classes, ArrayImages(xtr.astype(np.uint8)), ytr, ArrayImages(xte.astype(np.uint8)),
                        yte, meta={"source": str(root), "format": "idx"})
