"""The methods built from the core layer's cluster memory and classifiers, behind the evaluation
interface: CBCL-PR (paper schedule; full or diagonal covariances), the fast closed-form head, CBCL
(weighted vote), NCM and naive fine-tuning. Nothing here re-implements core logic; this module only
maps integer class ids to the core's string labels and measures memory."""
from __future__ import annotations

import numpy as np

from .base import IncrementalMethod

__all__ = ["ClusterMemoryMethod", "FineTune", "HEADS"]

HEADS = ("linear_sgd", "gaussian", "vote", "ncm")


class ClusterMemoryMethod(IncrementalMethod):
    """Agg-Var cluster memory (core) + one of the core heads.

    Parameters
    ----------
    head : 'linear_sgd' (CBCL-PR: pseudo-rehearsal + SGD linear head), 'gaussian' (fast default),
        'vote' (CBCL's weighted vote over centroids) or 'ncm'.
    covariance : 'full' or 'diagonal'.
    rehearsal : 'few_shot' (paper FSIL: ``per_class`` pseudo-exemplars for every class, no real
        features) or 'full' (old classes replayed, new classes on their real features).
    distance_threshold : Agg-Var's D; None = the core's data-driven estimate on the first increment.
    epochs_per_increment : 2 = the paper's text (25 epochs + 2 per increment); the released code used 0.
    max_clusters, reduction : memory budget K and 'kmeans' (paper) or 'remove'.
    """

    name = "cbcl-pr"

    def __init__(self, head: str = "linear_sgd", covariance: str = "full", rehearsal: str = "few_shot",
                 distance_threshold: float | None = None, d_scale: float = 1.0, epochs: int = 25,
                 epochs_per_increment: int = 2, per_class: int = 40, n_neighbours: int = 5,
                 max_clusters: int | None = None, reduction: str = "kmeans", seed: int = 0) -> None:
        super().__init__(seed)
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        if d_scale <= 0:
            raise ValueError(f"d_scale must be > 0, got {d_scale}")
        self.head, self.covariance, self.rehearsal = head, covariance, rehearsal
        self.distance_threshold, self.d_scale = distance_threshold, d_scale
        self.epochs, self.epochs_per_increment, self.per_class = epochs, epochs_per_increment, per_class
        self.n_neighbours, self.max_clusters, self.reduction = n_neighbours, max_clusters, reduction
        self.memory_ = None
        self.snapshot_ = None
        self.D_: float | None = None
        self._rng = np.random.default_rng(seed)

    def _new_memory(self, dim: int):
        from cbcl_pr_ros.core.memory import ClusterMemory

        return ClusterMemory(dim, self.covariance, self.max_clusters, self.reduction, self.seed)

    def _teach(self, shots: dict[str, np.ndarray]) -> None:
        from cbcl_pr_ros.core.distance_threshold import estimate_distance_threshold

        if self.memory_ is None:
            self.memory_ = self._new_memory(next(iter(shots.values())).shape[1])
        if self.D_ is None:
            base = self.distance_threshold or estimate_distance_threshold(shots, seed=self.seed)
            self.D_ = float(base) * self.d_scale
        self.memory_ = self.memory_.with_taught(shots, self.D_)

    def _fit_head(self, real: dict[str, np.ndarray]) -> None:
        from cbcl_pr_ros.core import classifiers as clf

        if self.head == "linear_sgd":
            sched = clf.SGDSchedule(epochs=self.epochs, epochs_per_increment=self.epochs_per_increment)
            self.snapshot_ = clf.fit_linear_sgd(self.memory_, self.rehearsal, self._rng, sched, self.increments_,
                                                real=real if self.rehearsal == "full" else None,
                                                per_class=self.per_class)
        elif self.head == "gaussian":
            self.snapshot_ = clf.fit_gaussian_head(self.memory_)
        elif self.head == "vote":
            self.snapshot_ = clf.fit_weighted_vote(self.memory_, self.n_neighbours)
        else:
            self.snapshot_ = clf.fit_ncm(self.memory_)
        self._ids = np.array([int(c) for c in self.snapshot_.classes], dtype=np.int64)

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        shots = {str(c): x for c, x in feats.items()}
        self._teach(shots)
        self._fit_head(shots)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self._ids[np.argmax(self.snapshot_.scores(x), axis=1)]

    def n_clusters(self) -> int:
        return int(self.memory_.n_clusters) if self.memory_ is not None else 0

    def memory_bytes(self) -> int:
        if self.head == "ncm":  # NCM needs only the class means (kept as count-weighted cluster means)
            return int(len(self.classes_) * (self.feature_dim_ * 4 + 8))
        head = 0
        if hasattr(self.snapshot_, "weight"):
            head = self.snapshot_.weight.nbytes + self.snapshot_.bias.nbytes
        if self.head == "vote":  # centroids and counts only: the vote never reads covariances
            return int(self.memory_.n_clusters * (self.feature_dim_ * 4 + 8))
        return int(self.memory_.nbytes() + head)


class FineTune(IncrementalMethod):
    """FT: the core's naive fine-tuning head (new classes' real features only; shows forgetting)."""

    name = "ft"

    def __init__(self, epochs: int = 25, seed: int = 0) -> None:
        super().__init__(seed)
        self.epochs = epochs
        self.head_ = None

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        from cbcl_pr_ros.core.classifiers import NaiveFineTuneHead

        if self.head_ is None:
            self.head_ = NaiveFineTuneHead(next(iter(feats.values())).shape[1], epochs=self.epochs, seed=self.seed)
        self.head_.partial_fit({str(c): x for c, x in feats.items()})

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return np.array([int(c) for c in self.head_.predict(x)], dtype=np.int64)

    def memory_bytes(self) -> int:
        return int((self.feature_dim_ + 1) * len(self.classes_) * 4)
