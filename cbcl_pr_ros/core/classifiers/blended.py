"""Default head: one Gaussian per class, its covariance the shrunk pooled one plus its own scatter.

Class ``c`` is scored by ``-0.5 (x - m_c)^T S_c^{-1} (x - m_c)`` with ``S_c = A + beta W_c``: ``A`` is
the class-balanced pooled within-class covariance shrunk towards a scaled identity (the
:mod:`.gaussian` head's matrix) and ``W_c`` the class's own within-class covariance, both exact from
the cluster memory's moments.  With one shot per class everything is ``A`` (nearest mean in the
transformed space); as shots arrive each class's own spread widens its Gaussian along the directions
it actually varies in (the FeCAM idea, computed from Agg-Var's stored moments instead of the raw
features).  ``W_c`` has rank at most the class's shots, so ``S_c^{-1}`` is applied by Woodbury:
one ``d x d`` Cholesky for ``A`` per retrain and an ``r x r`` system per class, and scoring costs a
linear layer plus ``sum_c r_c`` extra dot products.  The term ``x^T A^{-1} x`` is common to every
class and left out of the logits (it cancels in the softmax and the argmax).

In diagonal memory mode only the spread of a class's cluster means enters ``W_c`` (the per-cluster
diagonal scatters still enter ``A``); see docs/core.md.

>>> import numpy as np
>>> from cbcl_pr_ros.core.memory import ClusterMemory
>>> rng = np.random.default_rng(0)
>>> shots = {c: rng.normal(3 * i, 1, (10, 8)) for i, c in enumerate("abc")}
>>> snap = fit_blended_head(ClusterMemory(8).with_taught(shots, 3.0))
>>> int(snap.scores(np.full((1, 8), 6.0)).argmax()), snap.classes
(2, ('a', 'b', 'c'))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve

from ..clustering import ClassClusters
from ..memory import ClusterMemory
from .base import softmax
from .gaussian import ClassMoment, PooledMoments, shared_discriminant

__all__ = ["BlendedSnapshot", "fit_blended_head", "fit_blended_head_factor", "leave_one_out_logits"]


@dataclass(frozen=True)
class BlendedSnapshot:
    """``logits = x W^T + b + 0.5 sum_j (B_c^T (x - m_c))_j^2``, divided by ``temperature``.

    ``weight``/``bias`` are the shared-covariance (LDA) part; ``low_rank[c]`` is ``B_c`` (d, r_c)
    with ``B_c B_c^T = A^{-1} - S_c^{-1}``; ``means`` (C, d).
    """

    kind: str
    classes: tuple[str, ...]
    weight: np.ndarray  # (C, d) float32
    bias: np.ndarray  # (C,) float64
    means: np.ndarray  # (C, d) float32
    low_rank: tuple[np.ndarray, ...]  # C arrays (d, r_c) float32
    temperature: float = 1.0

    def __post_init__(self) -> None:
        for a in (self.weight, self.bias, self.means, *self.low_rank):
            a.setflags(write=False)

    def logits(self, features: np.ndarray) -> np.ndarray:
        """Uncalibrated logits (temperature not applied)."""
        x = np.asarray(features, np.float32)
        out = (x @ self.weight.T).astype(np.float64) + self.bias
        for c, b in enumerate(self.low_rank):
            if b.shape[1]:
                proj = (x - self.means[c]) @ b
                out[:, c] += 0.5 * np.einsum("ij,ij->i", proj, proj, dtype=np.float64)
        return out

    def scores(self, features: np.ndarray) -> np.ndarray:
        return softmax(self.logits(features) / self.temperature)

    def with_temperature(self, temperature: float) -> "BlendedSnapshot":
        return BlendedSnapshot(self.kind, self.classes, self.weight, self.bias, self.means, self.low_rank,
                               float(temperature))

    def renamed(self, classes: tuple[str, ...]) -> "BlendedSnapshot":
        return BlendedSnapshot(self.kind, classes, self.weight, self.bias, self.means, self.low_rank,
                               self.temperature)


def fit_blended_head(memory: ClusterMemory, shrinkage: float = 0.5, blend: float = 1.0,
                     moments: PooledMoments | None = None, temperature: float = 1.0,
                     shared: np.ndarray | None = None) -> BlendedSnapshot:
    """Closed-form per-class Gaussian head of ``memory`` (see the module docstring).

    ``blend`` (beta >= 0) weighs each class's own covariance against the pooled one (0: the
    :mod:`.gaussian` LDA head).  ``moments`` as in :func:`~.gaussian.fit_gaussian_head`; ``shared``
    (d, d) is added to the pooled covariance before shrinking (:func:`~.gaussian.shrunk_pooled`).
    """
    return fit_blended_head_factor(memory, shrinkage, blend, moments, temperature, shared)[0]


def fit_blended_head_factor(memory: ClusterMemory, shrinkage: float = 0.5, blend: float = 1.0,
                            moments: PooledMoments | None = None, temperature: float = 1.0,
                            shared: np.ndarray | None = None) -> tuple[BlendedSnapshot, tuple]:
    """:func:`fit_blended_head` and the Cholesky factor of ``A`` (for :func:`leave_one_out_logits`)."""
    if not blend >= 0.0 or not np.isfinite(blend):
        raise ValueError(f"blend must be a finite number >= 0, got {blend!r}")
    moments, factor, w, bias = shared_discriminant(memory, shrinkage, moments, shared)
    means = moments.means()
    low = tuple(_low_rank(factor, m.factor, blend) for m in moments.per_class)
    snap = BlendedSnapshot("blended", memory.classes, w.astype(np.float32), bias, means.astype(np.float32),
                           low, float(temperature))
    return snap, factor


def _low_rank(factor: tuple, cov_factor: np.ndarray, blend: float) -> np.ndarray:
    """``B`` with ``B B^T = A^{-1} - (A + blend F F^T)^{-1}`` (Woodbury), float32 (d, r)."""
    if blend == 0.0 or cov_factor.shape[1] == 0:
        return np.zeros((len(cov_factor), 0), np.float32)
    u = cov_factor * np.sqrt(blend)
    au = cho_solve(factor, u, check_finite=False)  # A^{-1} U
    lk = np.linalg.cholesky(np.eye(u.shape[1]) + u.T @ au)  # I + U^T A^{-1} U = L L^T
    return np.ascontiguousarray(np.linalg.solve(lk, au.T).T, np.float32)  # A^{-1} U L^{-T}


def leave_one_out_logits(memory: ClusterMemory, moments: PooledMoments, shrinkage: float, blend: float,
                         held: Mapping[str, np.ndarray], distance_threshold: float, max_held: int = 4,
                         seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Logits of taught shots under the head refitted without them (exact leave-one-out).

    ``held`` maps a class of ``memory`` to *all* the vectors it holds (a class taught from scratch
    in one call).  At most ``max_held`` shots in all (seeded, spread over the classes) are held out,
    one at a time: the class's moments are rebuilt from its other shots as the memory would
    (Agg-Var at ``distance_threshold``), the pooled covariance is updated to match, and the whole
    head is refitted (the held-out shot must leave the pooled covariance too, or its own deviation
    is whitened away and every held-out shot looks easy).  One ``d x d`` Cholesky per held-out
    shot.  Returns (n, C) logits and (n,) class indices (columns in ``memory.classes`` order).
    """
    rng = np.random.default_rng(seed)
    cand = [(c, i) for c, x in held.items() if len(x) >= 2 for i in range(len(x))]
    if not cand:
        return np.zeros((0, len(memory))), np.zeros(0, np.int64)
    pick = [cand[j] for j in rng.permutation(len(cand))[:max_held]]
    index = {c: k for k, c in enumerate(memory.classes)}
    rows, labels = [], []
    for c, i in pick:
        x = np.asarray(held[c], np.float64)
        k = index[c]
        rest = ClassClusters.empty(x.shape[1], memory.covariance).extend(np.delete(x, i, axis=0), distance_threshold)
        per = list(moments.per_class)
        per[k] = ClassMoment.of(rest)
        within = np.array(moments.within_sum)
        _sub_add(within, moments.per_class[k], per[k])
        loo = PooledMoments(memory.classes, tuple(per), within)
        snap, _ = fit_blended_head_factor(memory, shrinkage, blend, loo)
        rows.append(snap.logits(x[i:i + 1])[0])
        labels.append(k)
    return np.stack(rows), np.asarray(labels, np.int64)


def _sub_add(acc: np.ndarray, old: ClassMoment, new: ClassMoment) -> None:
    """``acc += W_new - W_old`` in place."""
    acc -= old.factor @ old.factor.T
    acc += new.factor @ new.factor.T
    idx = np.diag_indices(len(acc))
    if old.diag is not None:
        acc[idx] -= old.diag
    if new.diag is not None:
        acc[idx] += new.diag
