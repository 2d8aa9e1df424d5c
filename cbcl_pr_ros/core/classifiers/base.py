"""What every trained classifier hands the learner: an immutable scoring snapshot.

A snapshot maps a batch of features to per-class probabilities (rows sum to 1, columns in the
order of ``classes``).  It never changes after it is built, which is what lets ``predict`` run in
one thread while the next snapshot is trained in another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["Snapshot", "LinearSnapshot", "softmax"]


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for large logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


class Snapshot(Protocol):
    """A trained, immutable classifier."""

    kind: str
    classes: tuple[str, ...]

    def scores(self, features: np.ndarray) -> np.ndarray:
        """(n, d) features -> (n, len(classes)) probabilities."""
        ...


@dataclass(frozen=True)
class LinearSnapshot:
    """``softmax(x W^T + b)``: CBCL-PR's linear head, its closed-form fast variant, and NCM."""

    kind: str
    classes: tuple[str, ...]
    weight: np.ndarray  # (C, d) float32
    bias: np.ndarray  # (C,) float32

    def __post_init__(self) -> None:
        self.weight.setflags(write=False)
        self.bias.setflags(write=False)

    def logits(self, features: np.ndarray) -> np.ndarray:
        return np.asarray(features, np.float32) @ self.weight.T + self.bias

    def scores(self, features: np.ndarray) -> np.ndarray:
        return softmax(self.logits(features).astype(np.float64))

    def renamed(self, classes: tuple[str, ...]) -> "LinearSnapshot":
        return LinearSnapshot(self.kind, classes, self.weight, self.bias)

    def without(self, index: int) -> "LinearSnapshot":
        """The same head with one class's row removed (exact for a linear softmax)."""
        keep = [i for i in range(len(self.classes)) if i != index]
        return LinearSnapshot(self.kind, tuple(self.classes[i] for i in keep),
                              np.ascontiguousarray(self.weight[keep]), np.ascontiguousarray(self.bias[keep]))
