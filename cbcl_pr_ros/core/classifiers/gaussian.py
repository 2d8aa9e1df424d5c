"""The fast default head: a linear classifier in closed form from the cluster memory's moments.

Pseudo-rehearsal samples every class from its Gaussian mixture and fits a linear softmax to the
samples.  With infinitely many samples, what a linear classifier can learn is fixed by the mixture's
first and second moments, which the memory holds *exactly*: the class means and the within-class
covariance (cluster covariances plus the spread of a class's cluster means).  This head computes
the linear discriminant of those moments (shared-covariance Gaussian posterior, equal priors, as
classes are balanced in the paper's few-shot rehearsal), with the pooled covariance shrunk towards
a scaled identity ``(1 - a) S + a tr(S)/d I`` because a few shots at d = 1280 give a singular
``S``.  No sampling, no epochs: one ``d x d`` Cholesky per retrain, deterministic.

>>> import numpy as np
>>> from cbcl_pr_ros.core.memory import ClusterMemory
>>> rng = np.random.default_rng(0)
>>> shots = {c: rng.normal(3 * i, 1, (10, 8)) for i, c in enumerate("abc")}
>>> snap = fit_gaussian_head(ClusterMemory(8).with_taught(shots, 3.0))
>>> snap.scores(np.full((1, 8), 6.0)).argmax(), snap.classes
(np.int64(2), ('a', 'b', 'c'))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky
from scipy.linalg.blas import dsyrk

from ..clustering import ClassClusters
from ..memory import ClusterMemory
from .base import LinearSnapshot

__all__ = ["fit_gaussian_head", "shared_discriminant", "shrunk_pooled", "class_moments", "ClassMoment", "PooledMoments"]


@dataclass(frozen=True)
class ClassMoment:
    """One class's mean and within-class covariance ``W = factor factor^T + diag(diag)``.

    ``W`` is the covariance of the class's Gaussian mixture about its mean: the count-weighted
    cluster covariances plus the count-weighted spread of the cluster means.  ``source`` is the
    (immutable) :class:`ClassClusters` it was computed from, the key of the cache.
    """

    source: ClassClusters
    mean: np.ndarray  # (d,) float64
    factor: np.ndarray  # (d, r) float64
    diag: np.ndarray | None  # (d,) float64 in diagonal mode, None in full mode

    @classmethod
    def of(cls, cc: ClassClusters) -> "ClassMoment":
        n = cc.counts.astype(np.float64)
        total = n.sum()
        mu_k = cc.means.astype(np.float64)
        mu = (n[:, None] * mu_k).sum(axis=0) / total
        # the spread of the cluster means (none with one cluster: a zero column only costs every solve)
        cols = [((mu_k - mu) * np.sqrt(n / total)[:, None]).T] if cc.n_clusters > 1 else []
        diag = None if cc.mode == "full" else np.zeros(cc.feature_dim)
        for k in range(cc.n_clusters):
            if n[k] < 2:
                continue
            w = n[k] / (total * (n[k] - 1))
            s = cc.scatter(k)
            if cc.mode == "full":
                cols.append(s * np.sqrt(w))
            else:
                diag += s * w
        factor = np.concatenate(cols, axis=1) if cols else np.zeros((cc.feature_dim, 0))
        return cls(cc, mu, np.ascontiguousarray(factor), diag)



def _accumulate(acc: np.ndarray, moments: list[ClassMoment] | tuple[ClassMoment, ...], sign: float) -> None:
    """``acc += sign * sum(W_c)`` in place, with one matrix product for all the factors."""
    if not moments:
        return
    f = np.concatenate([m.factor for m in moments], axis=1)
    if f.shape[1]:
        # one triangle (a symmetric rank-k product: half a general product's work), then mirrored
        prod = dsyrk(1.0, f.T, trans=1)
        prod += np.triu(prod, 1).T
        if sign > 0:
            acc += prod
        else:
            acc -= prod
    diags = [m.diag for m in moments if m.diag is not None]
    if diags:
        acc[np.diag_indices(len(acc))] += sign * np.sum(diags, axis=0)


@dataclass(frozen=True)
class PooledMoments:
    """Class means and the sum of the within-class covariances, kept for incremental retrains.

    ``covariance()`` is the class-balanced pooled within-class covariance ``sum_c W_c / C``.
    Instances are never modified; :meth:`updated` returns a new one.
    """

    classes: tuple[str, ...]
    per_class: tuple[ClassMoment, ...]
    within_sum: np.ndarray  # (d, d) float64, read-only

    def __post_init__(self) -> None:
        self.within_sum.setflags(write=False)

    @classmethod
    def from_memory(cls, memory: ClusterMemory) -> "PooledMoments":
        """Everything from scratch (the reference the incremental path must equal)."""
        d = memory.feature_dim
        per = tuple(ClassMoment.of(cc) for _, cc in memory.items())
        acc = np.zeros((d, d))
        _accumulate(acc, per, 1.0)
        return cls(memory.classes, per, acc)

    def updated(self, memory: ClusterMemory) -> "PooledMoments":
        """The moments of ``memory``, recomputing only classes whose clusters are new objects.

        A class is reused when its :class:`ClassClusters` object is the one this cache was built
        from (immutable, so identity means equal content), whatever its name now.  When more than
        half the classes changed, everything is recomputed (as cheap, and no cancellation).
        """
        if len(self.within_sum) != memory.feature_dim:
            return PooledMoments.from_memory(memory)
        by_source = {id(m.source): m for m in self.per_class}
        per: list[ClassMoment] = []
        added: list[ClassMoment] = []
        kept: set[int] = set()
        for _, cc in memory.items():
            m = by_source.get(id(cc))
            if m is None or m.source is not cc or id(cc) in kept:  # (kept: one object under two names)
                m = ClassMoment.of(cc)
                added.append(m)
            else:
                kept.add(id(cc))
            per.append(m)
        removed = [m for m in self.per_class if id(m.source) not in kept]
        if not added and not removed:
            if self.classes == memory.classes:
                return self
            return PooledMoments(memory.classes, tuple(per), self.within_sum)  # renamed only
        if 2 * (len(added) + len(removed)) > max(len(memory), 1):
            return PooledMoments.from_memory(memory)
        acc = np.array(self.within_sum)
        _accumulate(acc, removed, -1.0)
        _accumulate(acc, added, 1.0)
        return PooledMoments(memory.classes, tuple(per), acc)

    def means(self) -> np.ndarray:
        """(C, d) class means in class order."""
        if not self.per_class:
            return np.zeros((0, len(self.within_sum)))
        return np.stack([m.mean for m in self.per_class])

    def covariance(self) -> np.ndarray:
        """A new (d, d) array: the class-balanced pooled within-class covariance."""
        return self.within_sum / max(len(self.per_class), 1)


def class_moments(memory: ClusterMemory) -> tuple[np.ndarray, np.ndarray]:
    """Class means (C, d) and the class-balanced pooled within-class covariance (d, d)."""
    pm = PooledMoments.from_memory(memory)
    return pm.means(), pm.covariance()


def shrunk_pooled(moments: PooledMoments, shrinkage: float, shared: np.ndarray | None = None) -> np.ndarray:
    """A new (d, d) array ``(1 - a) S + a tr(S)/d I`` of the pooled covariance ``S`` (identity when
    no class has any spread yet, e.g. one shot per class).  ``shared`` (d, d), a covariance every
    class shares (the teach-time views' spread, :mod:`..view_spread`), is added to ``S`` first."""
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must be in [0, 1], got {shrinkage!r}")
    cov = moments.covariance()
    if shared is not None:
        cov += shared
    d = len(cov)
    scale = np.trace(cov) / d
    # a spread below the means' rounding (e.g. two identical shots per class) is no spread at all
    means = moments.means()
    residue = 1e-12 * (float(np.mean(means * means)) if means.size else 0.0)
    if not scale > residue:
        return np.eye(d)
    cov *= 1.0 - shrinkage
    cov[np.diag_indices(d)] += shrinkage * scale
    return cov


def pd_cholesky(a: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of the symmetric matrix ``a``, made positive definite when rounding is
    not: the pooled covariance is kept as running sums (added to and taken from as classes change),
    and when it is near singular (few shots, little shrinkage) rounding can leave an eigenvalue a hair
    below zero. A teach must not fail for that, so a ridge of growing size (relative to the mean
    variance) is added until the factor exists; a real fault (NaN) still raises."""
    if not np.all(np.isfinite(a)):
        raise ValueError("the pooled covariance holds NaN or infinite values")
    try:
        return cholesky(a, lower=True, check_finite=False)
    except LinAlgError:
        pass
    scale = max(float(np.trace(a)) / len(a), np.finfo(np.float64).tiny)
    for ridge in (1e-10, 1e-8, 1e-6, 1e-4, 1e-2):
        try:
            return cholesky(a + ridge * scale * np.eye(len(a)), lower=True, check_finite=False)
        except LinAlgError:
            continue
    raise ValueError("the pooled covariance is not positive definite even with a ridge of 1% of its scale")


def fit_gaussian_head(memory: ClusterMemory, shrinkage: float = 0.5,
                      moments: PooledMoments | None = None, shared: np.ndarray | None = None) -> LinearSnapshot:
    """Closed-form linear head of ``memory``; see the module docstring.

    ``moments`` (optional) must be the :class:`PooledMoments` of ``memory`` (e.g. from
    ``previous.updated(memory)``); without it they are computed from scratch.  ``shared`` as in
    :func:`shrunk_pooled`.
    """
    moments, factor, w, b = shared_discriminant(memory, shrinkage, moments, shared)
    return LinearSnapshot("gaussian", memory.classes, w.astype(np.float32), b.astype(np.float32))


def shared_discriminant(memory: ClusterMemory, shrinkage: float, moments: PooledMoments | None,
                        shared: np.ndarray | None = None) -> tuple[PooledMoments, tuple, np.ndarray, np.ndarray]:
    """The moments (checked, or computed), the Cholesky factor of the shrunk pooled covariance ``A``,
    and the linear part ``w_c = A^{-1} m_c``, ``b_c = -m_c^T A^{-1} m_c / 2`` (float64)."""
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must be in [0, 1], got {shrinkage!r}")
    if moments is None:
        moments = PooledMoments.from_memory(memory)
    elif moments.classes != memory.classes:
        raise ValueError(f"moments are of classes {moments.classes[:5]}..., not of this memory's")
    means = moments.means()
    factor = (pd_cholesky(shrunk_pooled(moments, shrinkage, shared)), True)  # cho_factor's (c, lower) pair
    w = cho_solve(factor, means.T, check_finite=False).T  # (C, d)
    return moments, factor, w, -0.5 * np.einsum("cd,cd->c", w, means)
