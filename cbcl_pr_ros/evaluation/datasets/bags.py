"""Teaching sessions recorded in rosbag2 files as an evaluation data set.

The bag layer hands over frames per label (:func:`cbcl_pr_ros.bags.bag_to_class_images`); the data set
is built here, so the dependency runs one way only (evaluation uses bags, bags never import the
evaluation). The bag layer is imported when a bag is read: it needs ``rosbags``, and every other loader
must keep working without it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from cbcl_pr_ros.bags import bag_to_class_images

from .base import ArrayImages, ImageDataset

__all__ = ["load_bag_sessions"]

Frames = Mapping[str, Sequence[np.ndarray]]


def _read_frames(path: Path) -> tuple[Frames, Frames]:
    return bag_to_class_images(path)


def _flat(frames: Frames, classes: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    images = [im for v in frames.values() for im in v]
    labels = [classes.index(k) for k, v in frames.items() for _ in v]
    return np.stack(images), np.array(labels, dtype=np.int64)


def load_bag_sessions(path: str | Path, test_fraction: float = 0.3, seed: int = 0,
                      reader: Callable[[Path], tuple[Frames, Frames]] | None = None) -> ImageDataset:
    """A teaching bag as a data set, split as the session was: taught frames train, classified frames
    with a ground-truth label test. A bag without labelled classify events has its taught frames split
    per class (``test_fraction`` of each, seeded). ``reader`` (for tests) replaces the bag layer."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"bag {path} not found")
    train, test = (reader or _read_frames)(path)
    shapes = {np.asarray(im).shape for d in (train, test) for v in d.values() for im in v}
    if len(shapes) != 1:
        raise ValueError(f"{path}: frames of several sizes {sorted(shapes)}; a data set needs one")
    classes = tuple(sorted(set(train) | set(test)))
    xtr, ytr = _flat(train, classes)
    if xtr.dtype != np.uint8:
        raise TypeError(f"bag reader returned {xtr.dtype} images; expected uint8 RGB")
    meta = {"source": str(path), "format": "rosbag2"}
    if any(len(v) for v in test.values()):
        xte, yte = _flat(test, classes)
        meta["split"] = "as recorded"
    else:
        rng = np.random.default_rng(seed)
        is_test = np.zeros(len(ytr), dtype=bool)
        for c in range(len(classes)):
            idx = np.flatnonzero(ytr == c)
            k = min(len(idx) - 1, max(1, int(round(test_fraction * len(idx))))) if len(idx) > 1 else 0
            is_test[rng.permutation(idx)[:k]] = True
        xtr, ytr, xte, yte = xtr[~is_test], ytr[~is_test], xtr[is_test], ytr[is_test]
        meta["split"] = f"taught frames, {test_fraction:.0%} per class held out (seed {seed})"
    return ImageDataset(f"bag:{path.name}", classes, ArrayImages(xtr), ytr, ArrayImages(xte), yte, meta=meta)
