"""The ablation's hybrids: classic clusterings in place of Agg-Var, with or without pseudo-rehearsal.

Trad-Agg = agglomerative clustering (Ward) to a cluster count; k-means = k-means to the same count.
By default each class gets as many clusters as Agg-Var would give it at the same D (so memory is
equal and only the clustering differs). "-PR" hybrids then use the core's pseudo-rehearsal and SGD
linear head; the plain ones use the core's weighted vote over their centroids, as CBCL does.

These are ablation variants, not CBCL-PR: Agg-Var is the one thing they replace, and the learner has
no hook for another clustering, so they build the core's memory themselves and train the core's heads
with the learner's settings (a :class:`~cbcl_pr_ros.core.LearnerConfig`) and the learner's per-increment
seeding, so that only the clustering differs from the product.
"""
from __future__ import annotations

import numpy as np

from cbcl_pr_ros.core import ClassClusters, ClusterMemory, LearnerConfig, agg_var, estimate_distance_threshold
from cbcl_pr_ros.core.classifiers.sgd import SGDSchedule, fit_linear_sgd
from cbcl_pr_ros.core.classifiers.vote import fit_weighted_vote

from .base import IncrementalMethod

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


class ClusteringHybrid(IncrementalMethod):
    """Same memory, heads and budget as CBCL-PR/CBCL, but clusters from ``kind`` instead of Agg-Var.

    ``config`` supplies covariance, rehearsal, SGD schedule, vote neighbours, budget and seed exactly as
    the learner reads them; ``pseudo_rehearsal`` picks the SGD linear head (True) or the vote (False).
    """

    def __init__(self, kind: str = "kmeans", pseudo_rehearsal: bool = True, config: LearnerConfig | None = None,
                 d_scale: float = 1.0, clusters_per_class: int | None = None) -> None:
        config = config if config is not None else LearnerConfig(covariance="diagonal")
        super().__init__(int(config.seed))
        if kind not in ("trad-agg", "kmeans"):
            raise ValueError(f"kind must be 'trad-agg' or 'kmeans', got {kind!r}")
        if clusters_per_class is not None and clusters_per_class < 1:
            raise ValueError(f"clusters_per_class must be >= 1, got {clusters_per_class}")
        if not d_scale > 0:
            raise ValueError(f"d_scale must be > 0, got {d_scale}")
        self.kind, self.pseudo_rehearsal, self.clusters_per_class = kind, pseudo_rehearsal, clusters_per_class
        self.config, self.d_scale = config, d_scale
        self.name = kind + ("-pr" if pseudo_rehearsal else "")
        self.memory_ = None
        self.snapshot_ = None
        self.D_: float | None = None

    def _memory_with(self, shots: dict[str, np.ndarray]):
        cfg = self.config
        dim = next(iter(shots.values())).shape[1]
        D = self.D_
        if D is None:
            D = float(cfg.distance_threshold or estimate_distance_threshold(shots, cfg.seed)) * self.d_scale
        classes = dict(self.memory_.items()) if self.memory_ is not None else {}
        for label, x in shots.items():
            if label in classes:  # reclustering needs the raw data, which is not kept
                raise ValueError(f"{self.name}: class {label} taught twice; hybrids support new classes only")
            x64 = np.asarray(x, np.float64)
            k = self.clusters_per_class or len(agg_var(x64, D).counts)
            lab = cluster_labels(x64, k, self.kind, cfg.seed)
            counts, means, scatters = [], [], []
            for j in np.unique(lab):
                m = x64[lab == j]
                dev = m - m.mean(axis=0)
                counts.append(len(m))
                means.append(m.mean(axis=0))
                scatters.append(dev.T if cfg.covariance == "full" else (dev * dev).sum(axis=0))
            classes[label] = ClassClusters.from_stats(np.array(counts), np.array(means), cfg.covariance, scatters)
        mem = ClusterMemory(dim, cfg.covariance, cfg.max_clusters, cfg.reduction, cfg.seed, classes)
        if cfg.max_clusters is not None and mem.n_clusters > cfg.max_clusters:
            mem = mem.reduced_to(cfg.max_clusters, protect=tuple(shots))
        return mem, D

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        cfg = self.config
        shots = {str(c): x for c, x in feats.items()}
        memory, D = self._memory_with(shots)
        if self.pseudo_rehearsal:
            sched = SGDSchedule(cfg.epochs, cfg.epochs_per_increment, cfg.lr, cfg.momentum, cfg.weight_decay,
                                cfg.batch_size)
            rng = np.random.default_rng([cfg.seed, self.increments_])  # the learner's seeding
            snap = fit_linear_sgd(memory, cfg.rehearsal, rng, sched, self.increments_, shots,
                                  cfg.exemplars_per_class, cfg.singleton_jitter)
        else:
            snap = fit_weighted_vote(memory, cfg.vote_neighbours)
        self.memory_, self.D_, self.snapshot_ = memory, D, snap
        self._ids = np.array([int(c) for c in snap.classes], dtype=np.int64)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self._ids[np.argmax(self.snapshot_.scores(x), axis=1)]

    def n_clusters(self) -> int:
        return int(self.memory_.n_clusters) if self.memory_ is not None else 0

    def memory_bytes(self) -> int:
        if not self.pseudo_rehearsal:  # the vote reads centroids and counts only
            return int(self.memory_.n_clusters * (self.feature_dim_ * 4 + 8))
        snap = self.snapshot_
        return int(self.memory_.nbytes() + snap.weight.nbytes + snap.bias.nbytes)
