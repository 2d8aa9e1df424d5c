"""Two modern frozen-feature peers: Gaussian prototypes with shrunk Mahalanobis distance (as FeCAM,
Goswami et al. 2023) and streaming LDA (as SLDA, Hayes & Kanan 2020). Both need no rehearsal and
no gradient training, which is what makes them the fair reference for a frozen backbone."""
from __future__ import annotations

import numpy as np

from .base import IncrementalMethod

__all__ = ["MahalanobisPrototypes", "StreamingLDA", "tukey"]


def tukey(x: np.ndarray, power: float) -> np.ndarray:
    """Tukey's ladder-of-powers transform (sign-preserving, so negative features stay valid)."""
    if power == 1.0:
        return x
    return np.sign(x) * np.abs(x) ** power


def _l2(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class MahalanobisPrototypes(IncrementalMethod):
    """One Gaussian per class; predict the class of smallest Mahalanobis distance.

    As FeCAM: Tukey transform (power 0.5) and L2 normalisation of features; per-class covariance shrunk
    towards its mean variance and mean covariance (``S + g1 v1 I + g2 v2 (1 - I)``), then normalised to
    unit diagonal (a correlation matrix) so that classes with large variance do not win by volume.
    Memory is d×d per class (the price of full covariances).
    """

    name = "mahalanobis"

    def __init__(self, power: float = 0.5, gamma1: float = 1.0, gamma2: float = 1.0, seed: int = 0) -> None:
        super().__init__(seed)
        if power <= 0:
            raise ValueError(f"power must be > 0, got {power}")
        self.power, self.gamma1, self.gamma2 = power, gamma1, gamma2
        self.means_: dict[int, np.ndarray] = {}
        self.precisions_: dict[int, np.ndarray] = {}
        self.counts_: dict[int, int] = {}
        self.scatter_: dict[int, np.ndarray] = {}

    def _prep(self, x: np.ndarray) -> np.ndarray:
        return _l2(tukey(x.astype(np.float64), self.power))

    def _precision(self, c: int) -> np.ndarray:
        n = self.counts_[c]
        d = self.means_[c].shape[0]
        cov = self.scatter_[c] / max(n - 1, 1)
        v1 = float(np.mean(np.diag(cov)))
        off = cov.sum() - np.trace(cov)
        v2 = float(off / (d * d - d)) if d > 1 else 0.0
        shrunk = cov + self.gamma1 * v1 * np.eye(d) + self.gamma2 * v2 * (1.0 - np.eye(d))
        sd = np.sqrt(np.maximum(np.diag(shrunk), 1e-12))
        corr = shrunk / np.outer(sd, sd)
        return np.linalg.inv(corr).astype(np.float32)

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        for c, x in feats.items():
            z = self._prep(x)
            m = z.mean(axis=0)
            s = (z - m).T @ (z - m)
            if c in self.counts_:  # more shots of a known class: pooled statistics
                n0, m0 = self.counts_[c], self.means_[c].astype(np.float64)
                n = n0 + len(z)
                s = self.scatter_[c] + s + np.outer(m - m0, m - m0) * n0 * len(z) / n
                m = (n0 * m0 + len(z) * m) / n
                self.counts_[c] = n
            else:
                self.counts_[c] = len(z)
            self.means_[c], self.scatter_[c] = m.astype(np.float32), s
            self.precisions_[c] = self._precision(c)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        z = self._prep(x).astype(np.float32)
        dist = np.empty((len(z), len(self.classes_)), np.float32)
        for j, c in enumerate(self.classes_):
            dev = z - self.means_[c]
            dist[:, j] = np.einsum("ij,ij->i", dev @ self.precisions_[c], dev)
        return np.asarray(self.classes_)[np.argmin(dist, axis=1)]

    def memory_bytes(self) -> int:
        # kept between increments: mean and precision per class (the scatter is rebuilt-free bookkeeping
        # for later shots; a deployment would keep either it or the precision, so count one d×d).
        return int(sum(self.means_[c].nbytes + self.precisions_[c].nbytes for c in self.means_))


class StreamingLDA(IncrementalMethod):
    """Streaming LDA: running class means and one shared covariance, classified with a shrunk inverse.

    The shared covariance equals Hayes & Kanan's per-sample streaming update exactly (its increments sum
    to the within-class scatter divided by the number of samples seen), so a whole increment is added at
    once with the pooled-scatter formula. Shrinkage ``epsilon`` = 1e-4 as in their paper.
    """

    name = "slda"

    def __init__(self, epsilon: float = 1e-4, seed: int = 0) -> None:
        super().__init__(seed)
        if not 0 < epsilon < 1:
            raise ValueError(f"epsilon must be in (0, 1), got {epsilon}")
        self.epsilon = epsilon
        self.means_: dict[int, np.ndarray] = {}
        self.counts_: dict[int, int] = {}
        self.scatter_: np.ndarray | None = None
        self.n_seen_ = 0
        self._w: np.ndarray | None = None
        self._b: np.ndarray | None = None

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        d = next(iter(feats.values())).shape[1]
        if self.scatter_ is None:
            self.scatter_ = np.zeros((d, d))
        for c, x in feats.items():
            x = x.astype(np.float64)
            m = x.mean(axis=0)
            s = (x - m).T @ (x - m)
            if c in self.counts_:
                n0, m0 = self.counts_[c], self.means_[c]
                n = n0 + len(x)
                s = s + np.outer(m - m0, m - m0) * n0 * len(x) / n
                m = (n0 * m0 + len(x) * m) / n
            self.scatter_ += s
            self.counts_[c] = self.counts_.get(c, 0) + len(x)
            self.means_[c] = m
            self.n_seen_ += len(x)
        cov = self.scatter_ / self.n_seen_
        prec = np.linalg.inv((1 - self.epsilon) * cov + self.epsilon * np.eye(d))
        classes = list(self.means_)
        mu = np.stack([self.means_[c] for c in classes])
        self._w = (prec @ mu.T).astype(np.float32)
        self._b = (-0.5 * np.einsum("ij,ij->i", mu @ prec, mu)).astype(np.float32)
        self._order = np.asarray(classes)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self._order[np.argmax(x @ self._w + self._b, axis=1)]

    def memory_bytes(self) -> int:
        d = self.scatter_.shape[0]
        return int(4 * (d * d + len(self.means_) * (d + 1)))
