"""Teach-time views of a taught crop: random resized crops, mirror and colour jitter.

A class taught from one or a few crops has no spread of its own for a per-class covariance to use,
and its mean rests on one framing and one lighting.  Passing a few jittered copies of every taught
crop through the same backbone gives the class a cheap estimate of how its features move under
framing, mirror and lighting changes (the nuisance the camera will add at recognition time).  The
views are a pure, seeded function of the image, so a teach is reproducible; each view costs one
backbone pass at teach time (nothing at recognition time).  Which views help, and by how much, is
measured in docs/core.md ("Levers").

>>> import numpy as np
>>> img = np.arange(32 * 48 * 3, dtype=np.uint8).reshape(32, 48, 3)
>>> views = teach_views(img, 3, seed=1)
>>> len(views), views[0].shape, views[0].dtype
(3, (32, 48, 3), dtype('uint8'))
>>> bool(np.array_equal(teach_views(img, 3, seed=1)[2], views[2]))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

__all__ = ["ViewJitter", "teach_views", "with_teach_views", "recentre_views", "teaching_vectors"]


@dataclass(frozen=True)
class ViewJitter:
    """Ranges of the random views: kept fraction of the area, aspect-ratio change (relative to the
    image's own), mirror probability and
    the brightness/contrast/saturation factors (each drawn from ``[1 - colour, 1 + colour]``)."""

    min_area: float = 0.6
    max_aspect: float = 4.0 / 3.0
    flip: float = 0.5
    colour: float = 0.25

    def __post_init__(self) -> None:
        if not 0.05 <= self.min_area <= 1.0:
            raise ValueError(f"min_area must be in [0.05, 1], got {self.min_area!r}")
        if not 1.0 <= self.max_aspect <= 4.0:
            raise ValueError(f"max_aspect must be in [1, 4], got {self.max_aspect!r}")
        if not 0.0 <= self.flip <= 1.0:
            raise ValueError(f"flip must be in [0, 1], got {self.flip!r}")
        if not 0.0 <= self.colour < 1.0:
            raise ValueError(f"colour must be in [0, 1), got {self.colour!r}")


def _one_view(rgb: np.ndarray, rng: np.random.Generator, jitter: ViewJitter) -> np.ndarray:
    h, w = rgb.shape[:2]
    area = rng.uniform(jitter.min_area, 1.0)  # fraction of the image kept
    aspect = np.exp(rng.uniform(-np.log(jitter.max_aspect), np.log(jitter.max_aspect)))  # relative to the image's
    ch = int(round(min(h, max(1.0, h * np.sqrt(area / aspect)))))
    cw = int(round(min(w, max(1.0, w * np.sqrt(area * aspect)))))
    y0 = int(rng.integers(0, h - ch + 1))
    x0 = int(rng.integers(0, w - cw + 1))
    out = cv2.resize(rgb[y0:y0 + ch, x0:x0 + cw], (w, h), interpolation=cv2.INTER_LINEAR).astype(np.float32)
    if rng.uniform() < jitter.flip:
        out = out[:, ::-1]
    c = jitter.colour
    if c > 0:
        b, k, s = rng.uniform(1 - c, 1 + c, 3)
        grey = out @ np.array([0.299, 0.587, 0.114], np.float32)
        out = grey[..., None] + s * (out - grey[..., None])  # saturation
        out = (out - grey.mean()) * k + grey.mean()  # contrast about the mean grey level
        out = out * b  # brightness
    return np.ascontiguousarray(np.clip(out + 0.5, 0, 255).astype(np.uint8))


def teach_views(rgb: np.ndarray, n: int, seed: int = 0, jitter: ViewJitter | None = None) -> list[np.ndarray]:
    """``n`` jittered copies (same size, uint8 RGB) of one (H, W, 3) uint8 crop, seeded by ``seed``."""
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8 or min(rgb.shape[:2]) < 1:
        raise ValueError(f"teach_views takes one (H, W, 3) uint8 image, got {rgb.dtype} {rgb.shape}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    rng = np.random.default_rng(seed)
    jitter = jitter or ViewJitter()
    return [_one_view(rgb, rng, jitter) for _ in range(int(n))]


def with_teach_views(rgbs: list[np.ndarray], n: int, seed: int = 0,
                     jitter: ViewJitter | None = None) -> list[np.ndarray]:
    """``rgbs`` followed by ``n`` views of each (image ``i``'s views seeded by ``seed + i``): the images a
    teach sends through the backbone when teach-time views are on."""
    out = list(rgbs)
    for i, rgb in enumerate(rgbs):
        out += teach_views(rgb, n, seed + i, jitter)
    return out


def recentre_views(shots: np.ndarray, views: np.ndarray, spread: float = 1.0) -> np.ndarray:
    """Vectors of the views moved onto their own shot: ``x_i + spread (v_ij - mean_j v_ij)``.

    ``shots`` (n, d), ``views`` (n, k, d) -> (n k, d).  The class mean then stays the shots' mean (a
    crop that cuts part of the object no longer drags it), and the views only add spread.
    """
    x = np.asarray(shots, np.float32)
    v = np.asarray(views, np.float32)
    if x.ndim != 2 or v.ndim != 3 or v.shape[0] != x.shape[0] or v.shape[2] != x.shape[1]:
        raise ValueError(f"need shots (n, d) and views (n, k, d), got {x.shape} and {v.shape}")
    if not 0.0 <= spread <= 1.0:
        raise ValueError(f"spread must be in [0, 1], got {spread!r}")
    return (x[:, None] + spread * (v - v.mean(1, keepdims=True))).reshape(-1, x.shape[1])


def teaching_vectors(feats: np.ndarray, n_images: int, n_views: int,
                     spread: float | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Split the backbone's output for :func:`with_teach_views`' images (the ``n_images`` images
    first, then ``n_views`` views of each) into the images' vectors (n, d) and their views' (n, k, d),
    recentred on their own image (:func:`recentre_views`) unless ``spread`` is None; views None when
    ``n_views`` is 0.  The learner keeps the views as spread, not as shots."""
    f = np.asarray(feats, np.float32)
    if f.ndim != 2 or f.shape[0] != n_images * (1 + n_views):
        raise ValueError(f"need {n_images} x (1 + {n_views}) vectors, got {f.shape}")
    shots = f[:n_images]
    if not n_views:
        return shots, None
    views = f[n_images:].reshape(n_images, n_views, -1)
    if spread is not None:
        views = recentre_views(shots, views, spread).reshape(n_images, n_views, -1)
    return shots, views
