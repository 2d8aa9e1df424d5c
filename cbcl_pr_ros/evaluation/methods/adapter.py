"""The product's learner with a scikit-learn face, so that the evaluation runs ``CBCLPRLearner`` itself.

Why an adapter and not a re-assembled pipeline: the numbers in docs/results.md must be the numbers of
the learner the nodes serve. :class:`LearnerClassifier` owns one :class:`~cbcl_pr_ros.core.CBCLPRLearner`;
every call is the learner's own (``partial_fit`` = one ``teach_increment``, ``predict_proba`` =
``predict_scores``). The :class:`~cbcl_pr_ros.core.LearnerConfig` is the single switch: any head the
core adds to its config is available here without a line changed. Randomness is private to the learner
(its generator is seeded from ``config.seed`` and the increment), so two adapters never share a stream.

>>> import numpy as np
>>> from cbcl_pr_ros.core import LearnerConfig
>>> rng = np.random.default_rng(0)
>>> x = np.vstack([rng.normal(0, 1, (5, 8)), rng.normal(6, 1, (5, 8))])
>>> clf = LearnerClassifier(LearnerConfig(seed=0)).partial_fit(x, [3] * 5 + [7] * 5)
>>> clf.classes_.tolist(), clf.predict(np.full((1, 8), 6.0)).tolist()
([3, 7], [7])
"""
from __future__ import annotations

import dataclasses
from collections.abc import Hashable

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig, estimate_distance_threshold
from cbcl_pr_ros.core.distance_threshold import distance_prior
from cbcl_pr_ros.core.transform import FeatureTransform
from cbcl_pr_ros.core.validation import check_features

__all__ = ["LearnerClassifier"]


class LearnerClassifier(ClassifierMixin, BaseEstimator):
    """``fit``/``partial_fit``/``predict``/``predict_proba`` around one :class:`CBCLPRLearner`.

    Parameters
    ----------
    config : LearnerConfig
        Everything the learner does (head, covariance, rehearsal, seed, ...); None = the product default.
    d_scale : float
        Multiplies the learner's data-driven Agg-Var threshold D (for the D sweep). At 1.0 the learner
        estimates D itself, exactly as in the product; otherwise D is estimated with the core's
        estimator on the first increment, scaled, and given to the learner through its config.
    backbone : str
        The backbone the features come from, given to the learner as the nodes give it: the learner
        looks up its tabulated distance prior by this name (for the default's transform), so a wrong
        name changes D. "evaluation" (no prior) only for features of no known backbone.

    Labels may be any hashable whose ``str`` is a valid learner label; ``classes_`` lists them in
    arrival order, which is the column order of :meth:`predict_proba`.
    """

    def __init__(self, config: LearnerConfig | None = None, d_scale: float = 1.0, backbone: str = "evaluation") -> None:
        self.config = config
        self.d_scale = d_scale
        self.backbone = backbone

    # ------------------------------------------------------------------ fitting
    def fit(self, X: np.ndarray, y: np.ndarray) -> "LearnerClassifier":
        """A fresh learner taught ``X, y`` as one increment."""
        for attr in ("learner_", "classes_", "_by_name"):
            self.__dict__.pop(attr, None)
        return self.partial_fit(X, y)

    def partial_fit(self, X: np.ndarray, y: np.ndarray, classes: object = None) -> "LearnerClassifier":
        """Teach one increment: every class present in ``y`` with its rows of ``X`` (one retrain).

        ``classes`` is accepted for scikit-learn compatibility and ignored (classes arrive with data).
        On any error nothing changes.
        """
        if self.config is not None and not isinstance(self.config, LearnerConfig):
            raise TypeError(f"config must be a LearnerConfig, got {type(self.config).__name__}")
        if isinstance(self.d_scale, bool) or not isinstance(self.d_scale, (int, float)) or not self.d_scale > 0:
            raise ValueError(f"d_scale must be a positive number, got {self.d_scale!r}")
        x = np.asarray(X)
        labels = np.asarray(y, dtype=object).ravel()
        if x.ndim != 2 or len(x) != len(labels) or len(x) == 0:
            raise ValueError(f"X must be (n, d) with n = len(y) >= 1, got X {x.shape} and {len(labels)} labels")
        by_name = dict(getattr(self, "_by_name", {}))
        shots: dict[str, list[int]] = {}
        for i, lab in enumerate(labels):
            if not isinstance(lab, Hashable):
                raise TypeError(f"labels must be hashable, got {type(lab).__name__}")
            name = str(lab)
            if by_name.setdefault(name, lab) != lab:
                raise ValueError(f"labels {by_name[name]!r} and {lab!r} have the same name {name!r}")
            shots.setdefault(name, []).append(i)
        data = {name: x[idx] for name, idx in shots.items()}
        learner = getattr(self, "learner_", None)
        if learner is None:
            learner = CBCLPRLearner(self._first_config(data), self.backbone, feature_dim=x.shape[1])
        learner.teach_increment(data)  # validates everything; raises before changing anything
        self.learner_ = learner
        self._by_name = by_name
        self.classes_ = np.array([by_name[c] for c in learner.classes_])
        return self

    def _first_config(self, data: dict[str, np.ndarray]) -> LearnerConfig:
        cfg = self.config if self.config is not None else LearnerConfig()
        if self.d_scale != 1.0 and cfg.distance_threshold is None:
            # D lives in the space the learner stores vectors in (after its feature transform), and is
            # estimated as the learner estimates it (with its backbone's prior), then scaled
            transform = FeatureTransform.named(cfg.transform, cfg.transform_power)
            checked = {c: transform(check_features(v, None, name=f"features of {c!r}")) for c, v in data.items()}
            prior = cfg.distance_prior
            if prior is None:
                prior = distance_prior(self.backbone, transform.power, transform.l2)
            d = estimate_distance_threshold(checked, cfg.seed, prior) * float(self.d_scale)
            cfg = dataclasses.replace(cfg, distance_threshold=d)
        return cfg

    # ------------------------------------------------------------------ prediction
    def _fitted(self) -> CBCLPRLearner:
        learner = getattr(self, "learner_", None)
        if learner is None:
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("LearnerClassifier: call fit or partial_fit first")
        return learner

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """(n, len(classes_)) class probabilities from the learner's served head."""
        scores, names = self._fitted().predict_scores_with_classes(X)
        order = [list(names).index(str(c)) for c in self.classes_]
        return scores[:, order]

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The most probable class of each row (the learner's closed-set answer, no open-set gate)."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
