"""Agg-Var clustering and the exact Gaussian statistics of one class's clusters.

Agg-Var (paper, Algorithm 1): one pass over a class's vectors in order; a vector joins the nearest
centroid of its class when that centroid is at Euclidean distance strictly ``< D`` (the centroid
moves to the count-weighted mean ``(n c + x) / (n + 1)``), otherwise it starts a new cluster.
Teaching more shots of a known class later continues the same pass from the stored centroids.

Covariance representation (a choice of this project): each cluster keeps its count ``n``, its mean
and its *scatter* ``S = sum (x - mean)(x - mean)^T`` (covariance ``S / (n - 1)`` as ``np.cov``).

* ``"full"`` mode stores ``S`` as a low-rank factor ``L`` (``d x r``) with ``S = L L^T``.  A scatter
  of ``n`` vectors has rank ``r <= n - 1``, so a 10-shot cluster at d = 1280 costs 9 columns instead
  of 1280 x 1280 floats, and it stays *exact* when the cluster is extended or merged (pooled scatter:
  ``S = S_a + S_b + n_a n_b / n (m_a - m_b)(m_a - m_b)^T`` is a concatenation of columns).  The
  factor is re-compressed by SVD when it has more columns than ``d``.
* ``"diagonal"`` mode stores only ``diag(S)`` (the paper's CBCL-PR_D), updated with the same formula.

Storage precision: the arrays are float32, or float16 when :meth:`ClassClusters.compacted`
finds that a class survives the round trip (every value finite, means and each scatter within
:data:`HALF_TOLERANCE` relative Frobenius error).  A full-mode cluster of ``n`` shots holds a mean and
``n - 1`` factor columns, i.e. exactly its ``n`` raw vectors; float16 halves that.  Every computation
reads the arrays through ``astype(float64)``, and every update (extend, merge, subset) works in
float64 and returns float32 arrays, which the memory compacts again (:mod:`.memory`).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = np.vstack([rng.normal(0, 0.1, (5, 3)), rng.normal(5, 0.1, (5, 3))])
>>> cc = ClassClusters.empty(3, "full").extend(x, distance_threshold=1.0)
>>> cc.counts.tolist()
[5, 5]
>>> bool(np.allclose(cc.covariance(0), np.cov(x[:5].T)))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["AggVarResult", "ClassClusters", "agg_var", "COVARIANCE_MODES", "STORAGE_DTYPES", "HALF_TOLERANCE"]

COVARIANCE_MODES = ("full", "diagonal")
STORAGE_DTYPES = ("float32", "float16")
# float16 keeps 11 significant bits (relative rounding error <= 2**-11 = 4.9e-4 per value); a class
# whose means or scatters lose more than this (values in float16's subnormal range, or beyond
# its range) stays float32
HALF_TOLERANCE = 1e-3


@dataclass(frozen=True)
class AggVarResult:
    """Outcome of one Agg-Var pass.

    ``centroids``/``counts`` are the clusters after the pass (old ones first, in order);
    ``assignment[i]`` is the cluster of vector ``i``; ``distance[i]`` its distance to that cluster's
    centroid *at assignment time* (0 for a vector that opened a cluster).
    """

    centroids: np.ndarray
    counts: np.ndarray
    assignment: np.ndarray
    distance: np.ndarray


def agg_var(
    features: np.ndarray,
    distance_threshold: float,
    centroids: np.ndarray | None = None,
    counts: np.ndarray | None = None,
) -> AggVarResult:
    """One Agg-Var pass over ``features`` (n, d), continuing from optional existing clusters.

    >>> r = agg_var(np.array([[0.0], [0.5], [3.0]]), 1.0)
    >>> r.counts.tolist(), r.centroids.ravel().tolist()
    ([2, 1], [0.25, 3.0])
    """
    x = np.asarray(features, dtype=np.float64)
    d = x.shape[1]
    if not distance_threshold > 0:
        raise ValueError(f"distance_threshold must be > 0, got {distance_threshold!r}")
    k0 = 0 if centroids is None else len(centroids)
    cap = k0 + len(x)
    cent = np.empty((cap, d), dtype=np.float64)
    cnt = np.zeros(cap, dtype=np.int64)
    if k0:
        cent[:k0] = centroids
        cnt[:k0] = counts
    k = k0
    assign = np.empty(len(x), dtype=np.int64)
    dist_at = np.zeros(len(x), dtype=np.float64)
    for i, v in enumerate(x):
        if k:
            dist = np.sqrt(np.einsum("ij,ij->i", cent[:k] - v, cent[:k] - v))
            j = int(np.argmin(dist))
            if dist[j] < distance_threshold:
                cent[j] = (cnt[j] * cent[j] + v) / (cnt[j] + 1)
                cnt[j] += 1
                assign[i] = j
                dist_at[i] = dist[j]
                continue
        cent[k] = v
        cnt[k] = 1
        assign[i] = k
        k += 1
    return AggVarResult(cent[:k].copy(), cnt[:k].copy(), assign, dist_at)


def _compress(factor: np.ndarray, max_rank: int) -> np.ndarray:
    """Smallest exact factor of ``factor @ factor.T`` (drops numerically null directions)."""
    if factor.shape[1] == 0:
        return factor
    u, s, _ = np.linalg.svd(factor, full_matrices=False)
    tol = s[0] * max(factor.shape) * np.finfo(np.float64).eps if s.size else 0.0
    r = min(int(np.count_nonzero(s > tol)), max_rank)
    return u[:, :r] * s[:r]


def _scatter_factor(x: np.ndarray) -> np.ndarray:
    """Factor (d, <= n-1) of the scatter of the rows of ``x`` about their mean."""
    dev = x - x.mean(axis=0)
    if len(x) < 2:
        return np.zeros((x.shape[1], 0))
    return _compress(dev.T, len(x) - 1)


@dataclass(frozen=True)
class ClassClusters:
    """The Gaussian clusters of one class: counts, means and scatters (see module docstring).

    Instances are immutable; every update returns a new object, so a learner can build its next
    memory while predictions keep using the current one.
    """

    counts: np.ndarray  # (k,) int64
    means: np.ndarray  # (k, d) float32 or float16
    mode: str
    factors: tuple[np.ndarray, ...] = ()  # full mode: k arrays (d, r_i), the means' dtype
    diag: np.ndarray | None = None  # diagonal mode: (k, d), the means' dtype = diag of the scatter

    def __post_init__(self) -> None:
        for arr in (self.counts, self.means, self.diag, *self.factors):
            if arr is not None:
                arr.setflags(write=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(cls, feature_dim: int, mode: str) -> "ClassClusters":
        if mode not in COVARIANCE_MODES:
            raise ValueError(f"covariance mode must be one of {COVARIANCE_MODES}, got {mode!r}")
        diag = np.zeros((0, feature_dim), np.float32) if mode == "diagonal" else None
        return cls(np.zeros(0, np.int64), np.zeros((0, feature_dim), np.float32), mode, (), diag)

    @classmethod
    def from_stats(
        cls, counts: np.ndarray, means: np.ndarray, mode: str, scatters: list[np.ndarray]
    ) -> "ClassClusters":
        """Build from per-cluster float64 stats; ``scatters[i]`` is a factor (full) or a diagonal."""
        counts = np.asarray(counts, np.int64)
        means32 = np.asarray(means, np.float32).reshape(len(counts), -1)
        if mode == "full":
            return cls(counts, means32, mode, tuple(np.asarray(f, np.float32) for f in scatters), None)
        diag = np.asarray(scatters, np.float32).reshape(len(counts), means32.shape[1])
        return cls(counts, means32, mode, (), diag)

    # ------------------------------------------------------------------ properties
    @property
    def n_clusters(self) -> int:
        return int(self.counts.shape[0])

    @property
    def feature_dim(self) -> int:
        return int(self.means.shape[1])

    @property
    def n_samples(self) -> int:
        return int(self.counts.sum())

    @property
    def storage(self) -> str:
        """``"float32"`` or ``"float16"``: the dtype of the stored means and scatters."""
        return str(self.means.dtype)

    def compacted(self, tolerance: float = HALF_TOLERANCE) -> "ClassClusters":
        """This class in float16 when that loses at most ``tolerance`` (relative Frobenius error
        of the means and of each scatter, all values finite); otherwise itself unchanged."""
        if self.storage == "float16":
            return self

        def close(a: np.ndarray) -> bool:
            a64 = np.asarray(a, np.float64)
            h = a64.astype(np.float16)
            if not np.all(np.isfinite(h)):
                return False
            norm = np.linalg.norm(a64)
            return bool(np.linalg.norm(h.astype(np.float64) - a64) <= tolerance * norm) if norm > 0 else True

        parts = [self.means, *self.factors] + ([] if self.diag is None else list(self.diag))
        with np.errstate(over="ignore", under="ignore"):
            if not all(close(a) for a in parts):
                return self
            return ClassClusters(self.counts, self.means.astype(np.float16), self.mode,
                                 tuple(f.astype(np.float16) for f in self.factors),
                                 None if self.diag is None else self.diag.astype(np.float16))

    def scatter(self, i: int) -> np.ndarray:
        """Factor (full mode, ``d x r``) or diagonal (diagonal mode, ``d``) of cluster ``i``, float64."""
        if self.mode == "full":
            return self.factors[i].astype(np.float64)
        return self.diag[i].astype(np.float64)

    def covariance(self, i: int) -> np.ndarray:
        """Dense ``d x d`` covariance of cluster ``i`` (``np.cov`` convention; zeros for a singleton)."""
        n = int(self.counts[i])
        if n < 2:
            return np.zeros((self.feature_dim, self.feature_dim))
        s = self.scatter(i)
        dense = s @ s.T if self.mode == "full" else np.diag(s)
        return dense / (n - 1)

    def nbytes(self) -> int:
        """Bytes of the stored arrays, as held in memory and written by persistence (the file adds
        8 bytes per cluster for its owner index, 8 more per cluster for its rank in full mode)."""
        total = self.counts.nbytes + self.means.nbytes
        total += sum(f.nbytes for f in self.factors)
        total += 0 if self.diag is None else self.diag.nbytes
        return int(total)

    # ------------------------------------------------------------------ updates
    def extend(self, features: np.ndarray, distance_threshold: float) -> "ClassClusters":
        """Agg-Var pass of new vectors of this class from the current clusters; exact statistics."""
        x = np.asarray(features, dtype=np.float64)
        old_k = self.n_clusters
        res = agg_var(x, distance_threshold, self.means.astype(np.float64) if old_k else None,
                      self.counts if old_k else None)
        counts, means, scatters = [], [], []
        for j in range(len(res.counts)):
            members = x[res.assignment == j]
            n_b = len(members)
            n_a = int(self.counts[j]) if j < old_k else 0
            m_a = self.means[j].astype(np.float64) if j < old_k else None
            if n_b == 0:
                counts.append(n_a)
                means.append(m_a)
                scatters.append(self.scatter(j))
                continue
            m_b = members.mean(axis=0)
            n = n_a + n_b
            mean = m_b if n_a == 0 else (n_a * m_a + n_b * m_b) / n
            if self.mode == "full":
                parts = [_scatter_factor(members)]
                if n_a:
                    parts += [self.scatter(j), (np.sqrt(n_a * n_b / n) * (m_a - m_b))[:, None]]
                fac = np.concatenate(parts, axis=1)
                if fac.shape[1] > self.feature_dim:
                    fac = _compress(fac, self.feature_dim)
                scatters.append(fac)
            else:
                diag = ((members - m_b) ** 2).sum(axis=0)
                if n_a:
                    diag = diag + self.scatter(j) + n_a * n_b / n * (m_a - m_b) ** 2
                scatters.append(diag)
            counts.append(n)
            means.append(mean)
        return ClassClusters.from_stats(np.array(counts), np.array(means), self.mode, scatters)

    def merged(self, groups: list[np.ndarray]) -> "ClassClusters":
        """Merge each group of cluster indices into one cluster with the exact pooled statistics.

        The merged mean is the count-weighted mean and the scatter is the scatter of the union of
        the members (within-cluster scatters plus the spread of the means), so a merged cluster is
        what Agg-Var would have stored had those vectors formed one cluster.
        """
        counts, means, scatters = [], [], []
        for g in groups:
            g = np.asarray(g, dtype=np.int64)
            n_g = self.counts[g].astype(np.float64)
            mu_g = self.means[g].astype(np.float64)
            n = n_g.sum()
            mean = (n_g[:, None] * mu_g).sum(axis=0) / n
            dev = mu_g - mean
            if self.mode == "full":
                parts = [self.scatter(int(i)) for i in g] + [(np.sqrt(n_g)[:, None] * dev).T]
                fac = _compress(np.concatenate(parts, axis=1), min(self.feature_dim, int(n) - 1))
                scatters.append(fac)
            else:
                scatters.append(sum(self.scatter(int(i)) for i in g) + (n_g[:, None] * dev**2).sum(axis=0))
            counts.append(int(n))
            means.append(mean)
        return ClassClusters.from_stats(np.array(counts, np.int64), np.array(means), self.mode, scatters)

    def subset(self, keep: np.ndarray) -> "ClassClusters":
        """Only the clusters at indices ``keep`` (plain removal)."""
        keep = np.asarray(keep, dtype=np.int64)
        return ClassClusters.from_stats(
            self.counts[keep], self.means[keep].astype(np.float64), self.mode,
            [self.scatter(int(i)) for i in keep],
        )
