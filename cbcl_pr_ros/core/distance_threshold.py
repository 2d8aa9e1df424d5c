"""A data-driven default for Agg-Var's distance threshold D, for any backbone.

D is in the raw units of one feature extractor (the paper's 20.0 and the released code's 17.0 are
for ResNet-34/18 features), so a fixed number is meaningless for another backbone.  The default is
the *median within-class pairwise Euclidean distance* of the first data taught: two shots of the
same object closer than a typical pair then share a cluster and the farther ones open their own, so
a class gets a few clusters, as in the paper's few-shot runs.  With only one shot per class there
are no within-class pairs; then half the median distance between all vectors is used (classes are
farther apart than shots of one class).

With a *prior* (a typical within-class distance of the backbone, in the space of the feature
transform; :data:`BACKBONE_DISTANCE_PRIORS`) the estimate no longer hinges on the first pair of
vectors: D is the root of the posterior mean within-class squared pair distance, the prior counting
as ``prior_dof`` degrees of freedom and every class with ``n`` vectors adding ``n - 1``
(:func:`posterior_distance`).  The learner fixes Agg-Var's D on the first teach (clusters need one
D) and refines the open-set gate's D with every teach (:func:`memory_distance`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy.spatial.distance import pdist

__all__ = ["estimate_distance_threshold", "BACKBONE_DISTANCE_PRIORS", "distance_prior", "posterior_distance",
           "memory_distance", "PRIOR_DOF"]

_MAX_PER_CLASS = 200  # subsample for the estimate; pairwise distances are O(n^2)

#: RMS within-class pair distance per (backbone, transform (power, l2)), measured on the *train*
#: splits of Fashion-MNIST (0.768) and the rendered objects (0.764), never on test images; see
#: docs/core.md "Open set".  Lite1 (0.736 / 0.777) and Lite2 (0.733 / 0.715): the mean of the two,
#: measured the same way by bench/bench_backbones.py priors.  Other backbones fall back to the
#: data-driven estimate as the prior.
BACKBONE_DISTANCE_PRIORS: dict[tuple[str, float, bool], float] = {
    ("efficientnet_lite0", 0.5, True): 0.77,
    ("efficientnet_lite1", 0.5, True): 0.76,
    ("efficientnet_lite2", 0.5, True): 0.72,
}
#: weight of the prior, in within-class degrees of freedom (two 5-shot classes weigh 8)
PRIOR_DOF = 10.0


def distance_prior(backbone: str, power: float, l2: bool) -> float | None:
    """The tabulated prior D of a backbone under a transform, or None."""
    return BACKBONE_DISTANCE_PRIORS.get((backbone, float(power), bool(l2)))


def posterior_distance(prior: float, prior_dof: float, scatter_trace: float, dof: float) -> float:
    """``sqrt(2 (prior_dof prior^2 / 2 + scatter_trace) / (prior_dof + dof))``.

    ``scatter_trace`` is the summed within-class scatter (squared distances of vectors to their class
    mean) and ``dof`` the summed ``n_c - 1``; ``prior`` an RMS pair distance (pair distance^2 = 2 x
    per-vector variance).

    >>> posterior_distance(1.0, 10.0, 0.0, 0.0)
    1.0
    """
    return float(np.sqrt(2.0 * (0.5 * prior_dof * prior ** 2 + scatter_trace) / (prior_dof + dof)))


def memory_distance(memory, prior: float, prior_dof: float = PRIOR_DOF, cache: dict | None = None,
                    min_extent: float = 0.0) -> float:
    """:func:`posterior_distance` with the within-class scatter held by a cluster memory (exact).

    ``cache`` (a dict the caller keeps between calls) holds each class's scatter by its clusters
    object, so that a retrain reads only the classes that changed; it is left holding the
    memory's classes alone.  A class whose shots lie less than ``min_extent`` (RMS) from their mean
    adds nothing: copies of one view say how alike the copies are, not how far an object's views
    reach, so ten of them weigh as much as one shot."""
    total, dof = 0.0, 0.0
    seen = {}
    for _, cc in memory.items():
        hit = cache.get(id(cc)) if cache is not None else None
        if hit is None or hit[0] is not cc:
            hit = (cc, *_class_scatter(cc))
        seen[id(cc)] = hit
        if min_extent > 0 and hit[1] < min_extent * min_extent * (hit[2] + 1.0):
            continue
        total += hit[1]
        dof += hit[2]
    if cache is not None:
        cache.clear()
        cache.update(seen)
    return posterior_distance(prior, prior_dof, total, dof)


def _class_scatter(cc) -> tuple[float, float]:
    """One class's summed squared deviations from its mean, and its degrees of freedom."""
    n = cc.counts.astype(np.float64)
    mu_k = cc.means.astype(np.float64)
    mu = (n[:, None] * mu_k).sum(axis=0) / n.sum()
    total = float((n * ((mu_k - mu) ** 2).sum(axis=1)).sum())
    if cc.diag is not None:
        total += float(np.asarray(cc.diag, np.float64).sum())
    else:
        total += float(sum((np.asarray(f, np.float64) ** 2).sum() for f in cc.factors))
    return total, float(n.sum() - 1.0)


def estimate_distance_threshold(shots: Mapping[str, np.ndarray], seed: int = 0, prior: float | None = None,
                                prior_dof: float = PRIOR_DOF) -> float:
    """Median within-class pairwise distance over ``shots`` (label -> (n, d) array), or with a
    ``prior`` the posterior RMS within-class pair distance (see the module docstring).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> d = estimate_distance_threshold({"a": rng.normal(0, 1, (10, 64)), "b": rng.normal(5, 1, (10, 64))})
    >>> 10.0 < d < 12.5   # sqrt(2 * 64) = 11.3 for unit-variance Gaussians
    True
    """
    if prior is not None:
        scatter, dof = 0.0, 0.0
        for x in shots.values():
            x = np.asarray(x, dtype=np.float64)
            scatter += float(((x - x.mean(axis=0)) ** 2).sum())
            dof += len(x) - 1
        return posterior_distance(prior, prior_dof, scatter, dof)
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
