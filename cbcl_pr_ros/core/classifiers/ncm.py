"""Nearest class mean: each class is the count-weighted mean of its clusters.

Scores are the posterior of isotropic Gaussians with the memory's average per-feature variance,
which ranks exactly like the Euclidean distance to the class means and gives usable confidences.

>>> import numpy as np
>>> from cbcl_pr_ros.core.memory import ClusterMemory
>>> rng = np.random.default_rng(0)
>>> mem = ClusterMemory(4).with_taught({"a": rng.normal(0, 1, (6, 4)), "b": rng.normal(4, 1, (6, 4))}, 9.0)
>>> fit_ncm(mem).scores(np.zeros((1, 4))).argmax()
np.int64(0)
"""

from __future__ import annotations

import numpy as np

from ..memory import ClusterMemory
from .base import LinearSnapshot
from .gaussian import PooledMoments

__all__ = ["fit_ncm"]


def fit_ncm(memory: ClusterMemory, moments: PooledMoments | None = None) -> LinearSnapshot:
    """NCM head of ``memory``; ``moments`` (optional) are its :class:`PooledMoments`."""
    if moments is None:
        moments = PooledMoments.from_memory(memory)
    elif moments.classes != memory.classes:
        raise ValueError("moments are not of this memory's classes")
    means = moments.means()
    var = float(np.trace(moments.within_sum)) / max(len(memory), 1) / memory.feature_dim
    var = var if var > 0 else 1.0
    # -|x - m|^2 / (2 var) = (m.x - |m|^2 / 2) / var - |x|^2 / (2 var); the last term cancels in softmax
    w = means / var
    b = -0.5 * np.einsum("cd,cd->c", means, means) / var
    return LinearSnapshot("ncm", memory.classes, w.astype(np.float32), b.astype(np.float32))
