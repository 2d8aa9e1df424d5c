"""Temperature scaling of the head's softmax, fitted on leave-one-out logits of the taught shots.

A Gaussian head fitted on a few shots is over-confident on new views: every shot sits close to the
mean it helped to compute.  Scoring each shot against its class estimated *without* it gives logits
that look like those of an unseen view, and the single temperature ``T`` minimising their
negative log-likelihood makes ``softmax(logits / T)`` a probability (Guo et al. 2017's temperature
scaling, on held-out shots instead of a validation set, so no test data and no extra data are
needed).  Each teach adds a few held-out rows to a bounded pool (:data:`POOL_ROWS`, the most recent)
and ``T`` is refitted on the whole pool, so it is refined as shots arrive and never hinges on one
increment's handful of shots; a file keeps ``T`` and the number of rows behind it, and after a load
new rows are pooled with it by a weighted geometric mean.

>>> from collections.abc import Sequence

import numpy as np
>>> rng = np.random.default_rng(0)
>>> logits = rng.normal(0, 1, (200, 3)); labels = rng.integers(0, 3, 200)
>>> logits[np.arange(200), labels] += 2.0          # right 87 % of the time ...
>>> t = fit_temperature(10 * logits, labels)        # ... but scaled 10x: far too sure
>>> 3 < t < 10                                      # (the unscaled logits are a bit over-confident too)
True
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

__all__ = ["fit_temperature", "pooled_temperature", "POOL_ROWS"]

POOL_ROWS = 200

_LOG_T_RANGE = (-5.0, 7.0)  # T in [0.0067, 1097]: wide; logits are in squared-distance units


def fit_temperature(logits: np.ndarray | Sequence[np.ndarray], labels: np.ndarray | Sequence[int]) -> float:
    """The ``T > 0`` minimising the mean NLL of ``softmax(logits / T)`` at ``labels`` (column indices).

    ``logits`` is an (n, C) array or a sequence of 1-d rows of any lengths (heads of different
    increments have different numbers of classes).
    """
    rows = [np.asarray(r, np.float64).ravel() for r in logits]
    y = np.asarray(labels, np.int64).ravel()
    if not rows or len(rows) != len(y):
        raise ValueError(f"need n >= 1 logit rows and as many labels, got {len(rows)} and {len(y)}")
    if any(not 0 <= k < len(r) for r, k in zip(rows, y)) or not all(np.isfinite(r).all() for r in rows):
        raise ValueError("labels must index their logit rows, and logits must be finite")
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(len(r), []).append(i)
    stacked = [(np.stack([rows[i] for i in idx]), y[idx]) for idx in groups.values()]

    def nll(log_t: float) -> float:
        inv = np.exp(-log_t)
        return float(sum(np.sum(logsumexp(z * inv, axis=1) - z[np.arange(len(z)), k] * inv) for z, k in stacked))

    res = minimize_scalar(nll, bounds=_LOG_T_RANGE, method="bounded", options={"xatol": 1e-3})
    return float(np.exp(res.x))


def pooled_temperature(old: float, old_weight: float, new: float, new_weight: float) -> tuple[float, float]:
    """Weighted geometric mean of two temperature estimates, and the summed weight."""
    w = old_weight + new_weight
    if w <= 0:
        return 1.0, 0.0
    return float(np.exp((old_weight * np.log(old) + new_weight * np.log(new)) / w)), float(w)
