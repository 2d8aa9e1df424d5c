"""The object stream as the learner keeps it, without ROS: tracks, their recent vectors, and when
objects last arrived.

Detections, TeachClass by track and Classify's default answer all read the same state, so it lives
in one object that the learner node feeds with each frame's objects (already converted from the
message); :meth:`ObjectStream.classify_and_track` classifies them with the learner's controller and
tracks them. Thread-safe: the stream callback updates it while a service callback reads it.

With the camera pose of a frame the tracker matches objects by their centroids in the
fixed frame (the robot's base), so an id stays on its object while the camera moves; the tracks
still report the proposals as seen, centroids in the camera frame (the Detections message's meaning).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from cbcl_pr_ros.perception import ObjectObservation, ObjectTracker, Proposal, nested_parts
from cbcl_pr_ros.perception.boxes import box_iou
from cbcl_pr_ros.perception.camera_pose import CameraPose
from cbcl_pr_ros.perception.piece_pairs import join_groups, recognised_joins, union_proposal
from cbcl_pr_ros.service.object_teaching import TrackHistory, TrackViews
from cbcl_pr_ros.service.stream_negatives import StreamNegatives

__all__ = ["ObjectFrame", "ObjectJoins", "ObjectStream", "STREAMING_WINDOW_S", "STREAM_TOP_K"]

STREAMING_WINDOW_S = 2.0  # objects count as streaming while one frame of them came this recently
#: class scores per object handed to the tracker: the rest of 1000 classes' softmax is noise, and
#: fusing every class's score over a track's window cost milliseconds per frame in Python
STREAM_TOP_K = 16
HOLD_M = 0.02  # a candidate join whose union lies this near one joined in the last frame is the same join


@dataclass(frozen=True)
class ObjectJoins:
    """A frame's candidate joins (``perception.piece_pairs``): index pairs into its proposals, the
    proposal each pair makes together, and that union's vector (one row per pair)."""

    pairs: tuple[tuple[int, int], ...] = ()
    unions: tuple[Proposal, ...] = ()
    features: np.ndarray | None = None


@dataclass(frozen=True)
class ObjectFrame:
    """One frame of the object stream: its proposals, their (n, d) vectors, the image's (h, w) and the
    candidate joins of touching pieces (none by default)."""

    proposals: list[Proposal]
    features: np.ndarray
    shape: tuple[int, int]
    joins: ObjectJoins = ObjectJoins()


class ObjectStream:
    """Tracker, per-track history and the time of the last object frame (node clock, seconds)."""

    def __init__(self, window: int, max_missed: int, max_distance_m: float, history: int = 30) -> None:
        self._settings = (window, max_missed, max_distance_m, history)
        self._lock = threading.Lock()
        self.negatives = StreamNegatives()  # recent vectors of the objects seen, negatives for a teach
        self.reset()

    def reset(self) -> None:
        """Forget every track (a cleaned-up node starts again with none)."""
        window, max_missed, max_distance_m, history = self._settings
        with self._lock:
            self._tracker = ObjectTracker(window=window, max_missed=max_missed, max_distance_m=max_distance_m)
            self._history = TrackHistory(capacity=history)
            self._last_time = -1e9
            self.last_shape: tuple[int, int] | None = None
            self._view: tuple[int, CameraPose | None] = (0, None)  # the camera pose's view number, and its pose
            self._joined: tuple[str, np.ndarray] = ("", np.empty((0, 3)))  # last frame's joined unions, placed
        self.negatives.clear()

    def arrived(self, frame: ObjectFrame, now_s: float) -> None:
        """Note that a frame of objects came in (before it is classified: it counts as streaming)."""
        self._last_time = now_s
        self.last_shape = frame.shape

    def streaming(self, now_s: float) -> bool:
        """True while the extractor sends objects (a frame within the last ``STREAMING_WINDOW_S``)."""
        return now_s - self._last_time < STREAMING_WINDOW_S

    def update(self, frame: ObjectFrame, predictions: Sequence[Any] | None, stamp_s: float,
               pose: CameraPose | None = None, union_predictions: Sequence[Any] | None = None) -> list[Any]:
        """Track one frame; ``predictions`` (one per object, core Predictions) or None when nothing is
        taught yet (objects are still tracked, unlabelled, so that a track id can be taught);
        ``pose``: the camera's pose at the frame's stamp (None: track in the camera frame);
        ``union_predictions``: one per candidate join of the frame, which decide the joins
        (``piece_pairs.recognised_joins``, a join of the last frame held through a near tie); None
        joins nothing."""
        joined: list[Proposal] = []
        if predictions is not None and union_predictions is not None and frame.joins.pairs:
            held = self._held(frame.joins.unions, pose)
            frame, predictions, joined = _join_recognised(frame, predictions, union_predictions, held)
        self._joined = _placed([u.centroid for u in joined], pose)
        if predictions is None:
            obs = [ObjectObservation(p, {}, False) for p in frame.proposals]
        else:
            obs = [ObjectObservation(p, _scores(pr), bool(pr.known)) for p, pr in zip(frame.proposals, predictions)]
        labels = None if predictions is None else [pr.label if pr.known else "" for pr in predictions]
        parts = nested_parts(frame.proposals, labels)  # a piece of a larger proposal is that object: no own track
        keep = [i for i in range(len(obs)) if i not in parts]
        obs, features = [obs[i] for i in keep], frame.features[keep]
        if pose is not None and obs:
            fixed = pose.to_fixed(np.stack([o.proposal.centroid for o in obs]))
            h, w = frame.shape
            for o, x in zip(obs, fixed):
                o.position, o.frame = x, pose.frame
                o.cut = _touches_border(o.proposal.box, w, h)
        with self._lock:
            tracks = self._tracker.update(obs, stamp_s, self._view_of(pose))
        by_observation = {t.observation: t.id for t in tracks}  # a far-off part at the border has none
        shown = sorted(by_observation)
        if shown:
            ids = [by_observation[i] for i in shown]
            self._history.add(ids, features[shown], [obs[i].proposal.box for i in shown])
            self.negatives.add(ids, features[shown], stamp_s)
        return tracks

    def classify_and_track(self, frame: ObjectFrame, controller: Any, stamp_s: float,
                           pose: CameraPose | None = None) -> tuple[int, list[Any]]:
        """Classify the frame's objects in one batch with ``controller`` (a LearnerController), then
        track them (in ``pose``'s fixed frame when given); (model version of the answers, tracks).
        Nothing taught yet, or no object: the objects are tracked unlabelled."""
        version, predictions, unions = controller.model_version, None, None
        if frame.proposals and controller.classes:
            n, joins = len(frame.proposals), frame.joins
            rows = frame.features if not joins.pairs else np.concatenate([frame.features, joins.features])
            # pieces and unions in one batch; the tracker fuses the best STREAM_TOP_K scores of each (a
            # class absent from a frame counts 0), so its work per frame does not grow with the household
            out = controller.classify(rows, top_k=min(len(controller.classes), STREAM_TOP_K))
            if out.success:
                version, predictions = out.model_version, out.predictions[:n]
                unions = out.predictions[n:] if joins.pairs else None
        return version, self.update(frame, predictions, stamp_s, pose, unions)

    def _held(self, unions: Sequence[Proposal], pose: CameraPose | None) -> set[int]:
        """Indices of ``unions`` that lie within ``HOLD_M`` of a union joined in the last frame (in
        the same frame of reference): that join, seen again."""
        frame, last = self._joined
        here, now = _placed([u.centroid for u in unions], pose)
        if not len(last) or not len(now) or frame != here:
            return set()
        with np.errstate(invalid="ignore"):
            near = np.linalg.norm(now[:, None, :] - last[None, :, :], axis=2) <= HOLD_M
        return {int(k) for k in np.flatnonzero(near.any(axis=1))}

    def _view_of(self, pose: CameraPose | None) -> int | None:
        """A number per camera view: the same while the camera stays within 5 mm and 0.5 degrees."""
        if pose is None:
            return None
        number, seen = self._view
        if seen is None or seen.frame != pose.frame or any(m > lim for m, lim in zip(pose.moved_from(seen), (0.005, 0.009))):
            self._view = number, seen = number + 1, pose
        return number

    def track_at(self, box: Sequence[int], min_iou: float = 0.5) -> int | None:
        """The id of the live track whose last box overlaps ``box`` most (at least ``min_iou``), or None:
        the track of an object taught by box or as the object in view."""
        with self._lock:
            scored = [(box_iou(tuple(t.proposal.box), tuple(box)), t.id) for t in self._tracker.tracks]
        best = max(scored, default=(0.0, None))
        return best[1] if best[0] >= min_iou else None

    def track_views(self, track_id: int, n: int) -> TrackViews:
        """A live track's last ``n`` frames (vectors, boxes, the other tracks' vectors); ValueError
        naming the live tracks otherwise."""
        with self._lock:
            track = self._tracker.get(track_id)
            live = [t.id for t in self._tracker.tracks]
        if track is None:
            raise ValueError(f"track {track_id} does not exist (any more); current tracks: "
                             f"{', '.join(map(str, live)) or 'none'}")
        views = self._history.views_of(track_id, n)
        if len(views.rows) == 0:
            raise ValueError(f"track {track_id} has no recent views to learn from")
        return views


def _join_recognised(frame: ObjectFrame, predictions: Sequence[Any], union_predictions: Sequence[Any],
                     held: set[int]) -> tuple[ObjectFrame, list[Any], list[Proposal]]:
    """The frame and its predictions with the pieces that recognition joins made one object each:
    the union of the group's proposals, with the vector and prediction of its chosen pair of
    clearest gain (the union nearest its class), in its first piece's place; and the chosen pairs'
    unions. ``held``: the candidate joins that were joined in the last frame."""
    joins = frame.joins
    chosen = recognised_joins(joins.pairs, frame.proposals, predictions, union_predictions, held)
    if not chosen:
        return frame, list(predictions), []
    props, preds, rows = [], [], []
    for members in join_groups(len(frame.proposals), joins.pairs, chosen):
        if len(members) == 1:
            i = members[0]
            props.append(frame.proposals[i])
            preds.append(predictions[i])
            rows.append(frame.features[i])
            continue
        mine = [k for k in chosen if joins.pairs[k][0] in members]
        best = min(mine, key=lambda k: float(union_predictions[k].distance))
        union = frame.proposals[members[0]]
        for i in members[1:]:
            union = union_proposal(union, frame.proposals[i])
        props.append(union)
        preds.append(union_predictions[best])
        rows.append(joins.features[best])
    joined = ObjectFrame(props, np.stack(rows).astype(frame.features.dtype), frame.shape)
    return joined, preds, [joins.unions[k] for k in chosen]


def _placed(centroids: Sequence[np.ndarray], pose: CameraPose | None) -> tuple[str, np.ndarray]:
    """Camera-frame centroids in ``pose``'s fixed frame (camera frame "" without a pose), (n, 3)."""
    if not len(centroids):
        return ("" if pose is None else pose.frame), np.empty((0, 3))
    points = np.stack([np.asarray(c, float).reshape(3) for c in centroids])
    return ("", points) if pose is None else (pose.frame, pose.to_fixed(points))


def _touches_border(box: Sequence[int], w: int, h: int) -> bool:
    """Whether a half-open box reaches the edge of a (w, h) image (the object may go on beyond it);
    False when the image size is unknown (0)."""
    x0, y0, x1, y1 = box
    return w > 0 and h > 0 and (x0 <= 0 or y0 <= 0 or x1 >= w or y1 >= h)


def _scores(pred: Any) -> dict[str, float]:
    """Class scores of a core Prediction (its top labels/scores; ask for all classes to get all)."""
    return {str(k): float(v) for k, v in zip(pred.top_labels, pred.top_scores)}
