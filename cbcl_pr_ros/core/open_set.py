"""Open set: decide whether a feature vector belongs to any taught class.

Default rule (``"distance"``): after the classifier picks class ``c``, ``x`` is *known* when its
Euclidean distance to the nearest centroid of ``c`` is below ``factor * D_gate`` (default factor 1.3,
:class:`~.learner.LearnerConfig`).  ``D_gate`` is a typical within-class pair distance: the backbone's
prior (:mod:`.distance_threshold`) refined by the spread of every class in memory, or the configured
``distance_threshold``; so the rule is in units of the spread of taught classes, works for any
backbone and does not hinge on the first pair of shots.  With the RMS within-class pair distance as
``D_gate``, 1.3 is the 97th-99th percentile of within-class pair distances (train splits of
Fashion-MNIST and the rendered objects, Tukey/L2 space): a new view lies that close to a single
shot of its class almost always; see docs/core.md "Open set".  Only the predicted class's centroids
are searched, so the cost does not grow with the number of classes.  ``min_confidence`` adds a
max-softmax threshold (``"confidence"`` uses that alone); ``"none"`` says every prediction is known.

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

__all__ = ["OPEN_SET_MODES", "DistanceGate", "class_extents", "class_spreads", "expected_calibration_error",
           "inside_probability", "GATE_SOFTNESS"]

OPEN_SET_MODES = ("distance", "confidence", "none")
# how soft the gate's confidence is (:func:`inside_probability`), in units of a class's radius: on
# real tables an answer's chance of being right falls off sharply at the boundary, so the curve is
# steep (chosen leave-one-source-out on real crops, among the softnesses that keep a benchmark set's
# ECE within 0.10; docs/core.md "Open set")
GATE_SOFTNESS = 0.03


@dataclass(frozen=True)
class DistanceGate:
    """Per-class centroids (index = class index) and the radius ``factor * distance_threshold``;
    ``class_radii`` (one per class, each <= ``radius``) where negatives tightened it
    (:mod:`.negatives`); ``negatives`` (m, d), when given, veto: a vector is known only where its
    class's nearest centroid is closer than ``veto`` times its nearest negative."""

    centroids: tuple[np.ndarray, ...]
    distance_threshold: float
    factor: float
    class_radii: np.ndarray | None = None
    negatives: np.ndarray | None = None
    veto: float = 1.0

    @property
    def radius(self) -> float:
        """The global radius (the largest any class gets)."""
        return self.factor * self.distance_threshold

    def radii(self, predicted: np.ndarray) -> np.ndarray:
        """The acceptance radius of each predicted class."""
        if self.class_radii is None:
            return np.full(len(predicted), self.radius)
        return np.asarray(self.class_radii, np.float64)[np.asarray(predicted, np.int64)]

    def distances(self, features: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        """Distance of each row to the nearest centroid of its predicted class."""
        out = np.empty(len(features))
        for i, (x, c) in enumerate(zip(np.asarray(features, np.float64), predicted)):
            cent = self.centroids[int(c)]
            out[i] = np.sqrt(((cent - x) ** 2).sum(axis=1).min())
        return out

    def ratios(self, features: np.ndarray, predicted: np.ndarray, distances: np.ndarray | None = None) -> np.ndarray:
        """How far out each row lies: its distance over the nearest bound of its predicted class (the
        class's radius, and ``veto`` times its distance to the nearest negative); known iff < 1."""
        d = self.distances(features, predicted) if distances is None else np.asarray(distances, np.float64)
        r = d / self.radii(predicted)
        if self.negatives is not None and len(self.negatives):
            x = np.asarray(features, np.float64)
            neg = np.asarray(self.negatives, np.float64)
            d2 = (x * x).sum(1)[:, None] + (neg * neg).sum(1)[None, :] - 2.0 * x @ neg.T
            near = np.sqrt(np.maximum(d2.min(axis=1), 0.0))
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.maximum(r, np.where(d > 0, d / (self.veto * near), 0.0))
        return r

    def known(self, features: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        return self.ratios(features, predicted) < 1.0


def inside_probability(ratio: np.ndarray) -> np.ndarray:
    """How sure the gate is that a vector at ``ratio`` (:meth:`DistanceGate.ratios`) belongs to its
    class: 0.5 on the boundary, rising to 1 at a centroid and falling outside,
    ``1 / (1 + exp((ratio - 1) / GATE_SOFTNESS))``."""
    z = np.clip((np.asarray(ratio, np.float64) - 1.0) / GATE_SOFTNESS, -50.0, 50.0)
    return 1.0 / (1.0 + np.exp(z))


def class_spreads(memory, fallback: float) -> np.ndarray:
    """Per class (memory order) the RMS distance of its members to their cluster centroids.

    ``sqrt(sum_i tr(S_i) / n)`` from the stored scatters; ``fallback`` where a class has no spread
    (singletons only).
    """
    out = []
    for _, cc in memory.items():
        if cc.diag is not None:
            tr = float(np.asarray(cc.diag, np.float64).sum())
        else:
            tr = float(sum((np.asarray(f, np.float64) ** 2).sum() for f in cc.factors))
        n = int(np.sum(cc.counts))
        out.append(np.sqrt(tr / n) if tr > 0 and n > 0 else fallback)
    return np.asarray(out)


def class_extents(memory) -> np.ndarray:
    """Per class (memory order) the RMS distance of its members to the class's mean: every cluster's
    scatter plus its centroid's offset from the mean; 0 for a class of one shot, small for copies of
    one.  Where :func:`class_spreads` says how tight each cluster is, this says how far the class's
    shots reach apart: whether it was taught from one view or from several."""
    out = []
    for _, cc in memory.items():
        counts = np.asarray(cc.counts, np.float64)
        n = float(counts.sum())
        if n <= 0:
            out.append(0.0)
            continue
        if cc.diag is not None:
            tr = float(np.asarray(cc.diag, np.float64).sum())
        else:
            tr = float(sum((np.asarray(f, np.float64) ** 2).sum() for f in cc.factors))
        means = np.asarray(cc.means, np.float64)
        mean = counts @ means / n
        tr += float(counts @ ((means - mean) ** 2).sum(axis=1))
        out.append(float(np.sqrt(max(tr, 0.0) / n)))
    return np.asarray(out)


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, bins: int = 15) -> float:
    """ECE: the count-weighted mean |accuracy - mean confidence| over ``bins`` equal-width bins.

    >>> expected_calibration_error(np.array([1.0, 1.0]), np.array([True, False]))
    0.5
    """
    conf = np.asarray(confidence, np.float64)
    ok = np.asarray(correct, bool)
    if conf.shape != ok.shape or conf.ndim != 1:
        raise ValueError(f"confidence and correct must be 1-d of one length, got {conf.shape} and {ok.shape}")
    if conf.size == 0:
        return 0.0
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, bins - 1)
    err = 0.0
    for b in range(bins):
        m = which == b
        if m.any():
            err += m.sum() * abs(ok[m].mean() - conf[m].mean())
    return float(err / conf.size)
