"""The methods that claim to be CBCL-PR (any head), and naive fine-tuning, behind the evaluation
interface. The CBCL-PR family runs the product's :class:`~cbcl_pr_ros.core.CBCLPRLearner` through
:class:`.adapter.LearnerClassifier`; nothing here assembles memory, rehearsal or heads itself. This
module only maps the evaluation's integer class ids onto the learner and counts memory."""
from __future__ import annotations

import numpy as np

from cbcl_pr_ros.core import LearnerConfig

from .adapter import LearnerClassifier
from .base import IncrementalMethod

__all__ = ["LearnerMethod", "FineTune"]


class LearnerMethod(IncrementalMethod):
    """CBCL-PR as the product runs it: one :class:`LearnerClassifier` with ``config``.

    ``config`` decides everything (head, covariance, rehearsal, budget, seed); ``d_scale`` multiplies
    the data-driven D (see :class:`LearnerClassifier`); ``backbone`` names where the features come from
    (the learner's per-backbone distance prior is looked up by it).
    """

    name = "cbcl-pr"

    def __init__(self, config: LearnerConfig, d_scale: float = 1.0, name: str | None = None,
                 backbone: str = "evaluation") -> None:
        if not isinstance(config, LearnerConfig):
            raise TypeError(f"config must be a LearnerConfig, got {type(config).__name__}")
        if not d_scale > 0:
            raise ValueError(f"d_scale must be > 0, got {d_scale}")
        super().__init__(int(config.seed))
        self.config = config
        self.estimator = LearnerClassifier(config, d_scale=d_scale, backbone=backbone)
        if name is not None:
            self.name = name

    @property
    def learner_(self):
        """The :class:`CBCLPRLearner` being evaluated (None before the first increment)."""
        return getattr(self.estimator, "learner_", None)

    @property
    def D_(self) -> float | None:
        learner = self.learner_
        return None if learner is None else learner.distance_threshold_

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        x = np.vstack(list(feats.values()))
        y = np.concatenate([np.full(len(v), c, dtype=np.int64) for c, v in feats.items()])
        self.estimator.partial_fit(x, y)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self.estimator.predict(x)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order."""
        return self.estimator.predict_proba(x)

    def n_clusters(self) -> int:
        learner = self.learner_
        return int(learner.n_clusters_) if learner is not None else 0

    def memory_bytes(self) -> int:
        """What the head needs between increments: the vote reads centroids and counts only, NCM the
        class means only; every other head the learner's memory plus its parameters."""
        learner = self.learner_
        if learner is None:
            return 0
        d = learner.feature_dim
        if self.config.classifier == "ncm":
            return int(len(learner.classes_) * (d * 4 + 8))
        if self.config.classifier == "cbcl_vote":
            return int(learner.n_clusters_ * (d * 4 + 8))
        return int(learner.memory_bytes())


class FineTune(IncrementalMethod):
    """FT: the core's naive fine-tuning head (new classes' real features only; shows forgetting)."""

    name = "ft"

    def __init__(self, epochs: int = 25, seed: int = 0) -> None:
        super().__init__(seed)
        self.epochs = epochs
        self.head_ = None

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        from cbcl_pr_ros.core.classifiers import NaiveFineTuneHead  # local: torch loads only for this head

        if self.head_ is None:
            self.head_ = NaiveFineTuneHead(next(iter(feats.values())).shape[1], epochs=self.epochs, seed=self.seed)
        self.head_.partial_fit({str(c): x for c, x in feats.items()})

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return np.array([int(c) for c in self.head_.predict(x)], dtype=np.int64)

    def memory_bytes(self) -> int:
        return int((self.feature_dim_ + 1) * len(self.classes_) * 4)
