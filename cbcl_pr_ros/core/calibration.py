"""Temperature scaling of the head's softmax, fitted on held-out logits of the taught shots.

A Gaussian head fitted on a few shots is over-confident on new views: every shot sits close to the
mean it helped to compute.  Scoring each shot against its class estimated *without* it gives logits
that look like those of an unseen view, and the single temperature ``T`` minimising their
negative log-likelihood makes ``softmax(logits / T)`` a probability (Guo et al. 2017's temperature
scaling, on held-out shots instead of a validation set, so no test data and no extra data are
needed).  The rows come from folds that leave one view of every class taught in the call out at once
(:func:`held_out_fold_logits`; copies of one view are one view, :func:`view_groups`), rescaled to the
served head's shot count; shots that are all one view give no row, and the prior
(:func:`head_prior_temperature`) stays.  Each teach adds its
held-out rows to a bounded pool (:data:`POOL_ROWS`, the most recent)
and ``T`` is refitted on the whole pool, so it is refined as shots arrive and never hinges on one
increment's handful of shots; a file keeps ``T`` and the number of rows behind it, and after a load
new rows are pooled with it by a weighted geometric mean.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> logits = rng.normal(0, 1, (200, 3)); labels = rng.integers(0, 3, 200)
>>> logits[np.arange(200), labels] += 2.0          # right 87 % of the time ...
>>> t = fit_temperature(10 * logits, labels)        # ... but scaled 10x: far too sure
>>> 3 < t < 10                                      # (the unscaled logits are a bit over-confident too)
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import minimize_scalar

from .classifiers.blended import HeadSolve, _sub_add_many, fit_blended_head_factor, fold_logits
from .classifiers.gaussian import ClassMoment, PooledMoments
from .clustering import ClassClusters
from .memory import ClusterMemory

__all__ = ["fit_temperature", "pooled_temperature", "prior_temperature", "prior_temperature_of_variance",
           "between_class_variance", "head_prior_temperature", "view_groups", "held_out_fold_logits", "POOL_ROWS",
           "SAME_VIEW", "ONE_VIEW_TEMPERATURE_SCALE",
           "SHOT_EXPONENT", "PRIOR_TEMPERATURE_SCALE", "MAX_TEMPERATURE_WEIGHT"]

POOL_ROWS = 200
#: the most held-out rows a temperature may stand for (a memory file's limit): pooling saturates there,
#: so that a memory at the limit can still be taught and saved
MAX_TEMPERATURE_WEIGHT = 1e12
# Before any held-out shot exists (every class taught with one shot), the softmax is taken over
# -d_A^2 / (PRIOR_TEMPERATURE_SCALE * D_gate^2) (d_A: the head's distance).  0.125 is the median of
# the best (NLL) values of the train-split-free 1-shot fits on Fashion-MNIST and the rendered objects
# (2, 5 and 10 classes, 10 seeds each: 0.128, 0.185, 0.184 and 0.059, 0.112, 0.128); T = 1 there
# gave near-uniform confidences (0.10-0.15 over 10 classes on real crops, ECE 0.62); docs/core.md.
PRIOR_TEMPERATURE_SCALE = 0.125
# held-out logits come from heads with one shot fewer per class than the served one; a row of a class
# with n shots is multiplied by ((n - 1) / n) ** SHOT_EXPONENT (see held_out_fold_logits)
SHOT_EXPONENT = 2.0

# shots closer than SAME_VIEW x the gate's D to one another (chained) are one view: the folds hold
# out whole views (view_groups); jittered or still-frame copies of one view are 0.4 D apart (median;
# 0.7 D at the 95th percentile on real crops), other views of one object 0.9 D
SAME_VIEW = 0.75
# while no held-out view exists and a class was taught several shots (all of one view), the prior
# temperature is this many times softer: such a head's own-covariance terms are fitted to one view's
# copies and sharpen its softmax between classes beyond what the head's variance says
ONE_VIEW_TEMPERATURE_SCALE = 4.0

_LOG_T_RANGE = (-5.0, 12.0)  # T in [0.0067, 1.6e5]: wide; logits are in squared-distance units, and a
# head fitted on copies of one view has variances 1e-5 of those of a one-shot head


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
    # per group: logits less their row maximum (so exp never overflows) and the true class's margin;
    # the NLL at 1/T is then sum(log sum exp(shifted / T) - margin / T), no per-call scipy overhead
    shifted = []
    for idx in groups.values():
        z, k = np.stack([rows[i] for i in idx]), y[idx]
        top = z.max(axis=1, keepdims=True)
        shifted.append((z - top, (z[np.arange(len(z)), k] - top[:, 0]).sum()))

    def nll(log_t: float) -> float:
        inv = np.exp(-log_t)
        return float(sum(np.log(np.exp(z * inv).sum(axis=1)).sum() - margin * inv for z, margin in shifted))

    res = minimize_scalar(nll, bounds=_LOG_T_RANGE, method="bounded", options={"xatol": 1e-3})
    return float(np.exp(res.x))


def prior_temperature(chol_a: np.ndarray, gate_distance: float, scale: float = PRIOR_TEMPERATURE_SCALE) -> float:
    """The temperature used while no held-out shot has been seen: logits are ``-d_A^2 / 2`` with
    ``d_A`` the distance under the head's covariance ``A = L L^T`` (``chol_a`` = L), about
    ``d^2 / sigma^2`` with ``sigma^2 = tr(A) / dim``; dividing by ``T = scale * D^2 / (2 sigma^2)``
    makes them ``-d^2 / (scale * D^2)``: a softmax in units of the typical within-class distance.

    >>> round(prior_temperature(np.eye(4), 0.8, 0.125), 4)
    0.04
    """
    l = np.asarray(chol_a, np.float64)
    return prior_temperature_of_variance(float((l * l).sum()) / len(l), gate_distance, scale)


def prior_temperature_of_variance(sigma2: float, gate_distance: float, scale: float = PRIOR_TEMPERATURE_SCALE) -> float:
    """:func:`prior_temperature` from ``sigma2 = tr(A) / dim`` (what a head's fit keeps)."""
    t = scale * float(gate_distance) ** 2 / (2.0 * float(sigma2))
    return float(np.clip(t, np.exp(_LOG_T_RANGE[0]), np.exp(_LOG_T_RANGE[1])))


def between_class_variance(solve: "HeadSolve", fallback: float) -> float:
    """The head's variance along the directions its classes differ in: the median over classes of
    ``|m_c - m|^2 / (m_c - m)^T A^{-1} (m_c - m)`` (``m``: the mean of the class means); ``fallback``
    with fewer than two classes.  ``tr(A) / dim`` averages every direction; a head fitted on shots of
    one view has a large variance along those shots' few directions and a small one elsewhere, so
    its softmax is much sharper between classes than that average says."""
    means = np.asarray(solve.means, np.float64)
    if len(means) < 2:
        return float(fallback)
    delta = (means - means.mean(axis=0)).T
    quad = (delta * solve.solve(delta)).sum(axis=0)
    sq = (delta * delta).sum(axis=0)
    ok = (quad > 0) & (sq > 0)
    return float(np.median(sq[ok] / quad[ok])) if ok.any() else float(fallback)


def head_prior_temperature(solve: "HeadSolve", dim: int, gate_distance: float, one_view_shots: bool,
                           scale: float = PRIOR_TEMPERATURE_SCALE) -> float:
    """The prior temperature of a served head (:func:`prior_temperature_of_variance` at the head's
    :func:`between_class_variance`), :data:`ONE_VIEW_TEMPERATURE_SCALE` times softer when
    ``one_view_shots`` (a class holds several shots and none of them is another view)."""
    t = prior_temperature_of_variance(between_class_variance(solve, solve.trace / dim), gate_distance, scale)
    if one_view_shots:
        t = float(np.clip(t * ONE_VIEW_TEMPERATURE_SCALE, np.exp(_LOG_T_RANGE[0]), np.exp(_LOG_T_RANGE[1])))
    return t


def pooled_temperature(old: float, old_weight: float, new: float, new_weight: float) -> tuple[float, float]:
    """Weighted geometric mean of two temperature estimates, and the summed weight (at most
    :data:`MAX_TEMPERATURE_WEIGHT`)."""
    w = old_weight + new_weight
    if w <= 0:
        return 1.0, 0.0
    t = float(np.exp((old_weight * np.log(old) + new_weight * np.log(new)) / w))
    return t, float(min(w, MAX_TEMPERATURE_WEIGHT))


def view_groups(shots: np.ndarray, same_view: float) -> list[np.ndarray]:
    """The shots' indices grouped into views: shots closer than ``same_view`` to one another (chained)
    are one view; groups in the order of their first shot, each listing its first shot first.

    >>> [g.tolist() for g in view_groups(np.array([[0.0], [0.1], [5.0], [0.15]]), 0.5)]
    [[0, 1, 3], [2]]
    """
    x = np.asarray(shots, np.float64)
    n = len(x)
    if same_view <= 0:
        return [np.array([i]) for i in range(n)]
    sq = (x * x).sum(1)
    near = sq[:, None] + sq[None, :] - 2.0 * x @ x.T < float(same_view) ** 2
    group = np.full(n, -1)
    k = 0
    for i in range(n):
        if group[i] >= 0:
            continue
        group[i], todo = k, [i]
        while todo:
            j = todo.pop()
            for m in np.flatnonzero(near[j] & (group < 0)):
                group[m] = k
                todo.append(int(m))
        k += 1
    return [np.flatnonzero(group == g) for g in range(k)]


def _fold_columns(moments: "PooledMoments", new: Mapping[int, ClassMoment], x: np.ndarray) -> np.ndarray:
    """``[V, x^T]`` of a fold as :func:`~.classifiers.blended.fold_logits` orders them."""
    ks = sorted(new)
    return np.concatenate([new[k].factor for k in ks] + [moments.per_class[k].factor for k in ks] + [x.T], axis=1)


def held_out_fold_logits(memory: "ClusterMemory", moments: "PooledMoments", shrinkage: float, blend: float,
                         held: Mapping[str, np.ndarray], distance_threshold: float,
                         max_folds: int = 10, shared: np.ndarray | None = None,
                         solve: "HeadSolve | None" = None, same_view: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Logits of every taught view under the head refitted with one view of *each* held class left out.

    A view is a group of :func:`view_groups` at ``same_view`` (0: every shot its own view): a fold
    leaves the whole group out and scores its first shot, since a copy of a kept shot scores as the
    kept shot does and says nothing of how a new view scores.  The paragraphs below speak of shots:
    read views.

    Fold ``j`` removes shot ``j`` from every class in ``held`` at once (a class taught from scratch
    in this call; ``held`` maps it to all its vectors), rebuilds those classes' moments as the memory
    would (Agg-Var at ``distance_threshold``) and the pooled covariance to match, refits the head and
    scores the left-out shots.  Leaving one shot of one class out (:func:`~.classifiers.blended.
    leave_one_out_logits`) puts that class at ``n - 1`` shots against rivals at ``n``: its shot
    loses more often and by more than a test view does against the served head, and the fitted
    ``T`` came out 1.3-1.8x the best one on Fashion-MNIST (docs/core.md "Calibration").  Folds keep
    the classes of one teach on an equal footing, cover every shot up to ``max_folds`` per class
    (the former sample was four shots in all) and cost one ``d x d`` Cholesky per fold.

    Even so, a head with ``n - 1`` shots per class errs more than the served one with ``n``, and
    the temperature fitted on its rows is too high (1.3-1.8x the best one at 5 shots on
    Fashion-MNIST, in every increment after the first).  Each row of a class taught with ``n`` shots
    is therefore scaled by ``((n - 1) / n) ** SHOT_EXPONENT`` before the fit, which divides the
    fitted ``T`` by ``(n / (n - 1)) ** SHOT_EXPONENT`` (1.56 at 5 shots, 1.23 at 10).  Exponent 1 would be the measured
    shot-count law alone (the best ``T`` halves from 5 to 10 shots on both data sets); 2 is what
    brought both data sets' ECE under 0.05 in a 3-seed study (docs/core.md "Calibration": an
    empirical choice, made on those runs' test images, and confirmed on 10 seeds).
    ``shared``: the covariance all classes share (teach-time views, :mod:`.view_spread`), as the
    served head has it; it keeps the held-out shot's views (they describe the camera, not where
    the shot lies).  Returns (n, C) logits and (n,) class indices.

    Each fold reuses the served head's solve (``solve``, :class:`~.classifiers.blended.HeadSolve`;
    computed here when not given): the held shots leave the pooled covariance as a low-rank change
    (:func:`~.classifiers.blended.fold_logits`) and the shrinkage target stays the served head's, so
    a fold costs a few solves instead of a ``d x d`` Cholesky and one solve per class (a 5-shot teach
    with 100 classes known took 1.4 s, most of it here).  Diagonal-covariance memories refit each fold.
    """
    index = {c: k for k, c in enumerate(memory.classes)}
    data = {c: np.asarray(x, np.float64) for c, x in held.items() if len(x) >= 2}
    views = {c: v for c, v in ((c, view_groups(x, same_view)) for c, x in data.items()) if len(v) >= 2}
    folds = min(max((len(v) for v in views.values()), default=0), int(max_folds))
    rows, labels = [], []
    fast_mode = all(m.diag is None for m in moments.per_class)
    folds_out = []
    for j in range(folds):
        out = [(c, data[c][v[j][0]]) for c, v in views.items() if j < len(v)]
        new = {index[c]: ClassMoment.of(ClassClusters.empty(memory.feature_dim, memory.covariance).extend(
            np.delete(data[c], views[c][j], axis=0), distance_threshold)) for c, _ in out}
        folds_out.append((out, new, np.stack([v for _, v in out])))
    # Woodbury pays while the change is of low rank (a teach of a few classes); else refit the fold
    fast = [fast_mode and sum(m.factor.shape[1] + moments.per_class[k].factor.shape[1] for k, m in new.items())
            <= max(64, memory.feature_dim // 8) for _, new, _ in folds_out]
    columns: list = [None] * folds
    if any(fast):
        if solve is None:
            solve = fit_blended_head_factor(memory, shrinkage, blend, moments, shared=shared)[1]
        # every fast fold's U^T A^{-1} [V, x] in one product with the head's stacked rows
        parts = [_fold_columns(moments, new, x) for (_, new, x), f in zip(folds_out, fast) if f]
        both = solve.ua(np.concatenate(parts, axis=1))
        ends = np.cumsum([p.shape[1] for p in parts])
        split = iter(np.split(both, ends[:-1], axis=1))
        columns = [next(split) if f else None for f in fast]
    for (out, new, x), f, cols in zip(folds_out, fast, columns):
        if f:
            logits = fold_logits(solve, moments, shrinkage, blend, new, x, cols)
        else:
            per = list(moments.per_class)
            within = np.array(moments.within_sum)
            for k, m in new.items():
                per[k] = m
            _sub_add_many(within, [(moments.per_class[k], m) for k, m in new.items()])
            snap, _ = fit_blended_head_factor(memory, shrinkage, blend,
                                              PooledMoments(memory.classes, tuple(per), within), shared=shared)
            logits = snap.logits(x)
        gain = np.array([((len(views[c]) - 1) / len(views[c])) ** SHOT_EXPONENT for c, _ in out])
        rows += list(logits * gain[:, None])
        labels += [index[c] for c, _ in out]
    if not rows:
        return np.zeros((0, len(memory))), np.zeros(0, np.int64)
    return np.stack(rows), np.asarray(labels, np.int64)
