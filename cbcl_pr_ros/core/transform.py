"""Feature transform applied before anything is stored or classified: Tukey power, then L2 norm.

Pooled CNN features are non-negative and heavy-tailed (a few channels fire far above the rest), so
class scatters are far from Gaussian and a few channels dominate every distance.  Tukey's ladder of
powers ``x -> sign(x) |x|^p`` (p = 0.5) makes the per-channel distributions closer to Gaussian, and
L2 normalisation removes the image-level scale (contrast, object size), which is nuisance for
recognition.  The transform is a fixed function of its two parameters (no fitted state): the memory
stores transformed vectors, the learner transforms every vector it is given, and the parameters
are part of :class:`~.learner.LearnerConfig`, so a saved file is read back with the same transform.
Centring (subtracting a mean of the first data taught) was measured and not adopted (docs/core.md
"Feature transform").

>>> import numpy as np
>>> t = FeatureTransform(power=0.5, l2=True)
>>> t(np.array([[4.0, 0.0, 9.0]])).round(3).tolist()
[[0.555, 0.0, 0.832]]
>>> FeatureTransform(1.0, False).identity
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FeatureTransform", "TRANSFORMS"]

TRANSFORMS = ("tukey_l2", "l2", "none")


@dataclass(frozen=True)
class FeatureTransform:
    """``x -> l2norm(sign(x) |x|^power)`` (each step optional)."""

    power: float = 0.5
    l2: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.power, bool) or not isinstance(self.power, (int, float, np.integer, np.floating)) \
                or not np.isfinite(self.power) or not 0.0 < self.power <= 1.0:
            raise ValueError(f"power must be in (0, 1], got {self.power!r}")

    @classmethod
    def named(cls, name: str, power: float = 0.5) -> "FeatureTransform":
        """The transform called ``name`` in :data:`TRANSFORMS` (``power`` used by "tukey_l2" only)."""
        if name == "tukey_l2":
            return cls(power, True)
        if name == "l2":
            return cls(1.0, True)
        if name == "none":
            return cls(1.0, False)
        raise ValueError(f"transform must be one of {TRANSFORMS}, got {name!r}")

    @property
    def identity(self) -> bool:
        return self.power == 1.0 and not self.l2

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Transformed copy of a (n, d) array, float64 (float32 input stays float32)."""
        x = np.asarray(x)
        if self.identity:
            return x
        out = np.array(x, dtype=np.float32 if x.dtype == np.float32 else np.float64)
        if self.power != 1.0:
            out = np.sign(out) * np.abs(out) ** self.power
        if self.l2:
            norm = np.linalg.norm(out, axis=-1, keepdims=True)
            out /= np.maximum(norm, np.finfo(out.dtype).tiny)  # an all-zero vector stays zero
        return out
