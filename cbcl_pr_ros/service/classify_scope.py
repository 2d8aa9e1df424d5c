"""What a Classify request answers for: the objects in view or the whole frame.

A robot asks "what is this?" about the object in front of it. Answering for the whole frame (table
and all) gave a second, different answer beside the ``detections`` topic, e.g. "unknown" for a frame
whose one object the detections named. So by default Classify on the camera stream answers with the
latest detections, and for the whole frame only when asked (``SCOPE_FRAME``) or when no objects
are streamed. No ROS here: the learner node maps the request onto :func:`plan_classify`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

from cbcl_pr_ros.perception import crop_images, propose
from cbcl_pr_ros.perception.boxes import pick_in_view
from cbcl_pr_ros.request_checks import decode_request_images, features_from_msgs

__all__ = ["SCOPE_DEFAULT", "SCOPE_OBJECTS", "SCOPE_FRAME", "ClassifyPlan", "plan_classify", "object_in_view",
           "image_object_crop", "ClassifyRequest", "ClassifyPort", "classify_vectors"]

# Classify.scope constants (same numbers as srv/Classify.srv)
SCOPE_DEFAULT, SCOPE_OBJECTS, SCOPE_FRAME = 0, 1, 2

Box = tuple[int, int, int, int]


@dataclass(frozen=True)
class ClassifyPlan:
    """``source``: feature | image | stream; ``target``: frame (whole frame/image/vector), objects
    (the latest detections of the stream) or object (the sent image's object in view); ``note`` goes
    into the answer's message."""

    source: str
    target: str
    note: str = ""


def plan_classify(scope: int, has_feature: bool, has_image: bool, objects_streaming: bool) -> ClassifyPlan:
    """Check a Classify request's scope against what it sends; ValueError with the reason when they clash.

    Precedence of sources as before: a feature vector > an image > the camera stream.
    """
    if scope not in (SCOPE_DEFAULT, SCOPE_OBJECTS, SCOPE_FRAME):
        raise ValueError(f"scope {scope} is not one of SCOPE_DEFAULT=0, SCOPE_OBJECTS=1, SCOPE_FRAME=2")
    if has_feature:
        if scope == SCOPE_OBJECTS:
            raise ValueError("a feature vector has no objects to find: send an image, or ask for the camera "
                             "stream (no image, no feature), or scope SCOPE_FRAME")
        return ClassifyPlan("feature", "frame")
    if has_image:
        return ClassifyPlan("image", "object" if scope == SCOPE_OBJECTS else "frame")
    if scope == SCOPE_FRAME:
        return ClassifyPlan("stream", "frame")
    if objects_streaming:
        return ClassifyPlan("stream", "objects")
    if scope == SCOPE_OBJECTS:
        raise ValueError("no objects are streaming (the feature extractor sends objects once depth frames "
                         "arrive, or with detect_objects: on): ask scope SCOPE_FRAME for the whole frame")
    return ClassifyPlan("stream", "frame", " (whole frame: no objects are streaming)")


def object_in_view(boxes: Sequence[Sequence[float]], image_shape: Sequence[int]) -> int | None:
    """Index of the object a "what is this?" is about: the largest, most central box (None when none)."""
    return pick_in_view(boxes, image_shape)


def image_object_crop(rgb: np.ndarray, margin: float = 0.1) -> tuple[Box, np.ndarray] | None:
    """The box and crop of an image's object in view (RGB proposals), or None when it shows none."""
    props = propose(rgb)
    k = pick_in_view([p.box for p in props], rgb.shape)
    if k is None:
        return None
    return props[k].box, crop_images(rgb, [props[k]], margin)[0]


@dataclass(frozen=True)
class ClassifyRequest:
    """A Classify request as received (untrusted): ``feature`` has FeatureVector's fields (empty
    ``values``: none sent), ``image`` sensor_msgs/Image's (no data and width 0: none sent)."""

    scope: int
    feature: Any
    image: Any
    top_k: int = 0

    @property
    def has_feature(self) -> bool:
        return len(self.feature.values) > 0

    @property
    def has_image(self) -> bool:
        return len(self.image.data) > 0 or int(self.image.width) > 0


class ClassifyPort(Protocol):
    """What :func:`classify_vectors` needs from the node that serves Classify."""

    def extract(self, rgbs: list[np.ndarray]) -> np.ndarray:
        """(n, d) vectors of RGB arrays; FeatureSourceError on failure."""

    def latest_features(self) -> Any:
        """The newest FeatureVector-like of the camera stream, or None."""

    def no_frame_reason(self) -> str:
        """Why there is no camera frame to answer for (inactive, or nothing received yet)."""


def classify_vectors(req: ClassifyRequest, plan: ClassifyPlan, port: ClassifyPort, backbone: str, feature_dim: int,
                     limits: Any, crop_margin: float) -> tuple[np.ndarray, Any, Box | None, ClassifyPlan]:
    """(vectors, what they came from (its ``header`` stamps the answer), the object's box or None,
    the plan as carried out) for a Classify whose target is not the stream's objects; ValueError or
    FeatureSourceError with the reason when the request cannot be answered."""
    from dataclasses import replace


    if plan.source == "feature":
        return features_from_msgs([req.feature], backbone, feature_dim), req.feature, None, plan
    if plan.source == "image":
        rgb = decode_request_images([req.image], limits)[0]  # the one decode of the request's image
        if plan.target == "object":
            found = image_object_crop(rgb, crop_margin)
            if found is not None:
                return port.extract([found[1]]), req.image, found[0], plan
            plan = replace(plan, target="frame", note=" (whole image: no object found in it)")
        return port.extract([rgb]), req.image, None, plan
    latest = port.latest_features()
    if latest is None:
        raise ValueError(port.no_frame_reason())
    return features_from_msgs([latest], backbone, feature_dim), latest, None, plan
