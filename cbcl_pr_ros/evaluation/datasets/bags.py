"""Teaching sessions recorded in rosbag2 files, read through the bag layer (imported lazily).

Why lazy: ``cbcl_pr_ros.bags`` needs ``rosbags``; every other loader must keep working without it.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np

from .base import ArrayImages, ImageDataset

__all__ = ["load_bag_sessions", "BAG_READER_NAMES"]

# Functions of cbcl_pr_ros.bags tried in order; each takes a bag path and returns either an
# ImageDataset, or (images, labels) / (features, labels) with a train/test split given by the caller.
BAG_READER_NAMES = ("load_teaching_dataset", "read_teaching_dataset", "read_teaching_session")


def _reader():
    try:
        mod = importlib.import_module("cbcl_pr_ros.bags")
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(f"reading bags needs cbcl_pr_ros.bags (and rosbags): {exc}") from exc
    for name in BAG_READER_NAMES:
        fn = getattr(mod, name, None)
        if callable(fn):
            return fn
    raise RuntimeError(f"cbcl_pr_ros.bags offers none of {BAG_READER_NAMES}; cannot read teaching bags yet")


def load_bag_sessions(path: str | Path, test_fraction: float = 0.3, seed: int = 0, reader=None) -> ImageDataset:
    """Teaching session(s) in a bag as a data set; taught frames are split per class into train/test."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"bag {path} not found")
    out = (reader or _reader())(path)
    if isinstance(out, ImageDataset):
        return out
    images, labels = out
    labels = [str(x) for x in labels]
    classes = tuple(sorted(set(labels)))
    y = np.array([classes.index(x) for x in labels])
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), dtype=bool)
    for c in range(len(classes)):
        idx = np.flatnonzero(y == c)
        k = min(len(idx) - 1, max(1, int(round(test_fraction * len(idx))))) if len(idx) > 1 else 0
        test[rng.permutation(idx)[:k]] = True
    arr = np.asarray(images)
    if arr.dtype != np.uint8:
        raise TypeError(f"bag reader returned {arr.dtype} images; expected uint8 RGB")
    return ImageDataset(f"bag:{path.name}", classes, ArrayImages(arr[~test]), y[~test], ArrayImages(arr[test]),
                        y[test], meta={"source": str(path), "format": "rosbag2"})
