"""Two modern frozen-feature peers, written from their papers' definitions: FeCAM (Goswami et al.,
NeurIPS 2023) and streaming LDA (SLDA, Hayes & Kanan, CVPR-W 2020). Neither needs rehearsal or
gradient training, which makes them the fair reference for a frozen backbone. Both work from one shot
per class (the choices that one shot forces are documented in docs/evaluation.md)."""
from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from .base import IncrementalMethod

__all__ = ["FeCAM", "StreamingLDA", "tukey", "spd_solve"]


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


def spd_solve(a: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``a^-1 rhs`` for a symmetric positive (semi-)definite ``a`` (Cholesky; least squares if singular):
    a linear head needs only its class columns, not the whole inverse (a third of the work)."""
    try:
        return cho_solve(cho_factor(a, lower=True, check_finite=False), rhs, check_finite=False)
    except (LinAlgError, ValueError):
        return np.linalg.lstsq(a, rhs, rcond=None)[0]


class _LowRankMahalanobis:
    """``y^T M^-1 y`` for ``M = c I + U G U^T`` (``G`` diagonal of +-1) by the Woodbury identity:
    O(d r) per vector instead of O(d^2), and no d x d inverse at all (r = shots + 1 << d)."""

    def __init__(self, c: float, u: np.ndarray, g: np.ndarray) -> None:
        self.c, self.u = c, u.astype(np.float32)
        k = np.diag(g) + (u.T @ u) / c  # G^-1 = G for a diagonal of +-1
        self.k_inv = np.linalg.pinv(k).astype(np.float32)

    def __call__(self, y: np.ndarray) -> np.ndarray:
        uy = y @ self.u
        return np.einsum("ij,ij->i", y, y) / self.c - np.einsum("ij,ij->i", uy @ self.k_inv, uy) / self.c ** 2


class FeCAM(IncrementalMethod):
    """FeCAM: one Gaussian per class on power-transformed features; the class of smallest Mahalanobis
    distance wins.

    As in the paper: features go through Tukey's transform (power 0.5); each class keeps the mean and
    covariance of its transformed features; the covariance is shrunk, ``S + g1 v1 I + g2 v2 (1 - I)``
    with ``v1`` the mean variance and ``v2`` the mean covariance (``g1 = g2 = 1``), then normalised to
    unit diagonal (a correlation matrix) so classes of larger spread do not win by volume; the distance
    is taken between the L2-normalised transformed vector and the L2-normalised class mean.
    Our choices where the paper is silent: a class with one vector has no covariance (its shrunk
    estimate is 0/0 after normalisation), so it gets the identity, i.e. FeCAM's own Euclidean fallback.
    The shrunk covariance is identity plus a low-rank term, so it is kept as the class's transformed
    shots and inverted by the Woodbury identity (the same distances as the dense inverse, tested, at a
    fraction of the cost while shots << d).
    """

    name = "fecam"

    def __init__(self, power: float = 0.5, gamma1: float = 1.0, gamma2: float = 1.0, seed: int = 0) -> None:
        super().__init__(seed)
        if power < 0:
            raise ValueError(f"power must be >= 0, got {power}")
        if gamma1 < 0 or gamma2 < 0:
            raise ValueError(f"gamma1 and gamma2 must be >= 0, got {gamma1}, {gamma2}")
        self.power, self.gamma1, self.gamma2 = power, gamma1, gamma2
        self.means_: dict[int, np.ndarray] = {}  # L2-normalised class means, used for distances
        self.shots_: dict[int, np.ndarray] = {}  # transformed shots (the covariance's low-rank factor)
        self.metrics_: dict[int, tuple | None] = {}  # None: identity

    def _metric(self, c: int, z: np.ndarray) -> tuple[np.ndarray, _LowRankMahalanobis] | None:
        """The class's normalised shrunk covariance as (scale, low-rank inverse): ``corr = D^-1/2 M D^-1/2``
        with ``M = S + g1 v1 I + g2 v2 (1 - I) = c I + U G U^T``, so that ``dev^T corr^-1 dev`` is
        ``y^T M^-1 y`` with ``y = sqrt(D) dev``. None: no spread (identity)."""
        n = len(z)
        if n < 2:
            return None
        d = z.shape[1]
        zc = (z - z.mean(axis=0)) / np.sqrt(n - 1)  # S = zc^T zc
        diag_s = np.einsum("ij,ij->j", zc, zc)
        v1 = float(diag_s.mean())
        if v1 <= 0:  # identical shots: no spread either
            return None
        rows = zc.sum(axis=1)  # 1^T S 1 = |zc 1|^2
        v2 = float((rows @ rows - diag_s.sum()) / (d * d - d)) if d > 1 else 0.0  # mean off-diagonal of S
        c0 = self.gamma1 * v1 - self.gamma2 * v2
        if c0 <= 0:  # cannot happen for a covariance (|mean covariance| < mean variance); stay safe
            return None
        u = np.hstack([zc.T, np.full((d, 1), np.sqrt(abs(self.gamma2 * v2)))])
        g = np.ones(n + 1)
        g[-1] = 1.0 if v2 >= 0 else -1.0
        scale = np.sqrt(diag_s + self.gamma1 * v1).astype(np.float32)  # sqrt(diag(M))
        return scale, _LowRankMahalanobis(c0, u, g)

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        for c, x in feats.items():
            z = tukey(x.astype(np.float64), self.power)
            if c in self.shots_:  # more shots of a known class: statistics of all of them
                z = np.vstack([self.shots_[c], z])
            self.shots_[c] = z
            self.means_[c] = _l2(z.mean(axis=0)).astype(np.float32)
            self.metrics_[c] = self._metric(c, z)

    def distances(self, x: np.ndarray) -> np.ndarray:
        """(n, classes) squared Mahalanobis distances as FeCAM defines them."""
        z = _l2(tukey(np.asarray(x, np.float64), self.power)).astype(np.float32)
        dist = np.empty((len(z), len(self.classes_)), np.float32)
        for j, c in enumerate(self.classes_):
            dev = z - self.means_[c]
            metric = self.metrics_[c]
            dist[:, j] = np.einsum("ij,ij->i", dev, dev) if metric is None else metric[1](dev * metric[0])
        return dist

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.classes_)[np.argmin(self.distances(x), axis=1)]

    def memory_bytes(self) -> int:
        # what classification needs: per class a mean and its covariance, held as the (shots x d) factor
        # of the transformed shots (less than a d x d matrix while shots < d; one-shot classes: the mean)
        d = self.feature_dim_ or 0
        return int(sum(4 * d + (4 * self.shots_[c].size if self.metrics_[c] is not None else 0)
                       for c in self.means_))


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
        self._order = np.asarray(list(means))
        mu = np.stack([means[c] for c in self._order])
        w = spd_solve((1 - self.epsilon) * self.covariance_ + self.epsilon * np.eye(d), mu.T)  # Lambda mu^T
        self._w = w.astype(np.float32)
        self._b = (-0.5 * np.einsum("ij,ji->i", mu, w)).astype(np.float32)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self._order[np.argmax(x @ self._w + self._b, axis=1)]

    def memory_bytes(self) -> int:
        d = self.outer_sum_.shape[0]
        return int(4 * (d * d + len(self.means_) * (d + 1)))
