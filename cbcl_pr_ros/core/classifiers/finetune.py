"""Naive fine-tuning: a growing linear head trained only on the newest classes' real features.

The lower bound of class-incremental learning (no memory of old classes, no rehearsal): each
increment adds output rows for the new classes and trains the whole head on the new data with the
paper's SGD settings, so the old classes are forgotten catastrophically.  Used by the end-to-end
test and by the evaluation tool as a baseline.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> ft = NaiveFineTuneHead(4, epochs=5, seed=0)
>>> ft = ft.partial_fit({"a": rng.normal(0, 1, (20, 4)), "b": rng.normal(5, 1, (20, 4))})
>>> ft.classes_, ft.predict(np.full((1, 4), 5.0))
(('a', 'b'), ['b'])
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from ..validation import check_features, check_label
from .base import softmax
from .sgd import SGDSchedule, train_linear

__all__ = ["NaiveFineTuneHead"]


class NaiveFineTuneHead:
    """Fine-tune one linear head on each increment's new classes only (catastrophic forgetting)."""

    def __init__(self, feature_dim: int, epochs: int = 25, lr: float = 0.01, momentum: float = 0.9,
                 weight_decay: float = 5e-4, batch_size: int = 64, seed: int = 0) -> None:
        self.feature_dim = feature_dim
        self.epochs = epochs
        self.lr = lr
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.seed = seed
        self.classes_: tuple[str, ...] = ()
        self._layer: torch.nn.Linear | None = None
        self._calls = 0

    def partial_fit(self, shots: Mapping[str, np.ndarray]) -> "NaiveFineTuneHead":
        data = {check_label(c): check_features(x, self.feature_dim, name=f"features of {c!r}")
                for c, x in shots.items()}
        if not data:
            raise ValueError("shots is empty: nothing to train on")
        classes = self.classes_ + tuple(c for c in data if c not in self.classes_)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(self.seed + self._calls)
            layer = torch.nn.Linear(self.feature_dim, len(classes))
            torch.nn.init.kaiming_uniform_(layer.weight, a=5 ** 0.5)
            torch.nn.init.zeros_(layer.bias)
            if self._layer is not None:
                layer.weight[: len(self.classes_)] = self._layer.weight
                layer.bias[: len(self.classes_)] = self._layer.bias
        x = np.concatenate([data[c] for c in data])
        y = np.concatenate([np.full(len(data[c]), classes.index(c)) for c in data])
        sched = SGDSchedule(self.epochs, 0, self.lr, self.momentum, self.weight_decay, self.batch_size)
        self._layer = train_linear(x, y, len(classes), sched, self.epochs, self.seed + self._calls, init=layer)
        self.classes_ = classes
        self._calls += 1
        return self

    def predict_scores(self, features: np.ndarray) -> np.ndarray:
        x = check_features(features, self.feature_dim)
        if self._layer is None:
            return np.zeros((len(x), 0))
        with torch.no_grad():
            logits = self._layer(torch.from_numpy(x.astype(np.float32))).numpy().astype(np.float64)
        return softmax(logits)

    def predict(self, features: np.ndarray) -> list[str]:
        s = self.predict_scores(features)
        return [self.classes_[i] for i in s.argmax(axis=1)] if s.shape[1] else [""] * len(s)
