"""The strongest simple peers: classifiers retrained jointly on *all* shots seen so far.

They store every vector (so they are batch references, not continual learners, like FLB), and they are
what a practitioner would try first on frozen features: a multinomial logistic regression trained to
convergence, and a linear discriminant with one pooled covariance shrunk by Ledoit-Wolf.
"""
from __future__ import annotations

import numpy as np

from .base import IncrementalMethod
from .peers import spd_solve

__all__ = ["JointLogisticRegression", "PooledLDA"]


class _AllShots(IncrementalMethod):
    """Keeps every vector taught, per class, and refits on all of them after each increment."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.data_: dict[int, np.ndarray] = {}

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        data = dict(self.data_)
        for c, x in feats.items():
            data[c] = np.vstack([data[c], x]) if c in data else x.copy()
        self._refit(data)  # may raise: data_ is replaced only afterwards
        self.data_ = data

    def _stacked(self, data: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        order = np.array(list(data), dtype=np.int64)
        x = np.vstack([data[c] for c in order]).astype(np.float64)
        y = np.concatenate([np.full(len(data[c]), j) for j, c in enumerate(order)])
        return order, x, y

    def _refit(self, data: dict[int, np.ndarray]) -> None:
        raise NotImplementedError

    def memory_bytes(self) -> int:
        return int(sum(v.nbytes for v in self.data_.values()))


class JointLogisticRegression(_AllShots):
    """Multinomial logistic regression (L2, ``C`` = 1, L-BFGS to convergence) on all shots so far.

    scikit-learn's estimator; features as given (no scaling: the backbone's features share one scale).
    One class alone cannot be fitted: the first increment always brings at least two in our protocols,
    and a lone class is predicted for everything until a second arrives.
    """

    name = "logreg"

    def __init__(self, C: float = 1.0, max_iter: int = 1000, seed: int = 0) -> None:
        super().__init__(seed)
        if not C > 0 or max_iter < 1:
            raise ValueError(f"need C > 0 and max_iter >= 1, got C={C}, max_iter={max_iter}")
        self.C, self.max_iter = C, max_iter

    def _refit(self, data: dict[int, np.ndarray]) -> None:
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        order, x, y = self._stacked(data)
        if len(order) == 1:
            self._order, self._model = order, None
            return
        model = LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warnings.filterwarnings("ignore", message="The number of unique classes")  # one shot per class
            model.fit(x, y)
        self._order, self._model = order, model

    def _predict(self, x: np.ndarray) -> np.ndarray:
        if self._model is None:
            return np.full(len(x), self._order[0], dtype=np.int64)
        return self._order[self._model.predict(x.astype(np.float64))]

    def memory_bytes(self) -> int:
        coef = 0 if self._model is None else self._model.coef_.nbytes + self._model.intercept_.nbytes
        return super().memory_bytes() + int(coef)


def _shrunk_solve(c: np.ndarray, a: float, b: float, rhs: np.ndarray) -> np.ndarray:
    """``(a C^T C + b I)^-1 rhs`` for ``b > 0``: ``(rhs - C^T (b/a I + C C^T)^-1 C rhs) / b`` (Woodbury)."""
    if a <= 0:
        return rhs / b
    gram = c @ c.T
    gram[np.diag_indices_from(gram)] += b / a
    return (rhs - c.T @ spd_solve(gram, c @ rhs)) / b


class PooledLDA(_AllShots):
    """Linear discriminant analysis with one pooled within-class covariance (Ledoit-Wolf shrinkage
    towards a scaled identity, intensity estimated from the centred shots), equal class priors.

    With one shot per class there is no within-class spread; the covariance is then the identity
    (nearest class mean), which is what the shrinkage tends to as the spread vanishes.
    """

    name = "lda"

    def _refit(self, data: dict[int, np.ndarray]) -> None:
        from sklearn.covariance import ledoit_wolf_shrinkage

        order, x, y = self._stacked(data)
        mu = np.stack([x[y == j].mean(axis=0) for j in range(len(order))])
        centred = x - mu[y]
        n, d = centred.shape
        trace = float(np.einsum("ij,ij->", centred, centred)) / n
        if len(x) > len(order) and trace > 0:
            # Ledoit-Wolf: (1 - a) S + a tr(S)/d I with S = C^T C / n; solved by the Woodbury identity
            # (n x n instead of d x d), the same as scikit-learn's LedoitWolf covariance solved densely
            a = float(ledoit_wolf_shrinkage(centred, assume_centered=True))
            w = _shrunk_solve(centred, (1 - a) / n, a * trace / d, mu.T)
        else:
            w = mu.T.copy()  # identity covariance
        self._order = order
        self._w = w.astype(np.float32)
        self._b = (-0.5 * np.einsum("ij,ji->i", mu, w)).astype(np.float32)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self._order[np.argmax(x @ self._w + self._b, axis=1)]

    def memory_bytes(self) -> int:
        return super().memory_bytes() + int(self._w.nbytes + self._b.nbytes)
