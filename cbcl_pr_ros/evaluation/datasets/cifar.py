"""CIFAR-100 in its python pickle format (``cifar-100-python/{train,test,meta}``)."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from .base import ArrayImages, ImageDataset

__all__ = ["load_cifar100"]


def _unpickle(path: Path) -> dict:
    with open(path, "rb") as fh:
        return pickle.load(fh, encoding="bytes")


def _get(d: dict, key: str):
    for k in (key.encode(), key):
        if k in d:
            return d[k]
    raise KeyError(f"key {key!r} missing (keys: {list(d)[:6]})")


def load_cifar100(root: str | Path, label: str = "fine") -> ImageDataset:
    """CIFAR-100: 50k train and 10k test 32×32 RGB images, 100 fine (or 20 coarse) classes."""
    if label not in ("fine", "coarse"):
        raise ValueError(f"label must be 'fine' or 'coarse', got {label!r}")
    root = Path(root)
    if (root / "cifar-100-python").is_dir():
        root = root / "cifar-100-python"
    for f in ("train", "test", "meta"):
        if not (root / f).is_file():
            raise FileNotFoundError(f"CIFAR-100 file {root / f} missing")
    parts = {}
    for split in ("train", "test"):
        d = _unpickle(root / split)
        data = np.asarray(_get(d, "data"), dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3072:
            raise ValueError(f"{root / split}: data must be (n, 3072) uint8, got {data.shape}")
        imgs = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        parts[split] = (np.ascontiguousarray(imgs), np.asarray(_get(d, f"{label}_labels"), dtype=np.int64))
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in _get(_unpickle(root / "meta"),
                                                                           f"{label}_label_names")]
    return ImageDataset("cifar-100", tuple(names), ArrayImages(parts["train"][0]), parts["train"][1],
                        ArrayImages(parts["test"][0]), parts["test"][1],
                        meta={"source": str(root), "format": "cifar-python", "label": label})
