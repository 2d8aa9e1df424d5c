"""The ablation's hybrids: classic clusterings in place of Agg-Var, with or without pseudo-rehearsal.

Trad-Agg = agglomerative clustering (Ward) to a cluster count; k-means = k-means to the same count.
By default each class gets as many clusters as Agg-Var would give it at the same D (so memory is
equal and only the clustering differs). "-PR" hybrids then use the core's pseudo-rehearsal and SGD
linear head; the plain ones use the core's weighted vote over their centroids, as CBCL does.
"""
from __future__ import annotations

import numpy as np

from .core_methods import ClusterMemoryMethod

__all__ = ["ClusteringHybrid", "cluster_labels"]


def cluster_labels(x: np.ndarray, k: int, kind: str, seed: int) -> np.ndarray:
    """Cluster assignment of the rows of ``x`` into ``k`` clusters by ``kind`` ('trad-agg' or 'kmeans')."""
    k = int(min(max(k, 1), len(x)))
    if k == 1:
        return np.zeros(len(x), dtype=np.int64)
    if k == len(x):
        return np.arange(len(x), dtype=np.int64)
    if kind == "trad-agg":
        from sklearn.cluster import AgglomerativeClustering

        return AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(x).astype(np.int64)
    if kind == "kmeans":
        from sklearn.cluster import KMeans

        return KMeans(n_clusters=k, n_init=3, random_state=seed).fit_predict(x).astype(np.int64)
    raise ValueError(f"kind must be 'trad-agg' or 'kmeans', got {kind!r}")


class ClusteringHybrid(ClusterMemoryMethod):
    """Same memory, heads and budget as CBCL-PR/CBCL, but clusters from ``kind`` instead of Agg-Var."""

    def __init__(self, kind: str = "kmeans", pseudo_rehearsal: bool = True, clusters_per_class: int | None = None,
                 **kwargs) -> None:
        kwargs.setdefault("head", "linear_sgd" if pseudo_rehearsal else "vote")
        super().__init__(**kwargs)
        if kind not in ("trad-agg", "kmeans"):
            raise ValueError(f"kind must be 'trad-agg' or 'kmeans', got {kind!r}")
        if clusters_per_class is not None and clusters_per_class < 1:
            raise ValueError(f"clusters_per_class must be >= 1, got {clusters_per_class}")
        self.kind, self.pseudo_rehearsal, self.clusters_per_class = kind, pseudo_rehearsal, clusters_per_class
        self.name = kind + ("-pr" if pseudo_rehearsal else "")

    def _teach(self, shots: dict[str, np.ndarray]) -> None:
        from cbcl_pr_ros.core.clustering import ClassClusters, agg_var
        from cbcl_pr_ros.core.distance_threshold import estimate_distance_threshold

        if self.memory_ is None:
            self.memory_ = self._new_memory(next(iter(shots.values())).shape[1])
        if self.D_ is None:
            base = self.distance_threshold or estimate_distance_threshold(shots, seed=self.seed)
            self.D_ = float(base) * self.d_scale
        classes = dict(self.memory_.items())
        for label, x in shots.items():
            x64 = np.asarray(x, np.float64)
            if label in classes:  # more data of a known class: recluster is impossible (no raw data kept);
                raise ValueError(f"{self.name}: class {label} taught twice; hybrids support new classes only")
            k = self.clusters_per_class or len(agg_var(x64, self.D_).counts)
            lab = cluster_labels(x64, k, self.kind, self.seed)
            counts, means, scatters = [], [], []
            for j in np.unique(lab):
                m = x64[lab == j]
                mu = m.mean(axis=0)
                dev = m - mu
                counts.append(len(m))
                means.append(mu)
                scatters.append(dev.T if self.covariance == "full" else (dev * dev).sum(axis=0))
            classes[label] = ClassClusters.from_stats(np.array(counts), np.array(means), self.covariance, scatters)
        from cbcl_pr_ros.core.memory import ClusterMemory

        mem = ClusterMemory(self.memory_.feature_dim, self.covariance, self.max_clusters, self.reduction,
                            self.seed, classes)
        if self.max_clusters is not None and mem.n_clusters > self.max_clusters:
            mem = mem.reduced_to(self.max_clusters, protect=tuple(shots))
        self.memory_ = mem
