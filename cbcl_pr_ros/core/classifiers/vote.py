"""CBCL's weighted vote over the nearest centroids (Ayub & Wagner 2020), the paper's baseline.

The ``n`` centroids nearest to ``x`` vote for their classes, each with weight ``1 / distance``; a
class's score is the sum of its votes, normalised to sum to 1.  Prediction time grows with the
number of stored clusters (what the paper's prediction-time figure shows); CBCL-PR's linear head
does not.

>>> import numpy as np
>>> from cbcl_pr_ros.core.memory import ClusterMemory
>>> rng = np.random.default_rng(0)
>>> mem = ClusterMemory(4).with_taught({"a": rng.normal(0, 1, (6, 4)), "b": rng.normal(4, 1, (6, 4))}, 1.5)
>>> fit_weighted_vote(mem, 3).scores(np.zeros((1, 4))).argmax()
np.int64(0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..memory import ClusterMemory

__all__ = ["WeightedVoteSnapshot", "fit_weighted_vote"]


@dataclass(frozen=True)
class WeightedVoteSnapshot:
    kind: str
    classes: tuple[str, ...]
    centroids: np.ndarray  # (N, d) float32
    owner: np.ndarray  # (N,) class index
    n_neighbours: int
    sq_norms: np.ndarray  # (N,) squared centroid norms, precomputed once

    def scores(self, features: np.ndarray) -> np.ndarray:
        x = np.asarray(features, np.float32)
        c = self.centroids
        d2 = (x * x).sum(1)[:, None] - 2.0 * (x @ c.T) + self.sq_norms[None, :]
        dist = np.sqrt(np.maximum(d2, 0.0)).astype(np.float64)
        k = min(self.n_neighbours, c.shape[0])
        near = np.argpartition(dist, k - 1, axis=1)[:, :k] if k < c.shape[0] else np.tile(np.arange(k), (len(x), 1))
        rows = np.arange(len(x))[:, None]
        w = 1.0 / np.maximum(dist[rows, near], 1e-12)
        out = np.zeros((len(x), len(self.classes)))
        np.add.at(out, (np.broadcast_to(rows, near.shape), self.owner[near]), w)
        out /= out.sum(axis=1, keepdims=True)
        return out


def fit_weighted_vote(memory: ClusterMemory, n_neighbours: int = 5) -> WeightedVoteSnapshot:
    if n_neighbours < 1:
        raise ValueError(f"n_neighbours must be >= 1, got {n_neighbours!r}")
    cent, owner = memory.all_centroids()
    cent = np.ascontiguousarray(cent, np.float32)
    return WeightedVoteSnapshot("cbcl_vote", memory.classes, cent, owner, n_neighbours, (cent * cent).sum(1))
