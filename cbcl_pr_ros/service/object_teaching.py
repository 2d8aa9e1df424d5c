"""Teaching by object without ROS: which part of each image or frame a TeachClass learns.

A request names the object by a mode (the object in view, or the whole frame), a track id of the
detections topic, or boxes (``rois``). :func:`plan_teach` checks those untrusted fields against each
other and says where the examples come from; :func:`roi_box` checks a box against an image;
:func:`teaching_crops` turns request images into the crops to learn from; a track's recent vectors
come from the object stream (``objects.tracks.TrackHistory``). The learner node
converts the request, calls these, and answers with the ValueError's text when one is raised:
nothing is learned then.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from cbcl_pr_ros.perception import Proposal, crop_images
from cbcl_pr_ros.perception.boxes import box_iou
from cbcl_pr_ros.plurals import counted, noun
from cbcl_pr_ros.service.classify_scope import image_object_crop

__all__ = ["TEACH_FROM", "MODE_DEFAULT", "MODE_OBJECT", "MODE_FRAME", "TeachPlan", "plan_teach", "roi_box",
           "teaching_crops", "SAME_VIEW_IOU", "one_shot_per_view"]

# values of the learner's ``teach_from`` parameter
TEACH_FROM = ("auto", "object", "frame")
# TeachClass.mode constants (same numbers as srv/TeachClass.srv)
MODE_DEFAULT, MODE_OBJECT, MODE_FRAME = 0, 1, 2

Box = tuple[int, int, int, int]
# the object's boxes in two teaching frames overlap at least this much: the camera and the object stood
# still between them, so the two frames show one view (see one_shot_per_view)
SAME_VIEW_IOU = 0.8
Roi = tuple[int, int, int, int]  # x_offset, y_offset, width, height (sensor_msgs/RegionOfInterest)


@dataclass(frozen=True)
class TeachPlan:
    """Where a TeachClass takes its examples from.

    ``source``: features | images | stream; ``target``: frame (whole frames), object (the object in
    view), roi (the given boxes) or track (one track's crops).
    """

    source: str
    target: str
    track_id: int | None = None
    rois: tuple[Roi, ...] = ()


def plan_teach(mode: int, track_id: int, rois: Sequence[Roi], n_images: int, n_features: int,
               teach_from: str = "auto", objects_streaming: bool = False) -> TeachPlan:
    """Check the object fields of a TeachClass request; ValueError with the reason when they clash.

    Precedence of sources: features > images > the camera stream. ``mode``
    default follows ``teach_from``: ``auto`` learns the object in view from the stream when the
    extractor sends objects (``objects_streaming``) and whole images when images are sent (a
    client that sends images has framed them), ``object``/``frame`` force one.
    """
    if teach_from not in TEACH_FROM:
        raise ValueError(f"teach_from must be one of {TEACH_FROM}, got {teach_from!r}")
    if mode not in (MODE_DEFAULT, MODE_OBJECT, MODE_FRAME):
        raise ValueError(f"mode {mode} is not one of MODE_DEFAULT=0, MODE_OBJECT=1, MODE_FRAME=2")
    tid = int(track_id)
    if tid < -1:
        raise ValueError(f"track_id {tid} is not a track id (>= 0) nor -1 (none)")
    rois = tuple(tuple(int(v) for v in r) for r in rois)
    source = "features" if n_features > 0 else "images" if n_images > 0 else "stream"
    if tid >= 0 and rois:
        raise ValueError("give either track_id or rois, not both")
    if source == "features":
        if tid >= 0 or rois or mode == MODE_OBJECT:
            raise ValueError("track_id, rois and MODE_OBJECT need images or camera frames, not feature vectors")
        return TeachPlan("features", "frame")
    if tid >= 0:
        if source == "images":
            raise ValueError("track_id names an object of the camera stream: send no images with it")
        if mode == MODE_FRAME:
            raise ValueError("track_id teaches one object: it cannot be combined with MODE_FRAME")
        return TeachPlan("stream", "track", track_id=tid)
    if rois:
        if mode == MODE_FRAME:
            raise ValueError("rois select objects: they cannot be combined with MODE_FRAME")
        if source == "images" and len(rois) not in (1, n_images):
            raise ValueError(f"{len(rois)} rois for {n_images} images: send one box for all, or one per image")
        if source == "stream" and len(rois) != 1:
            raise ValueError(f"{len(rois)} rois for camera frames: send one box (the frames are not known yet)")
        return TeachPlan(source, "roi", rois=rois)
    if mode == MODE_OBJECT:
        return TeachPlan(source, "object")
    if mode == MODE_FRAME:
        return TeachPlan(source, "frame")
    if teach_from == "object":
        return TeachPlan(source, "object")
    if teach_from == "frame" or source == "images":
        return TeachPlan(source, "frame")
    return TeachPlan(source, "object" if objects_streaming else "frame")


def roi_box(roi: Roi, image_shape: Sequence[int], what: str = "image") -> Box:
    """(x0, y0, x1, y1) of a RegionOfInterest (x, y, width, height); ValueError when it is empty or
    not inside the image (a box outside the image is a mistake of the caller, not something to clip)."""
    x, y, w, h = (int(v) for v in roi)
    H, W = int(image_shape[0]), int(image_shape[1])
    if w <= 0 or h <= 0:
        raise ValueError(f"box (x {x}, y {y}, width {w}, height {h}) is empty")
    if x < 0 or y < 0 or x + w > W or y + h > H:
        raise ValueError(f"box (x {x}, y {y}, width {w}, height {h}) lies outside the {W}x{H} {what}")
    return x, y, x + w, y + h


def teaching_crops(rgbs: Sequence[np.ndarray], plan: TeachPlan, margin: float = 0.1) -> tuple[list[np.ndarray], str]:
    """The crops to learn from for request images, and a note for the answer.

    ``frame``: the images as they are. ``roi``: each image's box (one for all, or one per image).
    ``object``: the object in view of each image (RGB proposals, the largest and most central);
    images with no object are skipped and counted. ValueError when a box is outside its image or
    no image holds an object.
    """
    if plan.target == "frame":
        return list(rgbs), ""
    nan3 = np.full(3, np.nan)
    out: list[np.ndarray] = []
    if plan.target == "roi":
        for i, rgb in enumerate(rgbs):
            box = roi_box(plan.rois[i if len(plan.rois) > 1 else 0], rgb.shape, f"image {i}")
            out += crop_images(rgb, [Proposal(box, None, nan3, nan3, 1.0)], margin)
        return out, " (crops of the given boxes)"
    if plan.target != "object":
        raise ValueError(f"request images cannot be taught as {plan.target!r}")
    missed = []
    for i, rgb in enumerate(rgbs):
        found = image_object_crop(rgb, margin)
        if found is None:
            missed.append(i)
            continue
        out.append(found[1])
    if not out:
        raise ValueError(f"no object found {noun(len(rgbs), 'in the', 'in any of the')} "
                         f"{counted(len(rgbs), 'image')}: send rois (boxes) or "
                         "mode MODE_FRAME")
    note = " (crops of the object in view" + (f"; no object in images {missed}, skipped)" if missed else ")")
    return out, note


def one_shot_per_view(rows: np.ndarray, boxes: Sequence[Box], same_iou: float = SAME_VIEW_IOU) -> np.ndarray:
    """One shot (the mean vector) per view among a teach's frames: the frames whose object box
    overlaps the first box of an earlier group by ``same_iou`` or more join that group.

    Why: a still camera sends near-copies of one view, and the learner counts every shot as a view
    of its own: ten copies of one view would tell it the class hardly varies, and its open-set gate
    shrinks until the object seen from anywhere else is refused (docs/perception.md "Over ROS").
    The mean of the copies keeps their information and smooths the sensor's noise.
    """
    x = np.asarray(rows, np.float32)
    if len(x) != len(boxes):
        raise ValueError(f"{len(boxes)} boxes for {len(x)} rows")
    firsts: list[Box] = []
    members: list[list[int]] = []
    for i, b in enumerate(boxes):
        j = next((g for g, f in enumerate(firsts) if box_iou(f, b) >= same_iou), None)
        if j is None:
            firsts.append(tuple(b))
            members.append([i])
        else:
            members[j].append(i)
    return np.stack([x[m].mean(axis=0) for m in members]).astype(np.float32)
