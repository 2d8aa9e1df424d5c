"""Two modern frozen-feature peers, written from their papers' definitions: FeCAM (Goswami et al.,
NeurIPS 2023) and streaming LDA (SLDA, Hayes & Kanan, CVPR-W 2020). Neither needs rehearsal or
gradient training, which makes them the fair reference for a frozen backbone. Both work from one shot
per class (the choices that one shot forces are documented in docs/evaluation.md)."""
from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from .base import IncrementalMethod

__all__ = ["FeCAM", "StreamingLDA", "tukey", "spd_inverse"]


def tukey(x: np.ndarray, power: float) -> np.ndarray:
    """Tukey's ladder-of-powers transform ``x ** power`` (``log x`` at power 0), sign-preserving so that
    negative features stay defined (backbone features after ReLU are >= 0 and see the plain power)."""
    if power == 1.0:
        return x
    if power == 0.0:
        return np.sign(x) * np.log1p(np.abs(x))
    return np.sign(x) * np.abs(x) ** power


def _l2(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def spd_inverse(a: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive (semi-)definite matrix: Cholesky, or the pseudo-inverse if it is
    singular (FeCAM inverts with a pseudo-inverse too), so no peer dies on a rank-deficient estimate."""
    try:
        return cho_solve(cho_factor(a, lower=True, check_finite=False), np.eye(len(a)), check_finite=False)
    except (LinAlgError, ValueError):
        return np.linalg.pinv(a, hermitian=True)


class FeCAM(IncrementalMethod):
    """FeCAM: one Gaussian per class on power-transformed features; the class of smallest Mahalanobis
    distance wins.

    As in the paper: features go through Tukey's transform (power 0.5); each class keeps the mean and
    covariance of its transformed features; the covariance is shrunk, ``S + g1 v1 I + g2 v2 (1 - I)``
    with ``v1`` the mean variance and ``v2`` the mean covariance (``g1 = g2 = 1``), then normalised to
    unit diagonal (a correlation matrix) so classes of larger spread do not win by volume; the distance
    is taken between the L2-normalised transformed vector and the L2-normalised class mean.
    Our choice where the paper is silent: a class with one vector has no covariance (its shrunk estimate
    is 0/0 after normalisation), so it gets the identity, i.e. FeCAM's own Euclidean fallback.
    Memory is a mean and a d×d precision per class.
    """

    name = "fecam"

    def __init__(self, power: float = 0.5, gamma1: float = 1.0, gamma2: float = 1.0, seed: int = 0) -> None:
        super().__init__(seed)
        if power < 0:
            raise ValueError(f"power must be >= 0, got {power}")
        if gamma1 < 0 or gamma2 < 0:
            raise ValueError(f"gamma1 and gamma2 must be >= 0, got {gamma1}, {gamma2}")
        self.power, self.gamma1, self.gamma2 = power, gamma1, gamma2
        self.counts_: dict[int, int] = {}
        self.sums_: dict[int, np.ndarray] = {}  # running mean and scatter of the transformed features
        self.scatter_: dict[int, np.ndarray] = {}
        self.means_: dict[int, np.ndarray] = {}  # L2-normalised class means, used for distances
        self.precisions_: dict[int, np.ndarray | None] = {}  # None: identity

    def _precision(self, c: int) -> np.ndarray | None:
        n = self.counts_[c]
        if n < 2:
            return None
        d = self.scatter_[c].shape[0]
        cov = self.scatter_[c] / (n - 1)
        v1 = float(np.mean(np.diag(cov)))
        if v1 <= 0:  # identical shots: no spread either
            return None
        v2 = float((cov.sum() - np.trace(cov)) / (d * d - d)) if d > 1 else 0.0
        shrunk = cov + self.gamma1 * v1 * np.eye(d) + self.gamma2 * v2 * (1.0 - np.eye(d))
        sd = np.sqrt(np.maximum(np.diag(shrunk), 1e-300))
        return spd_inverse(shrunk / np.outer(sd, sd)).astype(np.float32)

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        for c, x in feats.items():
            z = tukey(x.astype(np.float64), self.power)
            n1, m1 = len(z), z.mean(axis=0)
            s1 = (z - m1).T @ (z - m1)
            if c in self.counts_:  # more shots of a known class: exact pooled statistics
                n0, m0 = self.counts_[c], self.sums_[c]
                n = n0 + n1
                s1 = self.scatter_[c] + s1 + np.outer(m1 - m0, m1 - m0) * n0 * n1 / n
                m1 = (n0 * m0 + n1 * m1) / n
                n1 = n
            self.counts_[c], self.sums_[c], self.scatter_[c] = n1, m1, s1
            self.means_[c] = _l2(m1).astype(np.float32)
            self.precisions_[c] = self._precision(c)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        z = _l2(tukey(x.astype(np.float64), self.power)).astype(np.float32)
        dist = np.empty((len(z), len(self.classes_)), np.float32)
        for j, c in enumerate(self.classes_):
            dev = z - self.means_[c]
            p = self.precisions_[c]
            dist[:, j] = np.einsum("ij,ij->i", dev if p is None else dev @ p, dev)
        return np.asarray(self.classes_)[np.argmin(dist, axis=1)]

    def memory_bytes(self) -> int:
        # what classification needs: a mean and a precision per class (the scatter is kept only so that
        # later shots of a class can be pooled exactly; a deployment keeps it instead of the precision)
        d = self.feature_dim_ or 0
        return int(sum(4 * d + (4 * d * d if self.precisions_[c] is not None else 0) for c in self.means_))


class StreamingLDA(IncrementalMethod):
    """SLDA as Hayes & Kanan define it: a running mean per class and one shared covariance updated
    sample by sample, classified through the shrunk precision matrix.

    For each arriving vector ``x`` of class ``y`` (``t`` = vectors seen before it, ``mu_y`` = the class's
    mean before it, zero for a class not seen yet, as in their initialisation):
    ``Sigma <- (t Sigma + t/(t+1) (x - mu_y)(x - mu_y)^T) / (t + 1)``, then
    ``mu_y <- mu_y + (x - mu_y) / (c_y + 1)``, ``c_y <- c_y + 1``. Prediction:
    ``Lambda = ((1 - eps) Sigma + eps I)^-1`` with ``eps = 1e-4``, scores ``x Lambda mu_k - mu_k Lambda mu_k / 2``.
    An increment is streamed in arrival order (class by class, shots in the given order); the per-sample
    recursion is evaluated in one pass (``T Sigma_T`` is the weighted sum of the per-sample outer
    products), which equals the loop exactly and is tested against it.
    """

    name = "slda"

    def __init__(self, epsilon: float = 1e-4, seed: int = 0) -> None:
        super().__init__(seed)
        if not 0 < epsilon < 1:
            raise ValueError(f"epsilon must be in (0, 1), got {epsilon}")
        self.epsilon = epsilon
        self.means_: dict[int, np.ndarray] = {}
        self.counts_: dict[int, int] = {}
        self.outer_sum_: np.ndarray | None = None  # T * Sigma_T
        self.n_seen_ = 0
        self._w: np.ndarray | None = None
        self._b: np.ndarray | None = None

    @property
    def covariance_(self) -> np.ndarray:
        """The shared streaming covariance ``Sigma_T``."""
        return self.outer_sum_ / max(self.n_seen_, 1)

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        d = next(iter(feats.values())).shape[1]
        outer = np.zeros((d, d)) if self.outer_sum_ is None else self.outer_sum_.copy()
        means, counts, t0 = dict(self.means_), dict(self.counts_), self.n_seen_
        for c, x in feats.items():
            x = x.astype(np.float64)
            c0 = counts.get(c, 0)
            mu0 = means.get(c, np.zeros(d))
            # class mean before each of the m vectors: (c0 mu0 + sum of the earlier ones) / (c0 + j), 0 if none
            before_sum = c0 * mu0 + np.vstack([np.zeros(d), np.cumsum(x[:-1], axis=0)])
            k = c0 + np.arange(len(x))
            mu_before = np.where(k[:, None] > 0, before_sum / np.maximum(k, 1)[:, None], 0.0)
            v = x - mu_before
            t = t0 + np.arange(len(x))
            outer += (v * (t / (t + 1.0))[:, None]).T @ v
            means[c] = (c0 * mu0 + x.sum(axis=0)) / (c0 + len(x))
            counts[c] = c0 + len(x)
            t0 += len(x)
        self.outer_sum_, self.means_, self.counts_, self.n_seen_ = outer, means, counts, t0
        prec = spd_inverse((1 - self.epsilon) * self.covariance_ + self.epsilon * np.eye(d))
        self._order = np.asarray(list(means))
        mu = np.stack([means[c] for c in self._order])
        self._w = (prec @ mu.T).astype(np.float32)
        self._b = (-0.5 * np.einsum("ij,ij->i", mu @ prec, mu)).astype(np.float32)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self._order[np.argmax(x @ self._w + self._b, axis=1)]

    def memory_bytes(self) -> int:
        d = self.outer_sum_.shape[0]
        return int(4 * (d * d + len(self.means_) * (d + 1)))
