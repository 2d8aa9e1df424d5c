"""TeachClass without ROS: one object turns a request into the examples to learn, then commits them.

The learner node copies a TeachClass message into a :class:`TeachRequest` (nothing checked yet),
calls :meth:`Teacher.teach` and fills the response from the :class:`TeachOutcome` it returns. The
Teacher checks every field (``request_checks.py``), plans where the examples come from
(``service/object_teaching.py``: feature vectors, request images, camera frames or one track's views;
the whole frame, the object in view or given boxes), gathers them through a :class:`TeachingPort`
that the node implements (backbone, stream frames, the time), and commits through the same port,
under the node's commit lock. A refusal says why and changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Protocol, Sequence

import numpy as np

from cbcl_pr_ros.features.augment import teach_views, teaching_vectors
from cbcl_pr_ros.objects.frame import ObjectFrame
from cbcl_pr_ros.objects.stream import ObjectStream
from cbcl_pr_ros.perception import select_teaching_proposal
from cbcl_pr_ros.perception.boxes import choose_in_box, pick_in_view
from cbcl_pr_ros.plurals import counted, noun
from cbcl_pr_ros.service.controller import LearnerController, TeachOutcome
from cbcl_pr_ros.service.object_teaching import Roi, TeachPlan, one_shot_per_view, plan_teach, roi_box, teaching_crops
from cbcl_pr_ros.request_checks import (
    RequestLimits,
    check_count,
    check_label,
    check_num_frames,
    check_timeout,
    decode_request_images,
    features_from_msgs,
)

__all__ = ["FeatureSourceError", "NothingLearned", "Taught", "TeachRequest", "TeachSettings", "TeachingPort", "Teacher",
           "piece_rows", "union_box"]

# what a person does when the camera saw no object at all (the learner has nothing else to say)
_NOTHING_IN_VIEW = (": put the object where the camera sees it (on the table, in the picture), or teach the "
                    "whole picture (mode: 2, MODE_FRAME)")


class FeatureSourceError(RuntimeError):
    """The vectors could not be computed; the message is fit for a service response."""


class NothingLearned(ValueError):
    """A refusal whose message is the whole answer (it already says that nothing was learned)."""


@dataclass(frozen=True)
class TeachRequest:
    """A TeachClass request as received: every field untrusted until :class:`Teacher` checks it.

    ``images``: objects with sensor_msgs/Image's fields (encoding, height, width, step, data,
    is_bigendian); ``features``: objects with FeatureVector's (backbone, dimension, values);
    ``rois``: (x_offset, y_offset, width, height) each.
    """

    label: Any
    mode: int = 0
    track_id: int = -1
    rois: tuple[Roi, ...] = ()
    images: tuple[Any, ...] = ()
    features: tuple[Any, ...] = ()
    num_frames: int = 0
    timeout_s: float = 0.0


@dataclass(frozen=True)
class TeachSettings:
    """The learner's teaching parameters at the moment of the request (some are settable at run time)."""

    teach_from: str = "auto"
    crop_margin: float = 0.1
    num_frames: int = 5
    max_frames: int = 100
    timeout_s: float = 10.0
    max_timeout_s: float = 60.0
    views: int = 0
    view_spread: float = 0.5
    seed: int = 0
    negatives: str = "frames"  # frames | frames+stream | stream (the ``teach_negatives`` parameter)

    @classmethod
    def from_params(cls, p: Mapping[str, Any]) -> "TeachSettings":
        """The settings among the learner's parameter values (``settings.params`` names)."""
        return cls(teach_from=str(p["teach_from"]), crop_margin=float(p["crop_margin"]),
                   num_frames=int(p["teach_num_frames"]), max_frames=int(p["max_teach_frames"]),
                   timeout_s=float(p["teach_timeout_s"]), max_timeout_s=float(p["max_teach_timeout_s"]),
                   views=int(p["teach_views"]), view_spread=float(p["teach_view_spread"]), seed=int(p["seed"]),
                   negatives=str(p["teach_negatives"]))


class TeachingPort(Protocol):
    """What a Teacher needs from the node that serves it."""

    def teach_settings(self) -> TeachSettings:
        """The current teaching parameters."""

    def extract(self, rgbs: list[np.ndarray]) -> np.ndarray:
        """(n, d) vectors of at most ``max_images_per_request`` RGB images; FeatureSourceError on failure."""

    def collect(self, n: int, timeout_s: float, stream: str) -> list[Any]:
        """The next ``n`` frames of ``stream`` ('features': FeatureVector-like, 'objects': ObjectFrame),
        fewer on time-out; ValueError when the node leaves the active state meanwhile."""

    def now_s(self) -> float:
        """The node clock in seconds."""

    def topic(self, stream: str) -> str:
        """The resolved topic name of ``stream``, for messages."""

    def commit(self, c: LearnerController, label: str, feats: np.ndarray, source: str, views: Any,
               negatives: np.ndarray | None = None) -> TeachOutcome:
        """Teach under the node's commit lock (refused when the node no longer serves ``c``);
        ``negatives``: vectors of the other objects of the teaching frames (:meth:`LearnerController.teach`)."""


Examples = tuple[np.ndarray, Any, str]  # vectors (n, d), teach-time views (n, k, d) or None, source text
# Examples, the other objects' vectors (negatives, or None) and what was taught
Gathered = tuple[np.ndarray, Any, str, "np.ndarray | None", "Taught"]
# the other objects of the teaching frames given to the learner as negatives, per teach at most
MAX_FRAME_NEGATIVES = 64


class Teacher:
    """Owns the teaching plan of every TeachClass: checks, source, limits, views, crops, tracks."""

    def __init__(self, port: TeachingPort, objects: ObjectStream, backbone: str, limits: RequestLimits) -> None:
        self.port = port
        self.objects = objects
        self.backbone = backbone
        self.limits = limits

    def teach(self, c: LearnerController, req: TeachRequest) -> TeachOutcome:
        """Learn ``req`` into ``c``'s memory, or a refusal that says why (nothing changed then)."""
        try:
            label = check_label(req.label)
            s = self.port.teach_settings()
            plan = plan_teach(int(req.mode), int(req.track_id), req.rois, len(req.images), len(req.features),
                              s.teach_from, self.objects.streaming(self.port.now_s()))
            if plan.target == "frame":
                (feats, views, source), others, taught = self._whole_frames(c, req, s), None, Taught()
            else:
                feats, views, source, others, taught = self._objects(c, req, plan, s)
        except NothingLearned as exc:
            return c.refused(str(exc))
        except (TypeError, ValueError, FeatureSourceError) as exc:  # RequestError is a ValueError
            return c.refused(f"nothing learned: {exc}")
        outcome = self.port.commit(c, label, feats, source, views, negatives=others)
        if outcome.success:
            outcome.taught_track_id, outcome.taught_box = taught.track_id, taught.box
        return outcome

    # ------------------------------------------------------------------ whole frames
    def _whole_frames(self, c: LearnerController, req: TeachRequest, s: TeachSettings) -> Examples:
        """Feature vectors, request images or the next camera frames, each learned whole."""
        if len(req.features) > 0:
            check_count(len(req.features), self.limits.max_images_per_request, "feature vectors")
            feats = features_from_msgs(req.features, self.backbone, c.feature_dim)
            return feats, None, noun(len(feats), "feature vector")
        if len(req.images) > 0:
            feats, views, note = self._image_vectors(decode_request_images(req.images, self.limits), s)
            return feats, views, f"{noun(len(feats), 'image')}{note}"
        n = check_num_frames(req.num_frames, s.num_frames, s.max_frames)
        timeout = check_timeout(req.timeout_s, s.timeout_s, s.max_timeout_s)
        frames = self.port.collect(n, timeout, "features")
        if not frames:
            raise NothingLearned(f"no camera frames arrived within {timeout:.1f} s on '{self.port.topic('features')}'"
                                 f"{self._upstream('features')}: is the camera and the feature_extractor "
                                 f"running (and this node active)? Nothing was learned.")
        feats = features_from_msgs(frames, self.backbone, c.feature_dim)
        return feats, None, (noun(len(feats), "camera frame")
                             + ("" if len(frames) == n else f" (of {n} asked; timed out)"))

    def _image_vectors(self, rgbs: list[np.ndarray], s: TeachSettings) -> Examples:
        """Vectors of RGB images to teach and of ``s.views`` jittered views of each (n, k, d; None when
        off; :mod:`cbcl_pr_ros.features.augment`), asked in chunks the feature source accepts. The
        views are made as their chunk is sent: all at once they were (1 + views) times the request's
        images in memory (64 of 4096x4096 with 16 views each: 51 GiB)."""
        step = max(1, int(self.limits.max_images_per_request))
        parts, chunk = [], []
        for image in _with_views(rgbs, s.views, s.seed):
            chunk.append(image)
            if len(chunk) == step:
                parts.append(self.port.extract(chunk))
                chunk = []
        if chunk:
            parts.append(self.port.extract(chunk))
        feats = parts[0] if len(parts) == 1 else np.vstack(parts)
        if not s.views:
            return feats, None, ""
        shots, views = teaching_vectors(feats, len(rgbs), s.views, s.view_spread)
        return shots, views, f" + {counted(s.views, 'view')} each"

    # ------------------------------------------------------------------ objects
    def _objects(self, c: LearnerController, req: TeachRequest, plan: TeachPlan,
                 s: TeachSettings) -> Gathered:
        """The object in view, the given boxes or one track: from request images or the object stream;
        with the vectors of the other objects of the teaching frames (None where there are none)."""
        check_count(len(plan.rois), self.limits.max_images_per_request, "rois")  # limits as for whole frames
        n = check_num_frames(req.num_frames, s.num_frames, s.max_frames)
        if plan.source == "images":
            crops, note = teaching_crops(decode_request_images(req.images, self.limits), plan, s.crop_margin)
            feats, views, view_note = self._image_vectors(crops, s)
            return feats, views, f"{noun(len(feats), 'image')}{note}{view_note}", None, Taught()
        if plan.target == "track":
            track = self.objects.track_views(plan.track_id, n)
            others = track.others[-MAX_FRAME_NEGATIVES:]
            others = others if len(others) else None
            negatives = self._with_stream(others, s, plan.track_id)
            # One shot per view, as on the box and object-in-view paths: the copies of a still view
            # would each count as a view and shrink the gate (docs/perception.md "Over ROS"), and the
            # result would depend on how many frames the track had when the teach came.
            shots = one_shot_per_view(track.rows, track.boxes)
            taught = Taught(int(plan.track_id), tuple(int(v) for v in track.boxes[-1]))  # type: ignore[arg-type]
            return shots, None, (f"{noun(len(shots), 'view')} of track {plan.track_id} (its last "
                                 f"{counted(len(track.rows), 'frame')} as {counted(len(shots), 'view')}; last at "
                                 f"{box_text(track.boxes[-1])})"), negatives, taught
        return self._object_frames(c, req, plan, n, s)

    def _upstream(self, stream: str) -> str:
        """" (...)": which node feeds ``stream`` and from which camera, where the port can tell."""
        tell = getattr(self.port, "upstream", None)
        return f" ({tell(stream)})" if tell is not None else ""

    def _with_stream(self, frame_negatives: np.ndarray | None, s: TeachSettings,
                     taught_track: int | None) -> np.ndarray | None:
        """The negatives ``s.negatives`` asks for: the teaching frames' other objects, the recent objects
        of the stream (:class:`~cbcl_pr_ros.objects.tracks.StreamNegatives`) seen beside the taught
        track (never its own), or both; ``stream`` falls back on the frames' while the stream store is
        empty."""
        if s.negatives not in ("frames", "frames+stream", "stream"):
            raise ValueError(f"teach_negatives must be frames, frames+stream or stream, got {s.negatives[:40]!r}")
        stream = None
        if s.negatives != "frames":
            stream = (self.objects.negatives.vectors() if taught_track is None else
                      self.objects.negatives.vectors((taught_track,), seen_with=taught_track))
        if s.negatives == "stream" and stream is not None:
            frame_negatives = None
        parts = [x for x in (frame_negatives, stream) if x is not None and len(x)]
        return np.vstack(parts).astype(np.float32) if parts else None

    def _object_frames(self, c: LearnerController, req: TeachRequest, plan: TeachPlan, n: int,
                       s: TeachSettings) -> Gathered:
        """The object in view (among the objects as the detections show them, ``ObjectStream.as_shown``)
        or the object mostly inside the one box (its pieces together) of each of the next ``n`` object
        frames, with up to ``n`` earlier views of its track (:meth:`_earlier`, as a teach by track
        takes them), and the vectors of the other objects of those frames (natural negatives; at most
        :data:`MAX_FRAME_NEGATIVES`, None when there are none)."""
        shape = self.objects.last_shape
        if plan.target == "roi" and shape is not None:
            roi_box(plan.rois[0], shape, "camera image")  # fail now, not after waiting
        timeout = check_timeout(req.timeout_s, s.timeout_s, s.max_timeout_s)
        mark = self.objects.history_mark()  # the track's views before this are earlier views
        frames: list[ObjectFrame] = self.port.collect(n, timeout, "objects")
        if not frames:
            raise ValueError(f"no object frames arrived within {timeout:.1f} s on '{self.port.topic('objects')}'"
                             f"{self._upstream('objects')}: is the feature_extractor detecting objects "
                             f"(detect_objects)?")
        got = self._picked(c, plan, frames)
        where = " inside the box" if plan.target == "roi" else ""
        if not got.rows:
            raise ValueError(f"no object found{where} {noun(len(frames), 'in the', 'in any of the')} "
                             f"{counted(len(frames), 'camera frame')}"
                             + (f": {got.reason}" if got.reason else _NOTHING_IN_VIEW))
        negatives = np.stack(got.others[-MAX_FRAME_NEGATIVES:]) if got.others else None
        track = self.objects.track_at(got.last)
        negatives = self._with_stream(negatives, s, track)  # never the taught track's own vectors
        rows, boxes, earlier = self._earlier(c, track, n, mark, got.rows)
        shots = one_shot_per_view(np.stack(rows + got.rows), boxes + got.boxes)
        unit = "crop" if got.pieces > 1 else "frame"
        total = len(rows) + len(got.rows)
        views = "" if len(shots) == total else f", {counted(total, unit)} as {counted(len(shots), 'view')}"
        what = (f"the object at {box_text(got.last)}" + ("" if track is None else f", track {track}")
                + (f", {got.pieces} pieces together" if got.pieces > 1 else "") + earlier)
        return shots, None, (f"{noun(len(shots), 'object crop')} of camera frames{where}{views}"
                             + (f" ({got.missed} of {counted(len(frames), 'frame')} had none)" if got.missed else "")
                             + ("" if len(frames) == n
                                else f" ({len(frames)} of {counted(n, 'frame')} asked; timed out)")
                             + f"; {what}"), negatives, Taught(-1 if track is None else int(track), got.last)

    def _picked(self, c: LearnerController, plan: TeachPlan, frames: list[ObjectFrame]) -> "_Picked":
        """The picked object's vectors and boxes in each frame (the box's, or the object in view), the
        other objects' vectors, and what the answer tells: frames without one, why, its last box."""
        got = _Picked()
        for f in frames:
            if plan.target == "roi":
                try:  # a frame of another size (another publisher's) holds no such box: that frame is skipped
                    box = roi_box(plan.rois[0], f.shape, "camera image")
                except ValueError as exc:
                    got.missed, got.reason = got.missed + 1, str(exc)
                    continue
                choice = choose_in_box(f.proposals, f.shape, box)
                picked, got.reason = choice.indices, choice.reason or got.reason
            else:
                f = self.objects.as_shown(f, c)
                k = pick_in_view([p.box for p in f.proposals], f.shape)
                picked = () if k is None else (k,)
            if not picked:
                got.missed += 1
                continue
            got_rows, got_boxes = piece_rows(f, picked)
            got.rows += got_rows
            got.boxes += got_boxes
            got.last, got.pieces = union_box([f.proposals[i].box for i in picked]), len(picked)
            got.others += [f.features[j] for j in range(len(f.features)) if j not in picked]
        return got

    def _earlier(self, c: LearnerController, track: int | None, n: int, mark: int,
                 shots: list[np.ndarray]) -> tuple[list[np.ndarray], list[tuple[int, ...]], str]:
        """The picked object's track's last ``n`` views from before the teach (frames kept before
        ``mark``), those consistent with the object picked now (``CBCLPRLearner.one_object``: no other
        object of their frame looks more like it, else the track was on another object then), with
        their boxes and a note for the answer. Nothing without a track: a teach by box or of the object
        in view then learns its own frames only, as a teach by track learns the track's."""
        if track is None:
            return [], [], ""
        views = self.objects.earlier_views(int(track), n, mark)
        if len(views.rows) == 0:
            return [], [], ""
        keep = c.learner_.one_object(np.stack(shots), views.rows, list(views.rivals))
        rows = [r for r, k in zip(views.rows, keep) if k]
        boxes = [tuple(b) for b, k in zip(views.boxes, keep) if k]
        left = len(keep) - len(rows)
        note = f" + {counted(len(rows), 'earlier frame')} of its track" if rows else ""
        return rows, boxes, note + (f" ({counted(left, 'earlier frame')} of the track left out: another "
                                    f"object there looked more like it)" if left else "")


@dataclass
class _Picked:
    """What :meth:`Teacher._picked` found in a teach's frames."""
    rows: list = field(default_factory=list)
    boxes: list = field(default_factory=list)
    others: list = field(default_factory=list)
    missed: int = 0
    reason: str = ""
    last: tuple[int, int, int, int] | None = None
    pieces: int = 1


@dataclass(frozen=True)
class Taught:
    """What a teach used: the track of the object (-1: none) and its box (x0, y0, x1, y1) in the last
    frame used (None: none), for the answer and the page's highlight."""
    track_id: int = -1
    box: tuple[int, int, int, int] | None = None


def union_box(boxes: Sequence[Sequence[int]]) -> tuple[int, int, int, int]:
    """The smallest (x0, y0, x1, y1) box holding all ``boxes``."""
    return (int(min(b[0] for b in boxes)), int(min(b[1] for b in boxes)),
            int(max(b[2] for b in boxes)), int(max(b[3] for b in boxes)))


def box_text(b: Sequence[int]) -> str:
    return f"({int(b[0])}, {int(b[1])})-({int(b[2])}, {int(b[3])})"


def piece_rows(frame: ObjectFrame, picked: Sequence[int]) -> tuple[list[np.ndarray], list[tuple[int, ...]]]:
    """Vectors and boxes to learn for the ``picked`` proposals of one object in ``frame``: two pieces the
    extractor offered as a join take that join's vector (the crop of the whole object); otherwise each
    piece is one more view of the object."""
    if len(picked) == 2 and frame.joins.features is not None:
        pair = {int(picked[0]), int(picked[1])}
        for q, (i, j) in enumerate(frame.joins.pairs):
            if {int(i), int(j)} == pair and q < len(frame.joins.features):
                return [frame.joins.features[q]], [tuple(frame.joins.unions[q].box)]
    return [frame.features[i] for i in picked], [tuple(frame.proposals[i].box) for i in picked]


def _with_views(rgbs: Sequence[np.ndarray], n: int, seed: int) -> Iterator[np.ndarray]:
    """The images of :func:`~cbcl_pr_ros.features.augment.with_teach_views`, in its order and with its
    seeds, made one image's views at a time."""
    yield from rgbs
    for i, rgb in enumerate(rgbs if n else ()):
        yield from teach_views(rgb, n, seed + i)

