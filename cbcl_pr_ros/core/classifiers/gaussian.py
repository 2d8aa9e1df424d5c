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

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ..memory import ClusterMemory
from .base import LinearSnapshot

__all__ = ["fit_gaussian_head", "class_moments"]


def class_moments(memory: ClusterMemory) -> tuple[np.ndarray, np.ndarray]:
    """Class means (C, d) and the class-balanced pooled within-class covariance (d, d)."""
    d = memory.feature_dim
    n_cls = len(memory)
    means = np.zeros((n_cls, d))
    cols: list[np.ndarray] = []
    diag = np.zeros(d)
    for ci, (_, cc) in enumerate(memory.items()):
        n = cc.counts.astype(np.float64)
        total = n.sum()
        mu_k = cc.means.astype(np.float64)
        mu = (n[:, None] * mu_k).sum(axis=0) / total
        means[ci] = mu
        cols.append(((mu_k - mu) * np.sqrt(n / (total * n_cls))[:, None]).T)
        for k in range(cc.n_clusters):
            if n[k] < 2:
                continue
            w = n[k] / (total * (n[k] - 1) * n_cls)
            s = cc.scatter(k)
            if cc.mode == "full":
                cols.append(s * np.sqrt(w))
            else:
                diag += s * w
    f = np.concatenate(cols, axis=1) if cols else np.zeros((d, 0))
    cov = f @ f.T
    cov[np.diag_indices(d)] += diag
    return means, cov


def fit_gaussian_head(memory: ClusterMemory, shrinkage: float = 0.5) -> LinearSnapshot:
    """Closed-form linear head of ``memory``; see the module docstring."""
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must be in [0, 1], got {shrinkage!r}")
    means, cov = class_moments(memory)
    d = memory.feature_dim
    scale = np.trace(cov) / d
    if scale <= 0:  # one shot per class everywhere: no spread known; isotropic unit covariance
        cov, scale, shrinkage = np.eye(d), 1.0, 1.0
    cov *= 1.0 - shrinkage
    cov[np.diag_indices(d)] += shrinkage * scale
    factor = cho_factor(cov, lower=True, check_finite=False)
    w = cho_solve(factor, means.T, check_finite=False).T  # (C, d)
    b = -0.5 * np.einsum("cd,cd->c", w, means)
    return LinearSnapshot("gaussian", memory.classes, w.astype(np.float32), b.astype(np.float32))
