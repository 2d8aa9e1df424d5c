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
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from ..clustering import ClassClusters
from ..memory import ClusterMemory
from .base import softmax
from .gaussian import ClassMoment, PooledMoments, pd_cholesky, shrunk_pooled

__all__ = ["PREFILTER_CLASSES", "PREFILTER_MIN_CLASSES", "BlendedSnapshot", "HeadSolve", "fit_blended_head", "fit_blended_head_factor", "fold_logits",
           "leave_one_out_logits"]


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
        # every class's B_c^T stacked row-wise (class c in rows bounds[c]:bounds[c + 1]), so that scoring
        # is one matrix product for all classes, or a gather of a few classes' rows (:meth:`scores`)
        d = self.weight.shape[1]
        ranks = np.array([b.shape[1] for b in self.low_rank], np.int64)
        bounds = np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64)
        rows = (np.concatenate([b.T for b in self.low_rank], axis=0) if int(bounds[-1])
                else np.zeros((0, d), np.float32))
        rows = np.ascontiguousarray(rows, np.float32)
        owner = np.repeat(np.arange(len(ranks)), ranks)
        offset = np.einsum("rd,rd->r", rows, self.means[owner]) if len(owner) else np.zeros(0, np.float32)
        for name, a in (("_rows", rows), ("_offset", offset.astype(np.float32)), ("_bounds", bounds)):
            a.setflags(write=False)
            object.__setattr__(self, name, a)

    def logits(self, features: np.ndarray) -> np.ndarray:
        """Uncalibrated logits (temperature not applied), every class's own-covariance term exact."""
        x = np.asarray(features, np.float32)
        out = (x @ self.weight.T).astype(np.float64) + self.bias
        if len(self._rows):
            proj = (x @ self._rows.T - self._offset).astype(np.float64)  # B_c^T (x - m_c), all classes at once
            out += 0.5 * _segment_sums(proj * proj, self._bounds)
        return out

    def frame_logits(self, features: np.ndarray) -> np.ndarray:
        """:meth:`logits` as a frame's scoring computes them: with more than ``PREFILTER_MIN_CLASSES``
        classes, each vector's own-covariance terms only for its ``PREFILTER_CLASSES`` best classes
        by the shared part (their ``B_c`` rows gathered), the others keep the shared part alone (a
        lower bound: the own term is >= 0).  The cost then grows with the classes by one ``C x d``
        product instead of ``sum_c r_c x d``: 6 vectors against 1000 five-shot classes read about 8 MB
        instead of 31 MB (docs/core.md "Many classes on a busy machine")."""
        x = np.asarray(features, np.float32)
        n, c = len(x), len(self.classes)
        if c <= PREFILTER_MIN_CLASSES or not len(self._rows) or n == 0:
            return self.logits(x)
        out = (x @ self.weight.T).astype(np.float64) + self.bias
        k = PREFILTER_CLASSES
        cand = np.argpartition(-out, k - 1, axis=1)[:, :k].ravel()  # (n k,), vector-major
        lo, lens = self._bounds[cand], self._bounds[cand + 1] - self._bounds[cand]
        ends = np.cumsum(lens)
        total = int(ends[-1]) if len(ends) else 0
        if total == 0:
            return out
        rows = np.repeat(lo - (ends - lens), lens) + np.arange(total)  # every candidate's rows, in order
        vec = np.repeat(np.repeat(np.arange(n), k), lens)  # the vector each gathered row is scored for
        proj = (self._rows[rows] @ x.T)[np.arange(total), vec] - self._offset[rows]
        sq = np.concatenate([[0.0], np.cumsum(proj.astype(np.float64) ** 2)])
        own = 0.5 * (sq[ends] - sq[ends - lens]).reshape(n, k)
        # the other classes' own terms are not computed: each gets the median of the vector's computed ones
        out += np.median(own, axis=1, keepdims=True)
        out[np.repeat(np.arange(n), k), cand] += (own - np.median(own, axis=1, keepdims=True)).ravel()
        return out

    def scores(self, features: np.ndarray) -> np.ndarray:
        return softmax(self.frame_logits(features) / self.temperature)

    def with_temperature(self, temperature: float) -> "BlendedSnapshot":
        return self._sharing(temperature=float(temperature))

    def renamed(self, classes: tuple[str, ...]) -> "BlendedSnapshot":
        if len(classes) != len(self.classes):
            raise ValueError(f"{len(classes)} names for {len(self.classes)} classes")
        return self._sharing(classes=tuple(classes))

    def _sharing(self, **changes: Any) -> "BlendedSnapshot":
        """A copy with ``changes`` that shares the stacked rows (stacking them again cost 0.2-0.8 s of
        a teach with 1000 classes known)."""
        new = object.__new__(BlendedSnapshot)
        for name, value in {**self.__dict__, **changes}.items():
            object.__setattr__(new, name, value)
        return new


def fit_blended_head(memory: ClusterMemory, shrinkage: float = 0.5, blend: float = 1.0,
                     moments: PooledMoments | None = None, temperature: float = 1.0,
                     shared: np.ndarray | None = None) -> BlendedSnapshot:
    """Closed-form per-class Gaussian head of ``memory`` (see the module docstring).

    ``blend`` (beta >= 0) weighs each class's own covariance against the pooled one (0: the
    :mod:`.gaussian` LDA head).  ``moments`` as in :func:`~.gaussian.fit_gaussian_head`; ``shared``
    (d, d) is added to the pooled covariance before shrinking (:func:`~.gaussian.shrunk_pooled`).
    """
    return fit_blended_head_factor(memory, shrinkage, blend, moments, temperature, shared)[0]


#: a frame's scoring computes each vector's own-covariance terms for its this many best classes by
#: the shared (LDA) part, once there are more than ``PREFILTER_MIN_CLASSES`` (:meth:`BlendedSnapshot.
#: frame_logits`); the argmax it gives and the exact one were measured against each other on 1000
#: classes (docs/core.md "Many classes on a busy machine")
PREFILTER_CLASSES = 16
PREFILTER_MIN_CLASSES = 64


def _segment_sums(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """(n, C) sums of ``values`` (n, R) over the column ranges ``bounds[c]:bounds[c + 1]`` (empty ones 0)."""
    cs = np.zeros((len(values), values.shape[1] + 1))
    np.cumsum(values, axis=1, out=cs[:, 1:])
    return cs[:, bounds[1:]] - cs[:, bounds[:-1]]


#: dtype of the triangular solves with ``A``'s Cholesky factor (the factor itself is float64): the
#: solved vectors are stored in float32 anyway, and a triangular solve's error grows with the
#: factor's condition number, the square root of ``A``'s (shrinkage keeps it small)
SOLVE_DTYPE = np.float32


@dataclass(frozen=True)
class HeadSolve:
    """What fitting the head solved, kept for the calibration folds (:func:`fold_logits`).

    ``chol``: the lower Cholesky factor of ``A`` (float64); ``u`` (d, R): every class's ``U_c =
    sqrt(blend) F_c`` side by side, class ``c`` in columns ``bounds[c]:bounds[c + 1]``; ``au`` = ``A^{-1} u``;
    ``gram[c]`` = ``U_c^T A^{-1} U_c``; ``w`` (C, d) = ``A^{-1} m_c`` of the ``means`` (C, d).
    """

    chol: np.ndarray
    u: np.ndarray
    au: np.ndarray
    bounds: np.ndarray
    gram: tuple[np.ndarray, ...]
    w: np.ndarray
    means: np.ndarray

    def column_terms(self) -> tuple[np.ndarray, np.ndarray]:
        """(R,) ``U_c^T w_c`` per column of ``u`` and (C, r, r) every ``gram[c]`` padded to the largest
        rank: the same for every calibration fold, so computed once (per fold they were an (R, d)
        gather and a loop over the classes: most of a fold's time with 1000 classes)."""
        cached = self.__dict__.get("_column_terms")
        if cached is None:
            ranks = np.diff(self.bounds)
            owner = np.repeat(np.arange(len(ranks)), ranks)
            uw = np.zeros(self.u.shape[1])
            for lo in range(0, len(owner), 512):  # a few hundred columns at a time: no (R, d) copy
                hi = min(len(owner), lo + 512)
                uw[lo:hi] = np.einsum("dr,rd->r", self.u[:, lo:hi], self.w[owner[lo:hi]])
            r = int(ranks.max(initial=0))
            g = np.zeros((len(ranks), r, r))
            for e in np.flatnonzero(ranks):
                g[e, :ranks[e], :ranks[e]] = self.gram[e]
            cached = (uw, g)
            object.__setattr__(self, "_column_terms", cached)
        return cached

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``A^{-1} rhs`` (float64) for a (d, k) ``rhs``: two triangular solves on the stored factor,
        in ``SOLVE_DTYPE``."""
        chol = self.chol if self.chol.dtype == SOLVE_DTYPE else self.__dict__.get("_chol_cast")
        if chol is None:
            chol = np.asfortranarray(self.chol, SOLVE_DTYPE)
            object.__setattr__(self, "_chol_cast", chol)
        y = solve_triangular(chol, np.asarray(rhs, SOLVE_DTYPE), lower=True, check_finite=False)
        y = solve_triangular(chol, y, lower=True, trans="T", check_finite=False, overwrite_b=True)
        return y.astype(np.float64, copy=False)


def fit_blended_head_factor(memory: ClusterMemory, shrinkage: float = 0.5, blend: float = 1.0,
                            moments: PooledMoments | None = None, temperature: float = 1.0,
                            shared: np.ndarray | None = None) -> tuple[BlendedSnapshot, HeadSolve]:
    """:func:`fit_blended_head` and what it solved (:class:`HeadSolve`, for the calibration folds).

    One Cholesky of ``A`` and one pair of triangular solves for all classes' means and low-rank
    factors together (a solve per class was most of a teach's time at 100 classes).
    """
    if not blend >= 0.0 or not np.isfinite(blend):
        raise ValueError(f"blend must be a finite number >= 0, got {blend!r}")
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must be in [0, 1], got {shrinkage!r}")
    if moments is None:
        moments = PooledMoments.from_memory(memory)
    elif moments.classes != memory.classes:
        raise ValueError(f"moments are of classes {moments.classes[:5]}..., not of this memory's")
    means = moments.means()
    d, c = memory.feature_dim, len(means)
    chol = pd_cholesky(shrunk_pooled(moments, shrinkage, shared))
    ranks = [m.factor.shape[1] if blend > 0 else 0 for m in moments.per_class]
    u = (np.concatenate([m.factor for m in moments.per_class], axis=1) * np.sqrt(blend)
         if sum(ranks) else np.zeros((d, 0)))
    bounds = np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64)
    solve = HeadSolve(chol, u, np.zeros((d, 0)), bounds, (), np.zeros((0, d)), means)
    sol = solve.solve(np.concatenate([means.T, u], axis=1))
    w, au = sol[:, :c].T, sol[:, c:]
    gram = tuple(u[:, lo:hi].T @ au[:, lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:]))
    solve = HeadSolve(chol, u, au, bounds, gram, w, means)
    low = tuple(_low_rank(au[:, lo:hi], g) for lo, hi, g in zip(bounds[:-1], bounds[1:], gram))
    bias = -0.5 * np.einsum("cd,cd->c", w, means)
    snap = BlendedSnapshot("blended", memory.classes, w.astype(np.float32), bias, means.astype(np.float32),
                           low, float(temperature))
    return snap, solve


def _low_rank(au: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """``B`` with ``B B^T = A^{-1} - (A + U U^T)^{-1}`` (Woodbury) from ``A^{-1} U`` and ``U^T A^{-1} U``."""
    if au.shape[1] == 0:
        return np.zeros((len(au), 0), np.float32)
    lk = np.linalg.cholesky(np.eye(len(gram)) + gram)  # I + U^T A^{-1} U = L L^T
    return np.ascontiguousarray(solve_triangular(lk, au.T, lower=True, check_finite=False).T, np.float32)


def fold_logits(solve: HeadSolve, moments: PooledMoments, shrinkage: float, blend: float,
                replaced: Mapping[int, ClassMoment], x: np.ndarray) -> np.ndarray:
    """(n, C) logits of ``x`` under the head with the classes ``replaced`` (index -> new moment),
    from the served fit's :class:`HeadSolve` instead of a new ``d x d`` Cholesky.

    The pooled covariance loses the replaced classes' old moments and gains their new ones, a
    low-rank change of ``A`` applied by Woodbury; the shrinkage target ``a tr(S)/d I`` stays the
    served head's (the only approximation: a held-out shot moves that trace by about 1/C of its
    class's share).  Full-covariance moments only (``diag`` None).
    """
    x = np.atleast_2d(np.asarray(x, np.float64))
    c, sq = len(solve.means), np.sqrt(blend)
    ks = sorted(replaced)
    new_f = [replaced[k].factor for k in ks]
    old_f = [moments.per_class[k].factor for k in ks]
    v = np.concatenate(new_f + old_f, axis=1)
    n_new = sum(f.shape[1] for f in new_f)
    sign = np.r_[np.ones(n_new), -np.ones(v.shape[1] - n_new)]
    means, w = solve.means.copy(), solve.w.copy()
    means[ks] = [replaced[k].mean for k in ks]
    sol = solve.solve(np.concatenate([v, means[ks].T, x.T], axis=1))
    k = v.shape[1]
    av, w[ks], z = sol[:, :k], sol[:, k:k + len(ks)].T, sol[:, k + len(ks):].T
    scale = (1.0 - shrinkage) / c
    minv = None
    shift = None  # (k, C): w_c moved by -AV shift[:, c]
    if scale > 0 and k:  # A_f^{-1} y = A^{-1} y - AV M^{-1} AV^T y,  M = (scale J)^{-1} + V^T A^{-1} V
        minv = np.linalg.inv(np.diag(sign / scale) + v.T @ av)
        shift = minv @ (av.T @ means.T)
        w -= (av @ shift).T
        z -= (av @ (minv @ (av.T @ x.T))).T
    out = x @ w.T - 0.5 * np.einsum("cd,cd->c", w, means)
    if blend <= 0:
        return out
    # the other classes keep their U_c and U_c^T A^{-1} U_c: all of them in one batch, padded to the
    # largest rank (a padded column is zero, its Gram block the identity)
    bounds = solve.bounds
    ranks = np.diff(bounds)
    ranks[ks] = 0
    r = int(ranks.max(initial=0))
    if r:
        idx = bounds[:-1, None] + np.arange(r)[None, :]
        mask = np.arange(r)[None, :] < ranks[:, None]
        idx = np.where(mask, idx, 0)
        owner = np.repeat(np.arange(c), np.diff(bounds))
        # U_c^T w_c from the served fit's (kept on the solve: the same for every fold) and the low-rank
        # shift (the replaced classes' columns are masked out below)
        uw, g_all = solve.column_terms()
        uav = av.T @ solve.u  # (k, R)
        if shift is not None:
            uw = uw - np.einsum("kr,kr->r", uav, shift[:, owner])
        p_flat = solve.u.T @ z.T - uw[:, None]  # U_c^T (z - w_c)
        p = p_flat[idx] * mask[..., None]
        g = g_all[:, :r, :r] * (mask[:, :, None] & mask[:, None, :])
        if minv is not None:
            q = uav[:, idx] * mask[None]  # (k, C, r)
            g -= np.einsum("kcr,kl,lcs->crs", q, minv, q)
        t = np.linalg.solve(np.linalg.cholesky(g + np.eye(r)), p)
        out += 0.5 * np.einsum("crn,crn->nc", t, t)
    n_cols = [f.shape[1] for f in new_f]
    for i, e in enumerate(ks):  # the replaced classes, with their new factors
        if not n_cols[i]:
            continue
        lo = sum(n_cols[:i])
        u = sq * new_f[i]
        gram = u.T @ (sq * av[:, lo:lo + n_cols[i]])
        if minv is not None:
            q = av.T @ u
            gram = gram - q.T @ minv @ q
        lk = np.linalg.cholesky(np.eye(len(gram)) + gram)
        t = solve_triangular(lk, u.T @ (z - w[e]).T, lower=True, check_finite=False)
        out[:, e] += 0.5 * np.einsum("rn,rn->n", t, t)
    return out


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
    _sub_add_many(acc, [(old, new)])


def _sub_add_many(acc: np.ndarray, pairs: list[tuple[ClassMoment, ClassMoment]]) -> None:
    """``acc += sum(W_new - W_old)`` over (old, new) pairs in place: two products in all (a d x d
    product per class was most of a many-class teach's calibration: 50 s for 200 classes)."""
    for side, sign in ((1, 1.0), (0, -1.0)):
        f = [p[side].factor for p in pairs if p[side].factor.shape[1]]
        if f:
            stacked = np.concatenate(f, axis=1) if len(f) > 1 else f[0]
            acc += sign * (stacked @ stacked.T)
        diags = [p[side].diag for p in pairs if p[side].diag is not None]
        if diags:
            idx = np.diag_indices(len(acc))
            acc[idx] += sign * np.sum(diags, axis=0)
