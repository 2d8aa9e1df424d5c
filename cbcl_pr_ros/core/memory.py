"""Cluster memory: every class's Gaussian clusters, with a budget of K clusters enforced exactly.

Reduction (paper, appendix "Cluster Reduction"): when the clusters would exceed ``K``, the excess is
taken from the classes in proportion to their number of clusters, and each class is reduced by
k-means over its centroids.  Departures from the released code, all deliberate:

* the k-means is *count-weighted* (``sample_weight`` = member counts) and the merged cluster gets
  the exact pooled statistics (count-weighted mean, scatter of the union), instead of an unweighted
  k-means and a plain mean of covariances;
* the allocation uses largest remainders with every class keeping at least one cluster, so the total
  after reduction is exactly ``<= K`` (the released rounding can leave it above ``K``); old classes
  pay first, the classes being taught pay only if the old ones cannot cover the excess;
* it works with full covariances too.

``reduction="remove"`` is the paper's comparison: drop the clusters with the fewest members.

Storage: with ``precision="auto"`` (the learner's default, ``LearnerConfig.memory_precision``)
every class the memory creates or changes (teach, reduction) is offered to
:meth:`~.clustering.ClassClusters.compacted`, which keeps it in float16 when that is faithful, so a
class costs about half its raw shots; ``"float32"`` (this class's default, exact to float32) keeps
everything float32.  Forget and rename move classes untouched.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> mem = ClusterMemory(feature_dim=2, covariance="diagonal")
>>> mem = mem.with_taught({"a": rng.normal(0, 1, (20, 2)), "b": rng.normal(9, 1, (20, 2))}, 0.8)
>>> mem.reduced_to(4, protect=()).n_clusters
4
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from sklearn.cluster import KMeans

from .clustering import COVARIANCE_MODES, ClassClusters

__all__ = ["ClusterMemory", "REDUCTIONS", "PRECISIONS", "allocate_reduction"]

REDUCTIONS = ("kmeans", "remove")
PRECISIONS = ("auto", "float32")


def allocate_reduction(sizes: Mapping[str, int], excess: int) -> dict[str, int]:
    """How many clusters to take from each class: proportional to its size, largest remainders,
    never leaving a class with fewer than one cluster.  Returns as much as can be taken.

    >>> allocate_reduction({"a": 6, "b": 3, "c": 1}, 4)
    {'a': 3, 'b': 1, 'c': 0}
    """
    take = {c: 0 for c in sizes}
    remaining = int(excess)
    while remaining > 0:
        room = {c: sizes[c] - 1 - take[c] for c in sizes if sizes[c] - 1 - take[c] > 0}
        if not room:
            break
        total = sum(sizes[c] for c in room)
        quota = {c: remaining * sizes[c] / total for c in room}
        floor = {c: min(int(np.floor(q)), room[c]) for c, q in quota.items()}
        left = remaining - sum(floor.values())
        order = sorted(room, key=lambda c: (-(quota[c] - np.floor(quota[c])), -sizes[c], c))
        for c in order:
            if left <= 0:
                break
            if floor[c] < room[c]:
                floor[c] += 1
                left -= 1
        got = sum(floor.values())
        for c, f in floor.items():
            take[c] += f
        remaining -= got
        if got == 0:
            break
    return take


class ClusterMemory:
    """Immutable mapping ``class name -> ClassClusters``; every update returns a new memory.

    Parameters
    ----------
    feature_dim : int
        Width of the feature vectors.
    covariance : {"full", "diagonal"}
        How the cluster covariances are stored (see :mod:`.clustering`).
    max_clusters : int or None
        The budget ``K`` (None: unlimited).
    reduction : {"kmeans", "remove"}
        How classes are shrunk when the budget is exceeded.
    seed : int
        Seed of the k-means.
    precision : {"auto", "float32"}
        "auto": each class the memory writes is stored in float16 when that is faithful
        (:meth:`~.clustering.ClassClusters.compacted`); "float32" (default here): never.
    """

    def __init__(
        self,
        feature_dim: int,
        covariance: str = "full",
        max_clusters: int | None = None,
        reduction: str = "kmeans",
        seed: int = 0,
        classes: Mapping[str, ClassClusters] | None = None,
        precision: str = "float32",
    ) -> None:
        if covariance not in COVARIANCE_MODES:
            raise ValueError(f"covariance must be one of {COVARIANCE_MODES}, got {covariance!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if max_clusters is not None and max_clusters < 1:
            raise ValueError(f"max_clusters (K) must be >= 1 or None, got {max_clusters!r}")
        self.feature_dim = int(feature_dim)
        self.covariance = covariance
        self.max_clusters = max_clusters
        self.reduction = reduction
        self.seed = seed
        self.precision = precision
        self._classes: dict[str, ClassClusters] = dict(classes or {})

    def _replace(self, classes: Mapping[str, ClassClusters]) -> "ClusterMemory":
        return ClusterMemory(self.feature_dim, self.covariance, self.max_clusters, self.reduction,
                             self.seed, classes, self.precision)

    def _stored(self, cc: ClassClusters) -> ClassClusters:
        """``cc`` as this memory keeps it (float16 when allowed and faithful)."""
        return cc.compacted() if self.precision == "auto" else cc

    # ------------------------------------------------------------------ read access
    @property
    def classes(self) -> tuple[str, ...]:
        """Class names in teaching order."""
        return tuple(self._classes)

    def __getitem__(self, label: str) -> ClassClusters:
        return self._classes[label]

    def __contains__(self, label: object) -> bool:
        return label in self._classes

    def __len__(self) -> int:
        return len(self._classes)

    def items(self) -> Iterable[tuple[str, ClassClusters]]:
        return self._classes.items()

    @property
    def n_clusters(self) -> int:
        return sum(c.n_clusters for c in self._classes.values())

    def nbytes(self) -> int:
        """Bytes of all stored cluster arrays."""
        return sum(c.nbytes() for c in self._classes.values())

    def all_centroids(self) -> tuple[np.ndarray, np.ndarray]:
        """(N, d) float32 centroids and (N,) class indices (into :attr:`classes`)."""
        if not self._classes:
            return np.zeros((0, self.feature_dim), np.float32), np.zeros(0, np.int64)
        means = np.concatenate([c.means for c in self._classes.values()]).astype(np.float32, copy=False)
        idx = np.concatenate([np.full(c.n_clusters, i) for i, c in enumerate(self._classes.values())])
        return means, idx.astype(np.int64)

    # ------------------------------------------------------------------ updates
    def with_taught(self, shots: Mapping[str, np.ndarray], distance_threshold: float) -> "ClusterMemory":
        """Cluster new shots of each class (new or known), then enforce the budget.

        Raises ValueError (and returns nothing) when ``K`` is smaller than the number of classes.
        """
        new_names = [c for c in shots if c not in self._classes]
        n_classes = len(self._classes) + len(new_names)
        if self.max_clusters is not None and n_classes > self.max_clusters:
            raise ValueError(
                f"memory budget K={self.max_clusters} is smaller than the number of classes ({n_classes})"
            )
        classes = dict(self._classes)
        for label, x in shots.items():
            base = classes.get(label) or ClassClusters.empty(self.feature_dim, self.covariance)
            classes[label] = self._stored(base.extend(x, distance_threshold))
        mem = self._replace(classes)
        if self.max_clusters is not None and mem.n_clusters > self.max_clusters:
            mem = mem.reduced_to(self.max_clusters, protect=tuple(shots))
        return mem

    def without(self, label: str) -> "ClusterMemory":
        classes = dict(self._classes)
        del classes[label]
        return self._replace(classes)

    def renamed(self, old: str, new: str) -> "ClusterMemory":
        """Same order, ``old`` renamed to ``new``."""
        return self._replace({(new if c == old else c): v for c, v in self._classes.items()})

    def reduced_to(self, budget: int, protect: Iterable[str] = ()) -> "ClusterMemory":
        """Shrink to at most ``budget`` clusters; classes in ``protect`` pay only if others cannot."""
        if budget < len(self._classes):
            raise ValueError(f"budget {budget} is smaller than the number of classes ({len(self._classes)})")
        excess = self.n_clusters - budget
        if excess <= 0:
            return self
        protect = set(protect)
        sizes_old = {c: v.n_clusters for c, v in self._classes.items() if c not in protect}
        take = allocate_reduction(sizes_old, excess)
        rest = excess - sum(take.values())
        if rest > 0:
            sizes_new = {c: v.n_clusters for c, v in self._classes.items() if c in protect}
            take.update(allocate_reduction(sizes_new, rest))
        classes = dict(self._classes)
        for c, t in take.items():
            if t > 0:
                classes[c] = self._stored(self._reduce_class(classes[c], classes[c].n_clusters - t))
        mem = self._replace(classes)
        if mem.n_clusters > budget:  # cannot happen with budget >= classes; kept as a hard guarantee
            raise RuntimeError(f"cluster reduction left {mem.n_clusters} > {budget} clusters")
        return mem

    def _reduce_class(self, cc: ClassClusters, target: int) -> ClassClusters:
        if self.reduction == "remove":
            order = np.lexsort((np.arange(cc.n_clusters), -cc.counts))  # most members first, stable
            return cc.subset(np.sort(order[:target]))
        if target == 1:
            return cc.merged([np.arange(cc.n_clusters)])
        km = KMeans(n_clusters=target, n_init=3, random_state=self.seed)
        labels = km.fit_predict(cc.means.astype(np.float64), sample_weight=cc.counts.astype(np.float64))
        groups = [np.flatnonzero(labels == j) for j in np.unique(labels)]
        return cc.merged(groups)
