"""A data-driven default for Agg-Var's distance threshold D, for any backbone.

D is in the raw units of one feature extractor (the paper's 20.0 and the released code's 17.0 are
for ResNet-34/18 features), so a fixed number is meaningless for another backbone.  The default is
the *median within-class pairwise Euclidean distance* of the first data taught: two shots of the
same object closer than a typical pair then share a cluster and the farther ones open their own, so
a class gets a few clusters, as in the paper's few-shot runs.  With only one shot per class there
are no within-class pairs; then half the median distance between all vectors is used (classes are
farther apart than shots of one class).  The learner fixes D on the first teach and stores it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy.spatial.distance import pdist

__all__ = ["estimate_distance_threshold"]

_MAX_PER_CLASS = 200  # subsample for the estimate; pairwise distances are O(n^2)


def estimate_distance_threshold(shots: Mapping[str, np.ndarray], seed: int = 0) -> float:
    """Median within-class pairwise distance over ``shots`` (label -> (n, d) array).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> d = estimate_distance_threshold({"a": rng.normal(0, 1, (10, 64)), "b": rng.normal(5, 1, (10, 64))})
    >>> 10.0 < d < 12.5   # sqrt(2 * 64) = 11.3 for unit-variance Gaussians
    True
    """
    rng = np.random.default_rng(seed)
    within: list[np.ndarray] = []
    pool: list[np.ndarray] = []
    for x in shots.values():
        x = np.asarray(x, dtype=np.float64)
        if len(x) > _MAX_PER_CLASS:
            x = x[rng.choice(len(x), _MAX_PER_CLASS, replace=False)]
        pool.append(x)
        if len(x) >= 2:
            within.append(pdist(x))
    dists = np.concatenate(within) if within else np.zeros(0)
    dists = dists[dists > 0]
    if dists.size:
        return float(np.median(dists))
    allx = np.concatenate(pool) if pool else np.zeros((0, 1))
    between = pdist(allx) if len(allx) >= 2 else np.zeros(0)
    between = between[between > 0]
    if between.size:
        return 0.5 * float(np.median(between))
    # a single vector (or identical ones): any positive D gives one cluster per class
    return max(float(np.linalg.norm(allx, axis=1).max(initial=0.0)) * 0.5, 1e-6)
