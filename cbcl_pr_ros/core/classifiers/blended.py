"""Default head: one Gaussian per class, its covariance the shrunk pooled one plus its own scatter.

Class ``c`` is scored by ``-0.5 (x - m_c)^T S_c^{-1} (x - m_c)`` with ``S_c = A + beta W_c``: ``A`` is
the class-balanced pooled within-class covariance shrunk towards a scaled identity (the
:mod:`.gaussian` head's matrix) and ``W_c`` the class's own within-class covariance, both exact from
the cluster memory's moments.  With one shot per class everything is ``A`` (nearest mean in the
transformed space); as shots arrive each class's own spread widens its Gaussian along the directions
it actually varies in (the FeCAM idea, computed from Agg-Var's stored moments instead of the raw
features).  ``W_c`` has rank at most the class's shots, so ``S_c^{-1}`` is applied by Woodbury:
one ``d x d`` Cholesky for ``A`` and an ``r x r`` system per class, and scoring costs a linear layer
plus ``sum_c r_c`` extra dot products.  The term ``x^T A^{-1} x`` is common to every class and left
out of the logits (it cancels in the softmax and the argmax).

Many classes: above ``ANCHOR_MIN_CLASSES`` the class count and mean variance that scale ``A`` move
on a grid (:func:`pooled_anchor`), so that teaching, reteaching or forgetting a few classes changes
``A`` by their scatter alone.  That change is applied to the served fit as a low-rank update
(:func:`fit_blended_head_factor` with ``previous``): a teach then costs ``O((C + R) d k)`` for the
kept classes instead of a new factor and a solve for every class, and gives the full fit's head to
rounding.

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

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from cbcl_pr_ros.plurals import counted

from ..clustering import ClassClusters
from ..memory import ClusterMemory
from .base import softmax
from .gaussian import ClassMoment, PooledMoments, pd_cholesky

__all__ = ["ANCHOR_MIN_CLASSES", "PREFILTER_CLASSES", "PREFILTER_MIN_CLASSES", "BlendedSnapshot", "HeadSolve",
           "anchored_pooled", "fit_blended_head", "fit_blended_head_factor", "fold_logits", "leave_one_out_logits",
           "pooled_anchor"]


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
        # every class's B_c^T stacked row-wise (class c in rows bounds[c]:bounds[c + 1]), so that scoring
        # is one matrix product for all classes, or a gather of a few classes' rows (:meth:`scores`)
        d = self.weight.shape[1]
        ranks = np.array([b.shape[1] for b in self.low_rank], np.int64)
        bounds = np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64)
        rows = (np.concatenate([b.T for b in self.low_rank], axis=0) if int(bounds[-1])
                else np.zeros((0, d), np.float32))
        self._stacked(np.ascontiguousarray(rows, np.float32), bounds)

    def _stacked(self, rows: np.ndarray, bounds: np.ndarray) -> None:
        # stored column-major: ``x @ weight.T`` then reads a row-major (d, C) matrix, which one BLAS
        # thread multiplied 2.5x faster than the transposed view of a row-major (C, d) one
        object.__setattr__(self, "weight", np.asfortranarray(self.weight))
        for a in (self.weight, self.bias, self.means, *self.low_rank):
            a.setflags(write=False)
        owner = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
        offset = np.zeros(len(rows), np.float32)
        for lo in range(0, len(rows), 4096):  # B_c^T m_c, a few thousand rows at a time: no (R, d) gather
            hi = min(len(rows), lo + 4096)
            offset[lo:hi] = np.einsum("rd,rd->r", rows[lo:hi], self.means[owner[lo:hi]])
        for name, a in (("_rows", rows), ("_offset", offset), ("_bounds", bounds)):
            a.setflags(write=False)
            object.__setattr__(self, name, a)

    @classmethod
    def of_rows(cls, classes: tuple[str, ...], weight: np.ndarray, bias: np.ndarray, means: np.ndarray,
                rows: np.ndarray, bounds: np.ndarray, temperature: float = 1.0) -> "BlendedSnapshot":
        """The head with its ``B_c^T`` given stacked (R, d) float32, class ``c`` in rows
        ``bounds[c]:bounds[c + 1]`` (what the fit computes; no per-class arrays to stack again)."""
        rows.setflags(write=False)
        low = tuple(rows[lo:hi].T for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()))
        new = object.__new__(cls)
        for name, value in (("kind", "blended"), ("classes", tuple(classes)), ("weight", weight), ("bias", bias),
                            ("means", means), ("low_rank", low), ("temperature", float(temperature))):
            object.__setattr__(new, name, value)
        new._stacked(rows, bounds)
        return new

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
        by the shared part (their ``B_c`` rows gathered); the others get the median of the vector's
        computed own terms, so no class is ranked on its shared part alone.  The cost then grows with the classes by one ``C x d``
        product instead of ``sum_c r_c x d``: 6 vectors against 1000 five-shot classes read about 8 MB
        instead of 31 MB (docs/core.md "Many classes on a busy machine")."""
        return self._frame(features)[0]

    def frame_scores(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`scores` and, with more than ``PREFILTER_MIN_CLASSES`` classes, the (n, k) columns
        whose own terms were computed, k distinct ones a row (None otherwise): a row's best k lie
        among the columns scoring at least the lowest of them, a cheaper search than all columns."""
        logits, cand = self._frame(features)
        logits /= self.temperature
        return softmax(logits), cand

    def _frame(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        x = np.asarray(features, np.float32)
        n, c = len(x), len(self.classes)
        if c <= PREFILTER_MIN_CLASSES or not len(self._rows) or n == 0:
            return self.logits(x), None
        out = _shared_product(x, self.weight).astype(np.float64)
        out += self.bias
        k = PREFILTER_CLASSES
        cand = np.argpartition(-out, k - 1, axis=1)[:, :k]
        # every vector's candidates' rows in one gather (vector i's in one block, its classes in the
        # order of ``cand[i]``), then one matrix-vector product per vector on its own block: six
        # small gathers cost twice one gather of the same rows, and a product of every vector with
        # every gathered row would be six times the work
        lo = self._bounds[cand].ravel()
        lens = self._bounds[cand + 1].ravel() - lo
        ends = np.cumsum(lens)
        rows = np.repeat(lo - (ends - lens), lens) + np.arange(int(ends[-1]))
        picked = np.take(self._rows, rows, axis=0)
        proj = np.empty(len(rows), np.float32)
        cut = np.concatenate([[0], ends[k - 1::k]]).tolist()
        for i in range(n):
            np.matmul(picked[cut[i]:cut[i + 1]], x[i], out=proj[cut[i]:cut[i + 1]])
        proj -= self._offset[rows]
        sq = np.zeros(len(proj) + 1)
        np.cumsum(np.square(proj, dtype=np.float64), out=sq[1:])
        own = 0.5 * (sq[ends] - sq[ends - lens]).reshape(n, k)
        # the other classes' own terms are not computed: each gets the median of the vector's computed ones
        mid = np.sort(own, axis=1)
        med = mid[:, k // 2] if k % 2 else (mid[:, k // 2 - 1] + mid[:, k // 2]) / 2.0
        own -= med[:, None]
        out += med[:, None]
        flat = (cand + (np.arange(n) * c)[:, None]).ravel()
        out.ravel()[flat] += own.ravel()
        return out, cand

    def scores(self, features: np.ndarray) -> np.ndarray:
        return self.frame_scores(features)[0]

    def with_temperature(self, temperature: float) -> "BlendedSnapshot":
        return self._sharing(temperature=float(temperature))

    def renamed(self, classes: tuple[str, ...]) -> "BlendedSnapshot":
        if len(classes) != len(self.classes):
            raise ValueError(f"{counted(len(classes), 'name')} for {counted(len(self.classes), 'class')}")
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


#: a frame's shared product ``x @ weight.T`` is taken in blocks of classes of at most this many
#: multiply-adds (vectors x classes x width): OpenBLAS multiplies a product that small without first
#: copying the weights into its packed layout; 6 vectors x 1000 classes x 1280 in blocks of 128
#: classes took 0.18 ms of one core against 0.35 ms as one product (docs/core.md "A frame of many classes")
SMALL_PRODUCT = 1_000_000


def _shared_product(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``x @ weight.T`` (n, C) float32, in blocks of classes when a block of 16 or more classes
    keeps under ``SMALL_PRODUCT`` (a single vector is one matrix-vector product anyway)."""
    n, d = x.shape
    c = len(weight)
    step = SMALL_PRODUCT // max(n * d, 1) // 16 * 16  # a multiple of 16 classes: aligned blocks
    if n < 2 or step < 16 or step >= c:
        return x @ weight.T
    out = np.empty((n, c), np.float32)
    for lo in range(0, c, step):
        np.matmul(x, weight[lo:lo + step].T, out=out[:, lo:lo + step])
    return out


def _segment_sums(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """(n, C) sums of ``values`` (n, R) over the column ranges ``bounds[c]:bounds[c + 1]`` (empty ones 0)."""
    cs = np.zeros((len(values), values.shape[1] + 1))
    np.cumsum(values, axis=1, out=cs[:, 1:])
    return cs[:, bounds[1:]] - cs[:, bounds[:-1]]


#: dtype of the triangular solves with ``A``'s Cholesky factor: the solved vectors are stored in
#: float32 anyway, and a triangular solve's error grows with the factor's condition number, the
#: square root of ``A``'s (shrinkage keeps it small)
SOLVE_DTYPE = np.float32

#: Up to this many classes the pooled covariance is the class-balanced mean ``W / C`` shrunk towards
#: ``tr(S)/d I``.  Above it, ``C`` and ``tr(S)/d`` are taken on a grid (``C`` down to the nearest
#: ``ANCHOR_MIN_CLASSES * ANCHOR_COUNT_STEP**k``, the variance to the nearest power of
#: ``ANCHOR_VARIANCE_STEP``): between two grid points a teach changes ``A`` by its classes' scatter
#: alone, a low-rank change that :func:`fit_blended_head_factor` applies as an update instead of a new
#: ``d x d`` factor and a solve for every class.  The shrinkage's weight moves by under 5 % of itself.
ANCHOR_MIN_CLASSES = 64
ANCHOR_COUNT_STEP = 1.05
ANCHOR_VARIANCE_STEP = 1.01
#: the largest rank of one retrain's change of ``A`` applied as an update (a bulk teach refactors),
#: and of all updates since the last factorisation (each one costs every later solve a little)
UPDATE_MAX_RANK = 64
UPDATES_MAX_RANK = 512


def pooled_anchor(moments: PooledMoments, shared: np.ndarray | None = None) -> tuple[float, float]:
    """(count, variance): what the pooled scatter is divided by and the mean variance the shrinkage
    target is scaled to; on a grid above ``ANCHOR_MIN_CLASSES`` classes (see there)."""
    c = len(moments.per_class)
    d = len(moments.within_sum)
    var = (float(np.trace(moments.within_sum)) / max(c, 1) + (float(np.trace(shared)) if shared is not None else 0.0)) / d
    if c <= ANCHOR_MIN_CLASSES or not var > 0.0:
        return float(max(c, 1)), var
    steps = np.floor(np.log(c / ANCHOR_MIN_CLASSES) / np.log(ANCHOR_COUNT_STEP))
    count = ANCHOR_MIN_CLASSES * ANCHOR_COUNT_STEP ** steps
    var = ANCHOR_VARIANCE_STEP ** np.round(np.log(var) / np.log(ANCHOR_VARIANCE_STEP))
    return float(count), float(var)


def anchored_pooled(moments: PooledMoments, shrinkage: float, shared: np.ndarray | None = None,
                    anchor: tuple[float, float] | None = None) -> np.ndarray:
    """A new (d, d) array ``A = (1 - a) (W / count + shared) + a variance I`` of the anchor
    (:func:`pooled_anchor`; identity when no class has any spread yet).  With ``ANCHOR_MIN_CLASSES``
    classes or fewer it is :func:`~.gaussian.shrunk_pooled`."""
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must be in [0, 1], got {shrinkage!r}")
    count, var = pooled_anchor(moments, shared) if anchor is None else anchor
    d = len(moments.within_sum)
    means = moments.means()
    residue = 1e-12 * (float(np.mean(means * means)) if means.size else 0.0)
    if not var > residue:
        return np.eye(d)
    cov = moments.within_sum / count
    if shared is not None:
        cov += shared
    cov *= 1.0 - shrinkage
    cov[np.diag_indices(d)] += shrinkage * var
    return cov


def _padding(bounds: np.ndarray, width: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(C, r) column indices and mask of every class's columns padded to ``width`` (default: the
    largest rank ``r``)."""
    ranks = np.diff(bounds)
    r = int(ranks.max(initial=0)) if width is None else int(width)
    mask = np.arange(r)[None, :] < ranks[:, None]
    idx = np.where(mask, bounds[:-1, None] + np.arange(r)[None, :], 0)
    return idx, mask, r


def _padded(a: np.ndarray, bounds: np.ndarray, width: int | None = None) -> np.ndarray:
    """(C, r, ...) per-class blocks of the rows of ``a`` (R, ...), zero beyond a class's rank (a
    reshape when all ranks are ``r``)."""
    ranks = np.diff(bounds)
    c = len(ranks)
    r = int(ranks.max(initial=0)) if width is None else int(width)
    if c and np.all(ranks == r):
        return a.reshape(c, r, *a.shape[1:])
    idx, mask, _ = _padding(bounds, r)
    out = a[idx]
    out[~mask] = 0
    return out


def _unpadded(a: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """The inverse of :func:`_padded`: (R, ...) rows in column order."""
    ranks = np.diff(bounds)
    c, r = len(ranks), a.shape[1]
    if c and np.all(ranks == r):
        return a.reshape(c * r, *a.shape[2:])
    return a[_padding(bounds, r)[1]]


def _rank_groups(bounds: np.ndarray, chunk: int = 512) -> list[tuple[np.ndarray, int, np.ndarray]]:
    """(classes, rank q, their (n q,) row indices) for the classes of each rank above 0, at most
    ``chunk`` classes a group: batched per-class work without padding every class to the largest
    rank (a few two-cluster classes made that 2x the rows)."""
    ranks = np.diff(bounds)
    out = []
    for q in np.unique(ranks[ranks > 0]).tolist():
        every = np.flatnonzero(ranks == q)
        for lo in range(0, len(every), chunk):
            cls = every[lo:lo + chunk]
            out.append((cls, q, (bounds[cls][:, None] + np.arange(q)).ravel()))
    return out


def _class_terms(ut: np.ndarray, aut: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every class's ``U_c^T A^{-1} U_c`` and the lower Cholesky factor ``L_c`` of ``I`` plus it, padded
    (C, r, r) (identity beyond a class's rank), and the stacked rows ``B_c^T = L_c^{-1} (A^{-1}
    U_c)^T`` (R, d) float32 with ``B_c B_c^T = A^{-1} - (A + U_c U_c^T)^{-1}`` (Woodbury), from
    ``ut`` = ``U^T`` and ``aut`` = ``(A^{-1} U)^T`` (R, d): classes of one rank at once."""
    c, r = len(bounds) - 1, int(np.diff(bounds).max(initial=0))
    gram, lk = np.zeros((c, r, r)), np.tile(np.eye(r), (c, 1, 1))
    rows = np.empty((int(bounds[-1]), aut.shape[1]), np.float32)
    for cls, q, cols in _rank_groups(bounds):
        pu, pa = ut[cols].reshape(len(cls), q, -1), aut[cols].reshape(len(cls), q, -1)
        g = pu @ pa.transpose(0, 2, 1)
        lq = np.linalg.cholesky(np.eye(q) + g)
        gram[cls, :q, :q], lk[cls, :q, :q] = g, lq
        rows[cols] = (np.linalg.inv(lq) @ pa).reshape(len(cols), -1)  # q x q inverses: 4x a batched solve
    return gram, lk, rows


@dataclass(frozen=True)
class HeadSolve:
    """What fitting the head solved, kept with the served head for the next retrain's update and
    the calibration folds (:func:`fold_logits`).

    ``A^{-1} = A_0^{-1} - sum_i Z_i M_i^{-1} Z_i^T``: ``chol`` is the lower Cholesky factor of the
    factored ``A_0`` (``SOLVE_DTYPE``), ``updates`` the (``Z_i``, ``M_i^{-1}``) of the low-rank changes
    since.  ``anchor`` (:func:`pooled_anchor`), ``shrinkage`` and ``blend`` the fit's; ``trace`` is
    ``tr(A)``.  Per class (rows in class order): ``w`` (C, d) = ``A^{-1} m_c`` of the ``means``,
    ``gram`` and ``lk`` (C, r, r) as in :func:`_class_terms`, columns ``bounds[c]:bounds[c + 1]`` of
    the head's stacked ``rows`` (``B_c^T``) and ``offset`` (``B_c^T m_c``); ``per_class`` the moments
    they were solved for (their identity says which classes a later retrain kept).
    """

    chol: np.ndarray
    updates: tuple[tuple[np.ndarray, np.ndarray], ...]
    anchor: tuple[float, float]
    shrinkage: float
    blend: float
    trace: float
    w: np.ndarray
    means: np.ndarray
    bounds: np.ndarray
    gram: np.ndarray
    lk: np.ndarray
    rows: np.ndarray
    offset: np.ndarray
    per_class: tuple[ClassMoment, ...]

    @property
    def update_rank(self) -> int:
        return sum(z.shape[1] for z, _ in self.updates)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``A^{-1} rhs`` (float64) for a (d, k) ``rhs``: two triangular solves on the stored factor,
        in ``SOLVE_DTYPE``, less the updates' terms."""
        rhs = np.asarray(rhs, np.float64)
        y = solve_triangular(self.chol, rhs.astype(SOLVE_DTYPE), lower=True, check_finite=False)
        y = solve_triangular(self.chol, y, lower=True, trans="T", check_finite=False, overwrite_b=True)
        y = y.astype(np.float64)
        for z, minv in self.updates:
            y -= z @ (minv @ (z.T @ rhs))
        return y

    def ua(self, y: np.ndarray) -> np.ndarray:
        """(R, k) ``U_c^T A^{-1} y`` of every class's columns for a (d, k) ``y``: ``L_c B_c^T y``, one
        product with the stacked rows (no ``d x R`` factor kept)."""
        p = (self.rows @ np.asarray(y, np.float32)).astype(np.float64)
        return _unpadded(self.lk @ _padded(p, self.bounds, self.lk.shape[1]), self.bounds)

    def mean_terms(self) -> np.ndarray:
        """(C,) ``w_c^T m_c`` (minus twice the bias), computed once."""
        cached = self.__dict__.get("_mean_terms")
        if cached is None:
            cached = np.einsum("cd,cd->c", self.w, self.means)
            object.__setattr__(self, "_mean_terms", cached)
        return cached

    def column_terms(self) -> tuple[np.ndarray, np.ndarray]:
        """(R,) ``U_c^T w_c`` per column and (C, r, r) every ``gram[c]``: the same for every
        calibration fold, so computed once."""
        cached = self.__dict__.get("_column_terms")
        if cached is None:
            p = self.offset.astype(np.float64)[:, None]
            uw = _unpadded(self.lk @ _padded(p, self.bounds, self.lk.shape[1]), self.bounds)[:, 0]
            cached = (uw, self.gram)
            object.__setattr__(self, "_column_terms", cached)
        return cached


def fit_blended_head_factor(memory: ClusterMemory, shrinkage: float = 0.5, blend: float = 1.0,
                            moments: PooledMoments | None = None, temperature: float = 1.0,
                            shared: np.ndarray | None = None,
                            previous: HeadSolve | None = None) -> tuple[BlendedSnapshot, HeadSolve]:
    """:func:`fit_blended_head` and what it solved (:class:`HeadSolve`).

    With ``previous`` (the fit of the served head, with the same ``shared``) and the same anchor
    (:func:`pooled_anchor`), the change of ``A`` (the classes added, removed or retaught) is of low
    rank and applied as a Woodbury update: the kept classes' solutions change by a rank-k term
    (``O((C + R) d k)``) and only the new classes are solved, instead of a ``d x d`` Cholesky and a
    solve for every class.  The result equals the full fit to rounding.  Otherwise one Cholesky of
    ``A`` and one pair of triangular solves for all classes' means and factors together.
    """
    if not blend >= 0.0 or not np.isfinite(blend):
        raise ValueError(f"blend must be a finite number >= 0, got {blend!r}")
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must be in [0, 1], got {shrinkage!r}")
    if moments is None:
        moments = PooledMoments.from_memory(memory)
    elif moments.classes != memory.classes:
        raise ValueError(f"moments are of classes {moments.classes[:5]}..., not of this memory's")
    anchor = pooled_anchor(moments, shared)
    if previous is not None:
        done = _updated_fit(previous, moments, memory.classes, anchor, shrinkage, blend, temperature)
        if done is not None:
            return done
    means = moments.means()
    d, c = memory.feature_dim, len(means)
    chol = pd_cholesky(anchored_pooled(moments, shrinkage, shared, anchor))
    trace, chol = float((chol * chol).sum()), np.asfortranarray(chol, SOLVE_DTYPE)  # d x d float64 not kept
    ranks = [m.factor.shape[1] if blend > 0 else 0 for m in moments.per_class]
    ut = (np.concatenate([m.factor.T for m in moments.per_class]) * np.sqrt(blend)
          if sum(ranks) else np.zeros((0, d)))  # U^T (R, d): a class's columns are rows here
    bounds = np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64)
    base = HeadSolve(chol, (), anchor, shrinkage, blend, trace,
                     np.zeros((0, d)), means, bounds, np.zeros((0, 0, 0)), np.zeros((0, 0, 0)),
                     np.zeros((0, d), np.float32), np.zeros(0, np.float32), moments.per_class)
    sol = base.solve(np.concatenate([means.T, ut.T], axis=1))
    gram, lk, rows = _class_terms(ut, sol[:, c:].T, bounds)
    w = sol[:, :c].T
    return _finished(base, memory.classes, w, means, bounds, gram, lk, rows, temperature)


def _finished(base: HeadSolve, classes: tuple[str, ...], w: np.ndarray, means: np.ndarray, bounds: np.ndarray,
              gram: np.ndarray, lk: np.ndarray, rows: np.ndarray,
              temperature: float) -> tuple[BlendedSnapshot, HeadSolve]:
    """The snapshot of the solved terms, and the :class:`HeadSolve` holding them."""
    w = np.ascontiguousarray(w)
    bias = -0.5 * np.einsum("cd,cd->c", w, means)
    snap = BlendedSnapshot.of_rows(classes, w.astype(np.float32), bias, means.astype(np.float32), rows, bounds,
                                   float(temperature))
    solve = dataclasses.replace(base, w=w, means=means, bounds=bounds, gram=gram, lk=lk, rows=snap._rows,
                                offset=snap._offset)
    return snap, solve


def _updated_fit(prev: HeadSolve, moments: PooledMoments, classes: tuple[str, ...], anchor: tuple[float, float],
                 shrinkage: float, blend: float,
                 temperature: float) -> tuple[BlendedSnapshot, HeadSolve] | None:
    """The fit of ``moments`` from ``prev`` by a low-rank update, or None when that does not apply
    (another anchor or setting, a diagonal-mode class, a change of too high a rank, the kept
    classes reordered)."""
    if (prev.anchor != anchor or prev.shrinkage != shrinkage or prev.blend != blend
            or len(moments.per_class) <= ANCHOR_MIN_CLASSES or not anchor[1] > 0):
        return None
    pos = {id(m): i for i, m in enumerate(prev.per_class)}
    to_old = np.array([pos.get(id(m), -1) for m in moments.per_class], np.int64)
    kept_new = np.flatnonzero(to_old >= 0)
    kept_old = to_old[kept_new]
    if len(kept_old) and np.any(np.diff(kept_old) <= 0):
        return None
    added = np.flatnonzero(to_old < 0)
    removed = np.setdiff1d(np.arange(len(prev.per_class)), kept_old)
    changed = [moments.per_class[j] for j in added] + [prev.per_class[i] for i in removed]
    if any(m.diag is not None for m in changed):
        return None
    n_add = sum(moments.per_class[j].factor.shape[1] for j in added)
    k = sum(m.factor.shape[1] for m in changed)
    if k > UPDATE_MAX_RANK or prev.update_rank + k > UPDATES_MAX_RANK:
        return None
    d, c = len(moments.within_sum), len(moments.per_class)
    every = len(kept_old) == len(prev.per_class)  # nothing removed: the kept arrays are prev's
    w = prev.w if every else prev.w[kept_old]
    means = prev.means if every else prev.means[kept_old]
    gram, lk = (prev.gram, prev.lk) if every else (prev.gram[kept_old], prev.lk[kept_old])
    kb = np.concatenate([[0], np.cumsum(np.diff(prev.bounds)[kept_old])]).astype(np.int64)
    rows = prev.rows
    if not every and len(kept_old):
        rows = rows[np.concatenate([np.arange(prev.bounds[i], prev.bounds[i + 1]) for i in kept_old])]
    ranks_a = np.array([moments.per_class[j].factor.shape[1] if blend > 0 else 0 for j in added], np.int64)
    r = max(int(np.diff(kb).max(initial=0)), int(ranks_a.max(initial=0)))
    if gram.shape[1] != r:  # every class's blocks padded to the new largest rank
        g2, l2 = np.zeros((len(gram), r, r)), np.tile(np.eye(r), (len(gram), 1, 1))
        q = min(r, gram.shape[1])
        g2[:, :q, :q], l2[:, :q, :q] = gram[:, :q, :q], lk[:, :q, :q]
        gram, lk = g2, l2
    out_rows = np.empty((int(kb[-1]) + int(ranks_a.sum()), d), np.float32)
    solve = prev
    if k:
        # A' = A + P S P^T:  A'^{-1} = A^{-1} - Z M^{-1} Z^T,  Z = A^{-1} P,  M = S + P^T Z
        p = np.concatenate([m.factor for m in changed], axis=1) * np.sqrt((1.0 - shrinkage) / anchor[0])
        sign = np.r_[np.ones(n_add), -np.ones(k - n_add)]
        z = prev.solve(p)
        minv = np.linalg.inv(np.diag(sign) + p.T @ z)
        minv = 0.5 * (minv + minv.T)
        solve = dataclasses.replace(prev, updates=prev.updates + ((z, minv),),
                                    trace=prev.trace + float(sign @ (p * p).sum(axis=0)))
        w = w - ((w @ p) @ minv) @ z.T
        gram, lk = gram.copy(), lk.copy()
        p32, zt = p.astype(np.float32), z.T.astype(np.float32)
        for cls, q, cols in _rank_groups(kb):  # the kept classes' U_c^T A^{-1} P = L_c B_c^T P, Grams, rows
            blk = rows[cols]
            yu = lk[cls, :q, :q] @ (blk @ p32).astype(np.float64).reshape(len(cls), q, k)
            ym = yu @ minv
            g = gram[cls, :q, :q] - ym @ yu.transpose(0, 2, 1)
            l_new = np.linalg.cholesky(np.eye(q) + g)
            t = np.linalg.solve(l_new, lk[cls, :q, :q]).astype(np.float32)  # B_c'^T = T_c B_c^T - N_c Z^T
            new = (t @ blk.reshape(len(cls), q, d)).reshape(len(cols), d)
            new -= np.linalg.solve(l_new, ym).reshape(len(cols), k).astype(np.float32) @ zt
            out_rows[cols] = new
            gram[cls, :q, :q], lk[cls, :q, :q] = g, l_new
    else:
        out_rows[:int(kb[-1])] = rows
    # the added classes (new, or retaught: their moments are new objects), solved against A'
    ab = np.concatenate([[0], np.cumsum(ranks_a)]).astype(np.int64)
    ma = np.stack([moments.per_class[j].mean for j in added]) if len(added) else np.zeros((0, d))
    ua = (np.concatenate([moments.per_class[j].factor for j in added], axis=1) * np.sqrt(blend)
          if int(ab[-1]) else np.zeros((d, 0)))
    sol = solve.solve(np.concatenate([ma.T, ua], axis=1))
    gram_a, lk_a, rows_a = _class_terms(ua.T, sol[:, len(added):].T, ab)
    out_rows[int(kb[-1]):] = rows_a
    q = gram_a.shape[1]
    g2, l2 = np.zeros((len(added), r, r)), np.tile(np.eye(r), (len(added), 1, 1))
    g2[:, :q, :q], l2[:, :q, :q] = gram_a, lk_a
    # every array in the new class order: kept ones first, then added ones, unless a class was retaught
    gram, lk = np.concatenate([gram, g2]), np.concatenate([lk, l2])
    w = np.concatenate([w, sol[:, :len(added)].T]) if len(added) else w
    means = np.concatenate([means, ma]) if len(added) else means
    ranks = np.concatenate([np.diff(kb), ranks_a]).astype(np.int64)
    order = np.empty(c, np.int64)  # position in [kept..., added...]
    order[kept_new] = np.arange(len(kept_new))
    order[added] = len(kept_new) + np.arange(len(added))
    if np.any(order != np.arange(c)):
        starts = np.concatenate([[0], np.cumsum(ranks)])[order]
        lens = ranks[order]
        ends = np.cumsum(lens)
        out_rows = out_rows[np.repeat(starts - (ends - lens), lens) + np.arange(int(ends[-1]) if c else 0)]
        gram, lk, w, means, ranks = gram[order], lk[order], w[order], means[order], ranks[order]
    bounds = np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64)
    solve = dataclasses.replace(solve, per_class=moments.per_class)
    return _finished(solve, classes, w, means, bounds, gram, lk, out_rows, temperature)


def fold_logits(solve: HeadSolve, moments: PooledMoments, shrinkage: float, blend: float,
                replaced: Mapping[int, ClassMoment], x: np.ndarray,
                columns: np.ndarray | None = None) -> np.ndarray:
    """(n, C) logits of ``x`` under the head with the classes ``replaced`` (index -> new moment),
    from the served fit's :class:`HeadSolve` instead of a new ``d x d`` Cholesky.

    The pooled covariance loses the replaced classes' old moments and gains their new ones, a
    low-rank change of ``A`` applied by Woodbury; the anchor (:func:`pooled_anchor`: the shrinkage
    target and the scatter's divisor) stays the served head's (below ``ANCHOR_MIN_CLASSES`` classes
    the only approximation: a held-out shot moves that trace by about 1/C of its class's share).
    Full-covariance moments only (``diag`` None).  ``columns``: ``solve.ua`` of ``[V, x^T]`` (the
    replaced classes' new factors, their old ones, ``x``), when computed for several folds at once.
    """
    x = np.atleast_2d(np.asarray(x, np.float64))
    c, sq = len(solve.means), np.sqrt(blend)
    ks = sorted(replaced)
    new_f = [replaced[k].factor for k in ks]
    old_f = [moments.per_class[k].factor for k in ks]
    v = np.concatenate(new_f + old_f, axis=1)
    n_new = sum(f.shape[1] for f in new_f)
    sign = np.r_[np.ones(n_new), -np.ones(v.shape[1] - n_new)]
    mk = np.stack([replaced[e].mean for e in ks]) if ks else np.zeros((0, x.shape[1]))
    sol = solve.solve(np.concatenate([v, mk.T, x.T], axis=1))
    k = v.shape[1]
    av, wk, z = sol[:, :k], sol[:, k:k + len(ks)].T, sol[:, k + len(ks):].T
    # x w_c and w_c m_c of the served fit with the replaced classes' put in; the low-rank change of
    # every w_c below is applied to these products (no C x d copy per fold)
    xw = x @ solve.w.T
    xw[:, ks] = x @ wk.T
    wm = solve.mean_terms().copy()
    wm[ks] = np.einsum("cd,cd->c", wk, mk)
    scale = (1.0 - shrinkage) / solve.anchor[0]
    minv = None
    shift = None  # (k, C): w_c moved by -AV shift[:, c]
    if scale > 0 and k:  # A_f^{-1} y = A^{-1} y - AV M^{-1} AV^T y,  M = (scale J)^{-1} + V^T A^{-1} V
        minv = np.linalg.inv(np.diag(sign / scale) + v.T @ av)
        ma = solve.means @ av  # (C, k)
        ma[ks] = mk @ av
        shift = minv @ ma.T
        xw -= (x @ av) @ shift
        wm -= np.einsum("ck,kc->c", ma, shift)
        wk = wk - (av @ shift[:, ks]).T
        z -= (av @ (minv @ (av.T @ x.T))).T
    out = xw - 0.5 * wm
    if blend <= 0:
        return out
    # the other classes keep their U_c and U_c^T A^{-1} U_c: all of them in one batch, padded to the
    # largest rank (a padded column is zero, its Gram block the identity)
    bounds = solve.bounds
    ranks = np.diff(bounds)
    idx, mask, r = _padding(bounds)
    mask[ks] = False  # the replaced classes' columns: added below, with their new factors
    if r and mask.any():
        owner = np.repeat(np.arange(c), ranks)
        # U_c^T w_c from the served fit's (kept on the solve: the same for every fold) and the low-rank
        # shift (the replaced classes' columns are masked out below)
        uw, g_all = solve.column_terms()
        both = solve.ua(np.concatenate([v, x.T], axis=1)) if columns is None else columns  # U^T A^{-1} [V, x]
        uav, p_flat = both[:, :k].T, both[:, k:]  # (k, R), (R, n)
        if shift is not None:
            uw = uw - np.einsum("kr,kr->r", uav, shift[:, owner])
            p_flat = p_flat - uav.T @ (minv @ (av.T @ x.T))
        p_flat = p_flat - uw[:, None]  # U_c^T (z - w_c)
        p = p_flat[idx] * mask[..., None]
        g = g_all[:, :r, :r] * (mask[:, :, None] & mask[:, None, :])
        if minv is not None:
            q = uav[:, idx] * mask[None]  # (k, C, r)
            g -= q.transpose(1, 2, 0) @ np.tensordot(minv, q, axes=(0, 0)).transpose(1, 0, 2)  # q^T M^{-1} q
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
        t = solve_triangular(lk, u.T @ (z - wk[i]).T, lower=True, check_finite=False)
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
