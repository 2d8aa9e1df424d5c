"""The spread of teach-time views, shared by every class.

A class taught from one or a few images has almost no spread of its own, so its Gaussian is a
guess.  Jittered views of each taught image (crops, mirror, colour: :mod:`cbcl_pr_ros.features.
augment`) measure how the backbone's features move under framing and lighting, which is the camera's
and the backbone's nuisance rather than anything about one class.  So the views are pooled over
every image taught into one covariance ``N`` (the average, over images, of the covariance of an
image's views about their mean), and the default head adds ``N`` to its pooled within-class
covariance before shrinking it (:mod:`.classifiers.gaussian`).

Keeping ``N`` shared instead of storing views in each class's clusters means a class keeps only its
images' statistics (half their raw bytes in float16), and D, the open-set gate and the calibration
folds see the images alone.  ``N`` is held as a factor ``F`` (``N = F F^T``) whose rank is capped
at :data:`MAX_RANK` by a truncated SVD, so its size is fixed however much is taught.  It is a
property of the camera and backbone, so forgetting or renaming a class leaves it as it is.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> spread = ViewSpread.empty(6).with_views(rng.normal(0, 1, (3, 4, 6)))  # 3 images, 4 views each
>>> spread.images, spread.factor.shape
(3, (6, 6))
>>> bool(np.allclose(spread.covariance(), spread.factor @ spread.factor.T))
True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["ViewSpread", "MAX_RANK", "MAX_IMAGES"]

#: rank kept of the shared view covariance (its factor is d x MAX_RANK: 164 KB in float16 at d = 1280)
MAX_RANK = 64
#: the most images a spread may stand for (a memory file's limit): pooling saturates there, so that a
#: spread at the limit can still take views and be saved
MAX_IMAGES = 2**62


@dataclass(frozen=True)
class ViewSpread:
    """``N = factor factor^T``, the mean per-image covariance of teach-time views, over ``images``."""

    factor: np.ndarray  # (d, r) float32, r <= MAX_RANK
    images: int

    def __post_init__(self) -> None:
        f = np.asarray(self.factor)
        if f.ndim != 2 or f.shape[1] > MAX_RANK or not np.isfinite(f).all():
            raise ValueError(f"view spread factor must be a finite (d, r <= {MAX_RANK}) array, got {f.shape}")
        if isinstance(self.images, bool) or not isinstance(self.images, (int, np.integer)) \
                or not 0 <= self.images <= MAX_IMAGES:
            raise ValueError(f"images must be an integer in [0, {MAX_IMAGES}], got {self.images!r}")
        if self.images == 0 and f.shape[1]:
            raise ValueError("a view spread of 0 images must be empty")
        f.setflags(write=False)

    @classmethod
    def empty(cls, feature_dim: int) -> "ViewSpread":
        return cls(np.zeros((int(feature_dim), 0), np.float32), 0)

    @property
    def feature_dim(self) -> int:
        return int(self.factor.shape[0])

    def with_views(self, views: np.ndarray) -> "ViewSpread":
        """A new spread with the (n, k, d) views of ``n`` more images (k >= 2 views each) pooled in."""
        v = np.asarray(views, np.float64)
        if v.ndim != 3 or v.shape[2] != self.feature_dim or v.shape[1] < 2 or not np.isfinite(v).all():
            raise ValueError(f"views must be finite (n, k >= 2, d={self.feature_dim}), got {v.shape}")
        n, k = v.shape[:2]
        if n == 0:
            return self
        total = self.images + n
        dev = (v - v.mean(axis=1, keepdims=True)).reshape(-1, self.feature_dim)
        factor = np.concatenate([self.factor.astype(np.float64) * np.sqrt(self.images / total),
                                 dev.T / np.sqrt((k - 1) * total)], axis=1)
        return ViewSpread._capped(factor, total)

    def pooled(self, other: "ViewSpread") -> "ViewSpread":
        """The spread of two learners' views together (a memory merge): the image-weighted mean of
        both covariances, exact while the two factors hold at most MAX_RANK columns together."""
        if other.feature_dim != self.feature_dim:
            raise ValueError(f"view spreads of widths {self.feature_dim} and {other.feature_dim} cannot be pooled")
        total = self.images + other.images
        if total == 0:
            return self
        factor = np.concatenate([self.factor.astype(np.float64) * np.sqrt(self.images / total),
                                 other.factor.astype(np.float64) * np.sqrt(other.images / total)], axis=1)
        return ViewSpread._capped(factor, total)

    @staticmethod
    def _capped(factor: np.ndarray, images: int) -> "ViewSpread":
        """``factor`` truncated to MAX_RANK columns by SVD, rounded to float16 values."""
        rank = min(MAX_RANK, factor.shape[0])
        if factor.shape[1] > rank:
            u, s, _ = np.linalg.svd(factor, full_matrices=False)
            factor = u[:, :rank] * s[:rank]
        # float16-exact values: what a memory file stores (format 4) is what the head used
        return ViewSpread(np.ascontiguousarray(factor.astype(np.float16), np.float32), min(int(images), MAX_IMAGES))

    def covariance(self) -> np.ndarray:
        """(d, d) float64 ``N`` (zeros when nothing was pooled), read-only; computed once per spread,
        since a teach reads it for the served head and again for its calibration folds."""
        return self._covariance

    @cached_property
    def _covariance(self) -> np.ndarray:
        f = self.factor.astype(np.float64)
        cov = f @ f.T
        cov.setflags(write=False)
        return cov

    def nbytes(self) -> int:
        return int(self.factor.nbytes)
