"""Pseudo-rehearsal: Gaussian pseudo-exemplars drawn from the stored clusters.

* ``"full"`` mode (paper, full-data runs): cluster ``i`` with ``m_i`` members gives ``m_i``
  samples, so a class is replayed with as many vectors as it was taught with.
* ``"few_shot"`` mode (paper's FSIL): about ``per_class`` (40) samples for *every* class, old and
  new; real features are not used.  The samples of a class are shared among its clusters in
  proportion to their counts by largest remainders (sum exactly ``per_class``), which replaces the
  released code's ``round((40 - #singletons) / #clusters)`` that goes negative with more than 40
  singletons.

A cluster is sampled from ``N(mean, S / (n - 1))`` through its scatter factor, ``mean + L z /
sqrt(n-1)``, so rank-deficient covariances need no Cholesky and never fail.  A singleton (no
covariance) is replayed as its centroid, as in the released code; ``singleton_jitter > 0`` adds
isotropic noise of that standard deviation instead (off by default).  Full covariances are sampled
as full covariances (the released few-shot path passed ``np.diag(cov)`` and crashed).  Everything
is drawn from a ``numpy.random.Generator`` so a seed makes it deterministic.

>>> import numpy as np
>>> from cbcl_pr_ros.core.memory import ClusterMemory
>>> rng = np.random.default_rng(0)
>>> mem = ClusterMemory(4).with_taught({"a": rng.normal(0, 1, (10, 4)), "b": rng.normal(5, 1, (3, 4))}, 2.0)
>>> x, y = pseudo_exemplars(mem, "few_shot", np.random.default_rng(1))
>>> x.shape, np.bincount(y).tolist()
((80, 4), [40, 40])
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .clustering import ClassClusters
from .memory import ClusterMemory

__all__ = ["REHEARSAL_MODES", "sample_counts", "sample_class", "pseudo_exemplars"]

REHEARSAL_MODES = ("few_shot", "full")


def sample_counts(counts: np.ndarray, total: int) -> np.ndarray:
    """Split ``total`` samples among clusters in proportion to ``counts`` (largest remainders).

    >>> int(sample_counts(np.array([1] * 50 + [10]), 40).sum())
    40
    """
    counts = np.asarray(counts, dtype=np.float64)
    quota = total * counts / counts.sum()
    base = np.floor(quota).astype(np.int64)
    left = int(total - base.sum())
    if left > 0:
        order = np.lexsort((np.arange(len(quota)), -(quota - base)))
        base[order[:left]] += 1
    return base


def sample_class(
    cc: ClassClusters, per_cluster: np.ndarray, rng: np.random.Generator, singleton_jitter: float = 0.0
) -> np.ndarray:
    """Draw ``per_cluster[i]`` samples from cluster ``i`` of ``cc``; (sum, d) float32."""
    out = []
    d = cc.feature_dim
    for i, m in enumerate(per_cluster):
        m = int(m)
        if m <= 0:
            continue
        mean = cc.means[i].astype(np.float64)
        n = int(cc.counts[i])
        if n < 2:
            s = mean + (rng.standard_normal((m, d)) * singleton_jitter if singleton_jitter > 0 else 0.0)
            out.append(np.broadcast_to(s, (m, d)))
            continue
        scat = cc.scatter(i)
        if cc.mode == "full":
            z = rng.standard_normal((m, scat.shape[1]))
            out.append(mean + (z @ scat.T) / np.sqrt(n - 1))
        else:
            out.append(mean + rng.standard_normal((m, d)) * np.sqrt(scat / (n - 1)))
    if not out:
        return np.zeros((0, d), np.float32)
    return np.concatenate(out).astype(np.float32)


def pseudo_exemplars(
    memory: ClusterMemory,
    mode: str,
    rng: np.random.Generator,
    per_class: int = 40,
    classes: Iterable[str] | None = None,
    singleton_jitter: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-exemplars of ``classes`` (default: all), labelled by index into ``memory.classes``."""
    if mode not in REHEARSAL_MODES:
        raise ValueError(f"rehearsal mode must be one of {REHEARSAL_MODES}, got {mode!r}")
    if per_class < 1:
        raise ValueError(f"per_class must be >= 1, got {per_class!r}")
    names = memory.classes
    wanted = names if classes is None else tuple(classes)
    xs, ys = [], []
    for label in wanted:
        cc = memory[label]
        per = cc.counts if mode == "full" else sample_counts(cc.counts, per_class)
        x = sample_class(cc, per, rng, singleton_jitter)
        xs.append(x)
        ys.append(np.full(len(x), names.index(label), dtype=np.int64))
    if not xs:
        return np.zeros((0, memory.feature_dim), np.float32), np.zeros(0, np.int64)
    return np.concatenate(xs), np.concatenate(ys)
