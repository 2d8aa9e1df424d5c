"""Open set: decide whether a feature vector belongs to any taught class.

Default rule (``"distance"``): after the classifier picks class ``c``, ``x`` is *known* when its
Euclidean distance to the nearest centroid of ``c`` is below ``factor * D``.  ``D`` is the Agg-Var
threshold, itself calibrated on the taught data (median within-class distance, see
:mod:`.distance_threshold`), so the rule is in units of the spread of the taught classes and works
for any backbone; a taught vector is within about ``D`` of its cluster by construction, a vector of
an unseen object is usually farther.  Only the predicted class's centroids are searched, so the cost
does not grow with the number of classes.  ``min_confidence`` adds a max-softmax threshold
(``"confidence"`` uses that alone; ``"none"`` says every prediction is known).

>>> import numpy as np
>>> gate = DistanceGate((np.zeros((1, 2), np.float32),), distance_threshold=1.0, factor=2.0)
>>> gate.distances(np.array([[0.5, 0.0], [5.0, 0.0]]), np.array([0, 0])).tolist()
[0.5, 5.0]
>>> gate.known(np.array([[0.5, 0.0], [5.0, 0.0]]), np.array([0, 0])).tolist()
[True, False]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["OPEN_SET_MODES", "DistanceGate"]

OPEN_SET_MODES = ("distance", "confidence", "none")


@dataclass(frozen=True)
class DistanceGate:
    """Per-class centroids (index = class index) and the radius ``factor * distance_threshold``."""

    centroids: tuple[np.ndarray, ...]
    distance_threshold: float
    factor: float

    @property
    def radius(self) -> float:
        return self.factor * self.distance_threshold

    def distances(self, features: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        """Distance of each row to the nearest centroid of its predicted class."""
        out = np.empty(len(features))
        for i, (x, c) in enumerate(zip(np.asarray(features, np.float64), predicted)):
            cent = self.centroids[int(c)]
            out[i] = np.sqrt(((cent - x) ** 2).sum(axis=1).min())
        return out

    def known(self, features: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        return self.distances(features, predicted) < self.radius
