"""The object stream as the learner keeps it, without ROS: each frame's objects classified, their
pieces joined into objects, tracked, and when objects last arrived.

Detections, TeachClass by track and Classify's default answer all read the same state, so it lives
in one object that the learner node feeds with each frame's objects (already converted from the
message); :meth:`ObjectStream.classify_and_track` classifies them with the learner's controller and
tracks them. Thread-safe: the stream callback updates it while a service callback reads it.

One frame (:meth:`ObjectStream.update`): the pieces recognition joins become one object
(``pieces.join_recognised``), the parts of a larger object are dropped (``pieces.nested_parts``),
and the rest go to the track store (``tracks.TrackStore``). With the camera pose of a frame the
tracker matches objects by their centroids in the fixed frame (the robot's base), so an id stays on
its object while the camera moves; the tracks still report the proposals as seen, centroids in the
camera frame (the Detections message's meaning).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from cbcl_pr_ros.perception.camera_pose import CameraPose
from cbcl_pr_ros.perception.tracking import ObjectObservation, Track
from cbcl_pr_ros.perception.types import Proposal

from .frame import ObjectFrame
from .pieces import PIECES, PiecePolicy, held_joins, join_recognised, nested_parts
from .tracks import StreamNegatives, TrackStore, TrackViews

__all__ = ["ObjectStream", "STREAMING_WINDOW_S", "STREAM_TOP_K"]

STREAMING_WINDOW_S = 2.0  # objects count as streaming while one frame of them came this recently
#: class scores per object handed to the tracker: the rest of 1000 classes' softmax is noise, and
#: fusing every class's score over a track's window cost milliseconds per frame in Python
STREAM_TOP_K = 16


class ObjectStream:
    """The track store, the last frame's joins and the time of the last object frame (node clock, seconds)."""

    def __init__(self, window: int, max_missed: int, max_distance_m: float, history: int = 30,
                 policy: PiecePolicy = PIECES) -> None:
        self.policy = policy
        self.tracks = TrackStore(window, max_missed, max_distance_m, history)
        self.reset()

    @property
    def negatives(self) -> StreamNegatives:
        """Recent vectors of the objects seen, negatives for a teach (kept by the track store)."""
        return self.tracks.negatives

    def reset(self) -> None:
        """Forget every track (a cleaned-up node starts again with none)."""
        self.tracks.reset()
        self._last_time = -1e9
        self.last_shape: tuple[int, int] | None = None
        self._view: tuple[int, CameraPose | None] = (0, None)  # the camera pose's view number, and its pose
        self._joined: tuple[str, np.ndarray] = ("", np.empty((0, 3)))  # last frame's joined unions, placed

    def arrived(self, frame: ObjectFrame, now_s: float) -> None:
        """Note that a frame of objects came in (before it is classified: it counts as streaming)."""
        self._last_time = now_s
        self.last_shape = frame.shape

    def streaming(self, now_s: float) -> bool:
        """True while the extractor sends objects (a frame within the last ``STREAMING_WINDOW_S``)."""
        return now_s - self._last_time < STREAMING_WINDOW_S

    def update(self, frame: ObjectFrame, predictions: Sequence[Any] | None, stamp_s: float,
               pose: CameraPose | None = None, union_predictions: Sequence[Any] | None = None,
               together: Callable[[np.ndarray, list], list] | None = None) -> list[Track]:
        """Track one frame; ``predictions`` (one per object, core Predictions) or None when nothing is
        taught yet (objects are still tracked, unlabelled, so that a track id can be taught);
        ``pose``: the camera's pose at the frame's stamp (None: track in the camera frame);
        ``union_predictions``: one per candidate join of the frame, which decide the joins
        (``pieces.recognised_joins``, a join of the last frame held through a near tie); None
        joins nothing; ``together``: the learner's rule for objects seen in one view
        (``CBCLPRLearner.seen_together``), applied to the frame's objects once joined."""
        joined: list[Proposal] = []
        if predictions is not None and union_predictions is not None and frame.joins.pairs:
            held = self._held(frame.joins.unions, pose)
            frame, predictions, joined = join_recognised(frame, predictions, union_predictions, held, self.policy)
        self._joined = _placed([u.centroid for u in joined], pose)
        labels = None if predictions is None else [pr.label if pr.known else "" for pr in predictions]
        parts = nested_parts(frame.proposals, labels, self.policy)  # a piece of a larger proposal is that object
        keep = [i for i in range(len(frame.proposals)) if i not in parts]
        proposals, features = [frame.proposals[i] for i in keep], frame.features[keep]
        if predictions is None:
            obs = [ObjectObservation(p, {}, False) for p in proposals]
        else:
            kept = [predictions[i] for i in keep]
            if together is not None and len(kept) > 1:
                kept = together(features, kept)
            obs = [ObjectObservation(p, _scores(pr), bool(pr.known)) for p, pr in zip(proposals, kept)]
        if pose is not None and obs:
            fixed = pose.to_fixed(np.stack([o.proposal.centroid for o in obs]))
            h, w = frame.shape
            for o, x in zip(obs, fixed):
                o.position, o.frame = x, pose.frame
                o.cut = _touches_border(o.proposal.box, w, h)
        return self.tracks.update(obs, features, stamp_s, self._view_of(pose))

    def classify_and_track(self, frame: ObjectFrame, controller: Any, stamp_s: float,
                           pose: CameraPose | None = None) -> tuple[int, list[Track]]:
        """Classify the frame's objects in one batch with ``controller`` (a LearnerController), then
        track them (in ``pose``'s fixed frame when given); (model version of the answers, tracks).
        Nothing taught yet, or no object: the objects are tracked unlabelled."""
        version, predictions, unions = _classified(frame, controller)
        return version, self.update(frame, predictions, stamp_s, pose, unions, controller.seen_together)

    def as_shown(self, frame: ObjectFrame, controller: Any) -> ObjectFrame:
        """``frame``'s objects as the detections show them, untracked: the pieces recognition joins as
        one object each (with the union's vector), the parts of a larger object dropped. A teach of
        "the object in view" picks among these, so it learns the object the detections name, and no
        piece of it is a negative. A join the stream holds through a near tie is not held here."""
        _, predictions, unions = _classified(frame, controller)
        if predictions is not None and unions is not None and frame.joins.pairs:
            frame, predictions, _ = join_recognised(frame, predictions, unions, set(), self.policy)
        labels = None if predictions is None else [pr.label if pr.known else "" for pr in predictions]
        parts = nested_parts(frame.proposals, labels, self.policy)
        if not parts:
            return frame
        keep = [i for i in range(len(frame.proposals)) if i not in parts]  # the joins' indices no longer hold
        return ObjectFrame([frame.proposals[i] for i in keep], frame.features[keep], frame.shape)

    def _held(self, unions: Sequence[Proposal], pose: CameraPose | None) -> set[int]:
        """Indices of ``unions`` that lie where a union was joined in the last frame (in the same frame
        of reference): that join, seen again."""
        frame, last = self._joined
        here, now = _placed([u.centroid for u in unions], pose)
        return held_joins(now, last, self.policy) if frame == here else set()

    def _view_of(self, pose: CameraPose | None) -> int | None:
        """A number per camera view: the same while the camera stays within 5 mm and 0.5 degrees."""
        if pose is None:
            return None
        number, seen = self._view
        moved = seen is not None and any(m > lim for m, lim in zip(pose.moved_from(seen), (0.005, 0.009)))
        if seen is None or seen.frame != pose.frame or moved:
            self._view = number, seen = number + 1, pose
        return number

    def track_at(self, box: Sequence[int], min_iou: float = 0.5) -> int | None:
        """The id of the live track whose last box overlaps ``box`` most (at least ``min_iou``), or None:
        the track of an object taught by box or as the object in view."""
        return self.tracks.track_at(box, min_iou)

    def track_views(self, track_id: int, n: int) -> TrackViews:
        """A live track's last ``n`` frames (vectors, boxes, the other tracks' vectors); ValueError
        naming the live tracks otherwise."""
        return self.tracks.track_views(track_id, n)

    def history_mark(self) -> int:
        """The number of the next frame the track history keeps (see :meth:`earlier_views`)."""
        return self.tracks.mark()

    def earlier_views(self, track_id: int, n: int, before: int) -> TrackViews:
        """A track's last ``n`` frames kept before frame number ``before`` (:meth:`history_mark`
        taken when a teach began): the views it had before the teach's own frames; empty when none."""
        return self.tracks.earlier_views(track_id, n, before)


def _classified(frame: ObjectFrame, controller: Any) -> tuple[int, Sequence[Any] | None, Sequence[Any] | None]:
    """(model version, a prediction per object, one per candidate join) of one frame, in one batch;
    None for both before anything is taught, for a frame without objects or a failed answer."""
    version = controller.model_version
    if not (frame.proposals and controller.classes):
        return version, None, None
    n, joins = len(frame.proposals), frame.joins
    rows = frame.features if not joins.pairs else np.concatenate([frame.features, joins.features])
    # pieces and unions in one batch; the tracker fuses the best STREAM_TOP_K scores of each (a
    # class absent from a frame counts 0), so its work per frame does not grow with the household
    out = controller.classify(rows, top_k=min(len(controller.classes), STREAM_TOP_K))
    if not out.success:
        return version, None, None
    return out.model_version, out.predictions[:n], (out.predictions[n:] if joins.pairs else None)


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
