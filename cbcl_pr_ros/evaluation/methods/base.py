"""The one interface every compared method implements, so that one runner and one contract test
cover them all."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

import numpy as np

__all__ = ["IncrementalMethod", "check_increment", "check_features"]


def check_features(x: np.ndarray, dim: int | None = None) -> np.ndarray:
    """(n, d) finite float array, or a ValueError/TypeError naming what is wrong."""
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"features must be numeric, got {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"features must be 2-D (n, d), got shape {arr.shape}")
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"features have {arr.shape[1]} dimensions, the method was fitted with {dim}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("features contain NaN or inf")
    return arr.astype(np.float32, copy=False)


def check_increment(features_by_class: Mapping[int, np.ndarray], dim: int | None) -> dict[int, np.ndarray]:
    """Validate one increment: a non-empty mapping class id → (n_c >= 1, d) features."""
    if not isinstance(features_by_class, Mapping) or not features_by_class:
        raise ValueError("an increment must be a non-empty mapping class id -> features")
    out = {}
    for c, x in features_by_class.items():
        if not isinstance(c, (int, np.integer)):
            raise TypeError(f"class ids must be integers, got {c!r}")
        arr = check_features(x, dim)
        if len(arr) == 0:
            raise ValueError(f"class {c} has no features")
        dim = arr.shape[1]
        out[int(c)] = arr
    return out


class IncrementalMethod(ABC):
    """Learns classes increment by increment from feature vectors; predicts class ids.

    Subclasses implement ``_fit_increment`` and ``_predict``; the public methods validate inputs.
    ``classes_`` lists the learned class ids in arrival order.
    """

    name: str = "method"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.classes_: list[int] = []
        self.feature_dim_: int | None = None
        self.increments_ = 0

    def fit_increment(self, features_by_class: Mapping[int, np.ndarray]) -> "IncrementalMethod":
        feats = check_increment(features_by_class, self.feature_dim_)
        self.feature_dim_ = next(iter(feats.values())).shape[1]
        self._fit_increment(feats)
        for c in feats:
            if c not in self.classes_:
                self.classes_.append(c)
        self.increments_ += 1
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        if not self.classes_:
            raise RuntimeError(f"{self.name}: predict before any increment")
        arr = check_features(x, self.feature_dim_)
        return np.asarray(self._predict(arr), dtype=np.int64)

    def n_clusters(self) -> int:
        """Stored prototypes/clusters (for the prediction-time figure); classes by default."""
        return len(self.classes_)

    @abstractmethod
    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None: ...

    @abstractmethod
    def _predict(self, x: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def memory_bytes(self) -> int:
        """Bytes of the state the method keeps between increments (classifier and memory)."""
