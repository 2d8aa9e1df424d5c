"""Stable object ids across frames, and class scores fused over each track's recent frames.

Each frame's observations (a proposal and its class scores) are matched to the live tracks by one
optimal assignment (``scipy.optimize.linear_sum_assignment``). Where an observation has a position in
a fixed frame (``frame``, e.g. the robot's base: the centroid moved there with the camera pose, issue
20) and the track's last position is in the same frame, the cost is their 3D distance in units of
``max_distance_m``, and they may match within ``max_distance_m``: the camera may move, the object
stays where it is. In the camera frame (no pose) the cost adds one minus the box IoU, as boxes only
mean the same place while the camera stands still. A pair without comparable positions (no depth,
or one in the camera frame and one in the fixed frame) may match when its boxes overlap by at least
``min_iou``, and with a camera pose (``view`` given) only when the track's box was seen from the same
view: a frame without depth after a move matches nothing rather than the wrong objects, and a track
keeps its last fixed-frame position through it, as through a frame without a camera pose (matched by
its box in the camera frame): one late pose must not cost every object its id. Unmatched
observations start tracks; tracks unseen for more than ``max_missed`` frames end. A track in a
fixed frame is expected only in the view it was last seen from: frames of other views (the camera
looks elsewhere, the object is likely out of the picture) do not count against it, up to
``FIXED_LIFETIME`` times ``max_missed`` frames in all, so an object keeps its id while the camera
looks away and back. An observation cut by the image border (``cut``) whose fixed-frame centroid
lies ``CUT_SHIFT`` times ``max_distance_m`` or more from its track's position keeps the track alive
but neither moves it nor is reported: the centroid of the part in view lies off the object (in the
main job's close-ups, a can's sliver at the border had its centre on the domino beside it, 8 cm
from the can). A cut observation that finds no track but lies within that distance of one that
found its track in the same frame starts none (one object's second sliver at the border).

A track's label is the argmax of its class scores averaged over its last ``window`` observations
(a class missing from one frame's scores counts 0 there), and it is known when most of those
observations were; so one bad view does not flip a label that several good views agree on. A track
judged unknown reports the scores averaged over the observations that said unknown, each below
``UNKNOWN_BELOW`` (as a core Prediction's): two sure views among three unknown ones do not make an
unknown object read as sure of a class.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from .types import Proposal

__all__ = ["ObjectObservation", "Track", "ObjectTracker", "fuse_scores", "CUT_SHIFT", "FIXED_LIFETIME",
           "UNKNOWN_BELOW", "DEFAULT_TOP_K"]

FIXED_LIFETIME = 10  # a fixed-frame track unseen from other views ends after this many times max_missed frames
CUT_SHIFT = 0.5  # a cut observation this share of max_distance_m or more from its fixed-frame track is not reported
# an unknown answer's scores stay below this (the distance gate's boundary, core.Prediction): an
# observation judged unknown with a higher score (not the learner's) counts just below it
UNKNOWN_BELOW = 0.5
_UNKNOWN_TOP = math.nextafter(UNKNOWN_BELOW, 0.0)

DEFAULT_TOP_K = 3  # classes ranked per track (what a learner's detections carry per object)

_BIG = 1e6


@dataclass
class ObjectObservation:
    """One object in one frame: its proposal, the learner's class scores, and whether it was known.

    ``position``/``frame``: where the object is for matching, when that is not the proposal's centroid
    in the camera frame (``frame`` "", the default): its centroid in the fixed frame named ``frame``.
    ``cut``: the box touches the image border, so the centroid is of the part in view only.
    """

    proposal: Proposal
    scores: dict[str, float]
    known: bool
    position: np.ndarray | None = None
    frame: str = ""
    cut: bool = False

    @property
    def where(self) -> tuple[np.ndarray, str]:
        """(position used for matching, its frame; "" = the camera frame)."""
        if self.position is None:
            return np.asarray(self.proposal.centroid, float), ""
        return np.asarray(self.position, float).reshape(3), self.frame


@dataclass
class Track:
    """A tracked object as of the last update (a snapshot: changing it changes nothing in the tracker).

    ``label`` is the fused best class, or "" when the track is judged unknown (as in
    ``core.Prediction``); ``nearest_label`` is the fused best class regardless; ``confidence``
    its fused score (below ``UNKNOWN_BELOW`` when unknown: fused over the observations that said so);
    ``hits`` the observations so far; ``age`` the updates since it began;
    ``missed`` the updates since it was last seen (0 when seen in the latest one);
    ``position``/``frame`` where the track is (``frame`` "" = the camera's optical frame, else the fixed
    frame of the camera pose); ``observation`` the index, among the observations of the update that
    last saw it, of the one that is this track (-1 when none has yet).
    """

    id: int
    proposal: Proposal
    label: str
    known: bool
    confidence: float
    top_labels: list[str]
    top_scores: list[float]
    hits: int
    age: int
    last_stamp: float
    missed: int = 0
    nearest_label: str = ""
    position: np.ndarray | None = None
    frame: str = ""
    observation: int = -1


def fuse_scores(history: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Mean score per class over ``history`` (a class absent from a frame counts 0 there)."""
    if not history:
        return {}
    total: dict[str, float] = {}
    for scores in history:
        for k, v in scores.items():
            total[k] = total.get(k, 0.0) + float(v)
    return {k: v / len(history) for k, v in total.items()}


@dataclass
class _State:
    id: int
    proposal: Proposal
    scores: deque
    known: deque
    position: np.ndarray
    frame: str
    view: int | None = None
    missed_in_view: int = 0  # frames of the track's own view (or of no known view) that did not show it
    hits: int = 1
    age: int = 0
    missed: int = 0
    last_stamp: float = 0.0
    observation: int = -1  # index of the observation that last was this track, in its update


def _check_scores(scores: object) -> dict[str, float]:
    if not isinstance(scores, Mapping):
        raise TypeError(f"scores must be a mapping label -> score, got {type(scores).__name__}")
    out = {}
    for k, v in scores.items():
        v = float(v)
        if not isinstance(k, str) or not math.isfinite(v):
            raise ValueError(f"scores must map str labels to finite numbers, got {k!r}: {v!r}")
        out[k] = v
    return out


class ObjectTracker:
    """Tracks objects over frames and fuses their class scores.

    Parameters
    ----------
    window : observations per track whose scores and known flags are fused.
    max_missed : updates a track may go unseen before it ends.
    max_distance_m : largest centroid distance of a match (metres).
    min_iou : smallest box IoU of a match when a centroid is missing (RGB-only proposals).
    top_k : length of each track's ``top_labels``/``top_scores``.

    Examples
    --------
    >>> import numpy as np
    >>> from cbcl_pr_ros.perception import ObjectObservation, ObjectTracker, Proposal
    >>> p = Proposal((10, 10, 50, 50), None, np.array([0.0, 0.0, 0.5]), np.full(3, 0.05), 1.0)
    >>> t = ObjectTracker(window=3)
    >>> [tr.label for tr in t.update([ObjectObservation(p, {"mug": 0.9, "duck": 0.1}, True)], 0.0)]
    ['mug']
    >>> [tr.label for tr in t.update([ObjectObservation(p, {"mug": 0.2, "duck": 0.8}, True)], 0.1)]
    ['mug']
    """

    def __init__(self, window: int = 5, max_missed: int = 5, max_distance_m: float = 0.1, min_iou: float = 0.2,
                 top_k: int = DEFAULT_TOP_K) -> None:
        for name, v, lo in (("window", window, 1), ("max_missed", max_missed, 0), ("top_k", top_k, 1)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if not (math.isfinite(float(max_distance_m)) and max_distance_m > 0):
            raise ValueError(f"max_distance_m must be > 0, got {max_distance_m!r}")
        if not 0.0 <= float(min_iou) <= 1.0:
            raise ValueError(f"min_iou must be in [0, 1], got {min_iou!r}")
        self.window = int(window)
        self.max_missed = int(max_missed)
        self.max_distance_m = float(max_distance_m)
        self.min_iou = float(min_iou)
        self.top_k = int(top_k)
        self._tracks: dict[int, _State] = {}
        self._next_id = 1

    # ------------------------------------------------------------------ matching
    def _cost(self, tracks: list[_State], obs: Sequence[ObjectObservation], view: int | None) -> np.ndarray:
        """(tracks, observations) matching costs, _BIG where they cannot match; one array pass (a
        pair loop in Python cost seconds on a frame of a few hundred objects)."""
        where = [o.where for o in obs]
        iou = _iou_matrix(np.array([t.proposal.box for t in tracks], float).reshape(-1, 4),
                          np.array([o.proposal.box for o in obs], float).reshape(-1, 4))
        tp = np.stack([np.asarray(t.position, float).reshape(3) for t in tracks])
        op = np.stack([b for b, _ in where])
        same = np.array([t.frame for t in tracks], object)[:, None] == np.array([f for _, f in where], object)[None, :]
        geometric = same & np.isfinite(tp).all(axis=1)[:, None] & np.isfinite(op).all(axis=1)[None, :]
        with np.errstate(invalid="ignore"):
            d = np.sqrt(((tp[:, None, :] - op[None, :, :]) ** 2).sum(axis=2))
            near = geometric & (d <= self.max_distance_m)
        in_camera = np.array([not f for _, f in where])[None, :]
        cost = np.where(near, d / self.max_distance_m + np.where(in_camera, 1.0 - iou, 0.0), _BIG)
        same_view = np.array([view is None or t.view == view for t in tracks])[:, None]
        return np.where(~geometric & (iou >= self.min_iou) & same_view, 1.0 + (1.0 - iou), cost)

    def update(self, observations: Sequence[ObjectObservation], stamp: float, view: int | None = None) -> list[Track]:
        """Add one frame's observations; returns the tracks seen in this frame, by id (not those seen
        only cut by the image border far from where they were: see ``CUT_SHIFT``).

        ``view``: which camera pose the frame was seen from (the same number while the camera stands
        still; None = unknown, boxes of any frame compare).

        Every observation is checked before anything changes, so a bad one (scores not a mapping
        of finite numbers, not an ``ObjectObservation``) raises and leaves the tracker as it was.
        """
        obs = list(observations)
        checked = []
        for o in obs:
            if not isinstance(o, ObjectObservation) or not isinstance(o.proposal, Proposal):
                raise TypeError(f"observations must be ObjectObservation with a Proposal, got {type(o).__name__}")
            checked.append(_check_scores(o.scores))
            try:
                o.where
            except (TypeError, ValueError) as exc:
                raise ValueError(f"an observation's position must be 3 numbers: {exc}") from None
        stamp = float(stamp)
        if not math.isfinite(stamp):
            raise ValueError(f"stamp must be finite, got {stamp}")
        tracks = list(self._tracks.values())
        matched_t: dict[int, int] = {}
        if tracks and obs:
            cost = self._cost(tracks, obs, view)
            rows, cols = linear_sum_assignment(cost)
            matched_t = {int(c): int(r) for r, c in zip(rows, cols) if cost[r, c] < _BIG}
        seen: list[int] = []
        for t in tracks:
            t.age += 1
            t.missed += 1
            t.missed_in_view += int(view is None or t.view is None or t.view == view or not t.frame)
        for j, o in enumerate(obs):
            position, frame = o.where
            if j in matched_t and self._off_centre(tracks[matched_t[j]], o, position, frame):
                t = tracks[matched_t[j]]  # its object, but the centroid of its part in view lies far off:
                t.missed, t.missed_in_view, t.view = 0, 0, view  # kept alive, not moved, not reported
                continue
            if j in matched_t:
                t = tracks[matched_t[j]]
                t.proposal, t.hits, t.missed, t.missed_in_view, t.view = o.proposal, t.hits + 1, 0, 0, view
                if (frame == t.frame and np.all(np.isfinite(position))) or (frame and frame != t.frame):
                    t.position, t.frame = position, frame  # else no depth or no pose now: it is still where it was
            elif self._piece_of_seen(o, position, frame, [obs[i] for i in matched_t]):
                continue  # a cut piece beside an object seen in this frame: no track of its own, not reported
            else:
                t = _State(self._next_id, o.proposal, deque(maxlen=self.window), deque(maxlen=self.window),
                           position, frame, view)
                self._tracks[t.id] = t
                self._next_id += 1
            t.scores.append(checked[j])
            t.known.append(bool(o.known))
            t.last_stamp, t.observation = stamp, j
            seen.append(t.id)
        for tid in [tid for tid, t in self._tracks.items() if t.missed_in_view > self.max_missed
                    or t.missed > self.max_missed * FIXED_LIFETIME]:
            del self._tracks[tid]
        return [self._snapshot(self._tracks[tid]) for tid in sorted(seen)]

    def _off_centre(self, t: _State, o: ObjectObservation, position: np.ndarray, frame: str) -> bool:
        """A cut observation whose fixed-frame centroid lies ``CUT_SHIFT`` x ``max_distance_m`` or more
        from where its track was seen: the part in view says little about where the object is."""
        if not (o.cut and frame and frame == t.frame):
            return False
        d = float(np.linalg.norm(t.position - position))
        return math.isfinite(d) and d >= CUT_SHIFT * self.max_distance_m

    def _piece_of_seen(self, o: ObjectObservation, position: np.ndarray, frame: str,
                       seen: Sequence[ObjectObservation]) -> bool:
        """An unmatched cut observation whose fixed-frame centroid lies within ``CUT_SHIFT`` x
        ``max_distance_m`` of an observation that found its track in this frame: at the image border
        one object often comes out as two slivers, and the second would start a second track."""
        if not (o.cut and frame and np.all(np.isfinite(position))):
            return False
        near = CUT_SHIFT * self.max_distance_m
        return any(s.where[1] == frame and float(np.linalg.norm(s.where[0] - position)) < near for s in seen)

    # ------------------------------------------------------------------ queries
    def _snapshot(self, t: _State) -> Track:
        known = sum(t.known) * 2 > len(t.known)
        if known:
            fused = fuse_scores(list(t.scores))
        else:  # the frames that said unknown say how sure: each below the gate's boundary
            fused = fuse_scores([{k: min(v, _UNKNOWN_TOP) for k, v in s.items()}
                                 for s, k_ in zip(t.scores, t.known) if not k_])
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[: self.top_k]
        nearest, conf = ranked[0] if ranked else ("", 0.0)
        known = known and bool(ranked)
        return Track(t.id, t.proposal, nearest if known else "", known, float(conf), [k for k, _ in ranked],
                     [float(v) for _, v in ranked], t.hits, t.age, t.last_stamp, t.missed, nearest,
                     np.array(t.position, float), t.frame, t.observation)

    @property
    def tracks(self) -> list[Track]:
        """All live tracks (also those unseen for up to ``max_missed`` updates), by id."""
        return [self._snapshot(t) for _, t in sorted(self._tracks.items())]

    def get(self, track_id: int) -> Track | None:
        """The live track of that id, or None (ended, never existed, or not an int)."""
        if isinstance(track_id, bool) or not isinstance(track_id, (int, np.integer)):
            return None
        t = self._tracks.get(int(track_id))
        return None if t is None else self._snapshot(t)

    def best_track(self, label: str) -> Track | None:
        """The live, known track of ``label`` with the highest fused confidence (recently seen ones first)."""
        cands = [tr for tr in self.tracks if tr.known and tr.label == label]
        if not cands:
            return None
        return min(cands, key=lambda tr: (tr.missed, -tr.confidence, -tr.hits, tr.id))

    def reset(self) -> None:
        """Forget every track (ids keep counting up, so an old id never names a new object)."""
        self._tracks.clear()


def _iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every (x0, y0, x1, y1) half-open box of ``a`` with every one of ``b``, as ``box_iou``."""
    iw = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    ih = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    overlap = (iw > 0) & (ih > 0)
    inter = np.where(overlap, iw * ih, 0.0)
    area = lambda x: np.maximum(x[:, 2] - x[:, 0], 0.0) * np.maximum(x[:, 3] - x[:, 1], 0.0)  # noqa: E731
    union = area(a)[:, None] + area(b)[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(overlap & (union > 0), inter / np.where(union > 0, union, 1.0), 0.0)
