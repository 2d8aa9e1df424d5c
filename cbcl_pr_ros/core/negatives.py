"""Negatives: a bounded, image-free sample of feature vectors of things that are *not* taught classes.

While it is taught, a robot sees much that it is not taught: the other objects of a teaching frame,
the table, the background.  That stream is free in-domain data for the open-set gate.  The store
keeps at most ``capacity`` transformed feature vectors of it (a uniform reservoir sample of all
ever offered, seeded), never images.  From the first one, the gate vetoes a class wherever a stored
negative is nearly as near as the class (:func:`veto_ratio`, :meth:`.open_set.DistanceGate.ratios`): what
was seen beside a taught object is never given its name.  With enough of them each class also gets
its own acceptance radius (:func:`class_radii`): the ``quantile`` of the distances from the class's
nearest centroid to the stored negatives, times ``margin``, capped by the global radius
``factor * D_gate``.  A class that
sits among many look-alikes gets a tight radius; one far from everything seen keeps the global one.
Only a class taught from several views gets one (its shots lie ``RADIUS_MIN_EXTENT`` D_gate from their mean):
a single view's other views lie about as far from it as the other objects on its table, so a
quantile of those objects' distances would cut the very views it must still accept, while the veto
keeps every negative out of it all the same.

Measured on real RGB-D crops (docs/core.md "Open set", bench/bench_first_shot.py): one shot, the
teaching frame's other objects as the only negatives, 91 % of the taught objects' other views
accepted and 82 % of never-taught objects rejected (the radius rule alone: 100 % / 12 %).

>>> import numpy as np
>>> store = NegativeStore.empty(2, capacity=4).with_added(np.array([[1.0, 0.0], [0.0, 1.0]]), seed=0)
>>> len(store), store.offered
(2, 2)
>>> class_radii((np.zeros((1, 2)),), store, base=5.0, quantile=0.0, margin=0.5, min_count=2).tolist()
[0.5]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["NegativeStore", "class_radii", "nearest_distances", "sq_distances", "veto_ratio", "MIN_NEGATIVES",
           "MAX_NEGATIVES",
           "MAX_OFFERED", "RADIUS_MIN_EXTENT", "RADIUS_MIN_NEGATIVES", "SAME_OBJECT", "VETO", "VETO_GROWTH"]

# the largest capacity a config may ask for: 4096 x 1280 float16 is 10 MB
MAX_NEGATIVES = 4096
# one negative is enough: the first thing seen beside a taught object already bounds its class (the veto)
MIN_NEGATIVES = 1
# a class's radius of its own (a quantile of the negatives' distances) needs this many: a quantile of a
# handful is noise, while the veto below needs none
RADIUS_MIN_NEGATIVES = 20
# and only a class taught from several views has one: its shots' RMS distance to their mean is at least
# this many D_gate (half of calibration.SAME_VIEW, 0.75: two shots that far apart are two views). One
# view (one shot, or jittered and still-frame copies of it: mostly 0.2-0.35 D_gate) keeps the global
# radius and the veto: its other views lie as far from it as the other objects of its table do
RADIUS_MIN_EXTENT = 0.375
# the most vectors one add_negatives call takes (a frame of 50 objects times a few frames fits)
MAX_OFFERED = 4096
# an offered vector closer than this many D_gate to one already kept (or offered just before) is a
# copy of it (a still object seen in several frames): it is kept once and counts once
SAME_OBJECT = 0.25
# a vector is answered as a class only where the class's nearest centroid is closer than
# veto_ratio(m) times the nearest of the m stored negatives: every negative, and a ball around it, lies
# outside every class. VETO is the ratio with one negative; it may grow as m ** VETO_GROWTH, since the
# nearest of m things seen lies nearer the more there are (about m ** (-1/p) in p dimensions). Measured
# (docs/core.md "The robot's stream as negatives"): a growth helps on real tables but lets more of
# another data set in where many out-of-domain negatives are stored, so none is applied
VETO = 1.02
VETO_GROWTH = 0.0


@dataclass(frozen=True)
class NegativeStore:
    """At most ``capacity`` vectors (float16: half the bytes, and a distance needs no more) transformed
    like the memory's, and how many were ever offered."""

    vectors: np.ndarray
    capacity: int
    offered: int = 0

    @classmethod
    def empty(cls, feature_dim: int, capacity: int) -> "NegativeStore":
        return cls(np.zeros((0, int(feature_dim)), np.float16), int(capacity), 0)

    def __len__(self) -> int:
        return len(self.vectors)

    def with_added(self, x: np.ndarray, seed: int, same: float = 0.0) -> "NegativeStore":
        """A new store with the rows of ``x`` offered: kept while there is room, then each replaces a
        random kept one with probability ``capacity / offered`` (reservoir sampling, so the store
        stays a uniform sample of everything offered; seeded by ``seed`` and the count).  A row
        closer than ``same`` to a kept row or to an earlier row of ``x`` is a copy: it is dropped
        and not counted as offered."""
        x = np.asarray(x, np.float16)
        if same > 0 and len(x):
            x = self._new_rows(x, same)
        if self.capacity <= 0 or len(x) == 0:
            return NegativeStore(self.vectors, self.capacity, self.offered + len(x))
        kept = list(self.vectors)
        rng = np.random.default_rng([int(seed), self.offered])
        offered = self.offered
        for row in x:
            offered += 1
            if len(kept) < self.capacity:
                kept.append(row)
            else:
                j = int(rng.integers(offered))
                if j < self.capacity:
                    kept[j] = row
        return NegativeStore(np.asarray(kept, np.float16).reshape(-1, self.vectors.shape[1]), self.capacity, offered)

    def _new_rows(self, x: np.ndarray, same: float) -> np.ndarray:
        """The rows of ``x`` that are no copy (closer than ``same``) of a kept row or an earlier row."""
        near_kept = (sq_distances(x, self.vectors).min(axis=1) < same * same if len(self.vectors)
                     else np.zeros(len(x), bool))
        d2 = sq_distances(x, x)
        keep: list[int] = []
        for i in range(len(x)):
            if not near_kept[i] and not (keep and d2[i, keep].min() < same * same):
                keep.append(i)
        return x[keep]

    def without_near(self, x: np.ndarray, radius: float) -> "NegativeStore":
        """A new store without the negatives closer than ``radius`` to a row of ``x``: a thing seen
        before it was taught (the very object, from a like view) is no negative of itself."""
        if len(self.vectors) == 0 or len(x) == 0:
            return self
        d2 = sq_distances(self.vectors, x)
        keep = d2.min(axis=1) >= radius * radius
        return self if keep.all() else NegativeStore(self.vectors[keep], self.capacity, self.offered)

    def nbytes(self) -> int:
        return int(self.vectors.nbytes)


def veto_ratio(count: int) -> float:
    """The veto's ratio with ``count`` negatives stored: ``VETO * count ** VETO_GROWTH``.

    >>> veto_ratio(1) == veto_ratio(128) == VETO   # no growth applied
    True
    """
    return float(VETO * max(1, int(count)) ** VETO_GROWTH)


def sq_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a), len(b)) squared Euclidean distances, clipped at 0 against rounding."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.maximum(d2, 0.0)


def nearest_distances(x: np.ndarray, store: NegativeStore) -> np.ndarray:
    """Distance of each row of ``x`` to its nearest stored negative (inf where the store is empty)."""
    if len(store) == 0:
        return np.full(len(x), np.inf)
    return np.sqrt(sq_distances(x, store.vectors).min(axis=1))


def class_radii(centroids: tuple[np.ndarray, ...], store: NegativeStore, base: float, quantile: float,
                margin: float, min_count: int = RADIUS_MIN_NEGATIVES, rank: int = 0, floor: float = 0.0,
                several_views: np.ndarray | None = None) -> np.ndarray:
    """Per class, ``min(base, margin * r)`` with ``r`` the ``quantile`` of the negatives' distances to
    the class's nearest centroid, or, when ``rank`` >= 1, the distance of its ``rank``-th nearest
    negative (the farthest when fewer are stored): far negatives added later then leave the radius
    as it is, where they raise a quantile; ``base`` for every class when the store holds fewer than
    ``min_count`` vectors.  Never below ``floor``: a negative right beside a class narrows it to
    ``floor``, it does not make it unteachable.  ``several_views`` (one flag per class), when given:
    only the flagged classes get a radius of their own, the others keep ``base`` (see
    :data:`RADIUS_MIN_EXTENT`)."""
    radii = np.full(len(centroids), float(base))
    if several_views is not None:
        several_views = np.asarray(several_views)
        if several_views.shape != (len(centroids),) or several_views.dtype != bool:
            raise ValueError(f"several_views must be {len(centroids)} booleans (one per class), "
                             f"got {several_views.dtype} of shape {several_views.shape}")
    if len(store) < max(1, min_count) or not len(centroids):
        return radii
    allc = np.concatenate([np.asarray(c, np.float64) for c in centroids])
    owner = np.repeat(np.arange(len(centroids)), [len(c) for c in centroids])
    d2 = sq_distances(store.vectors, allc)  # negatives x all centroids
    for k in range(len(centroids)):
        if several_views is not None and not several_views[k]:
            continue
        nearest = np.sqrt(d2[:, owner == k].min(axis=1))
        if rank >= 1:
            nth = min(rank, len(nearest)) - 1  # the farthest when fewer are stored
            r = float(np.partition(nearest, nth)[nth])
        else:
            r = float(np.quantile(nearest, quantile))
        radii[k] = min(float(base), max(float(floor), margin * r))
    return radii
