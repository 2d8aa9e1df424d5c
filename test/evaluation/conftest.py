"""Shared helpers for the evaluation tests: small files in each supported on-disk format."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def write_png(path, rgb):
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    img = rgb if rgb.ndim == 2 else rgb[:, :, ::-1]
    assert cv2.imwrite(str(path), np.ascontiguousarray(img))


def blob_features(n_classes=6, per_class=20, dim=16, seed=0, sep=6.0):
    """Well separated Gaussian classes: every sane method should classify them."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, sep, (n_classes, dim))
    return {c: (centres[c] + rng.normal(0, 1.0, (per_class, dim))).astype(np.float32) for c in range(n_classes)}
