"""Issue 20, outcome 5: Classify answers for the objects in view (the detections' answers) by default."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cbcl_pr_ros.perception import ObjectObservation, ObjectTracker, Proposal
from cbcl_pr_ros.service.classify_scope import (SCOPE_DEFAULT, SCOPE_FRAME, SCOPE_OBJECTS, image_object_crop,
                                                object_in_view, plan_classify)


def _det(labels_boxes, shape=(480, 640)):
    """A Detections message with one tracked, labelled object per (label, box)."""
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.detections_msgs import make_detections_msg

    obs = [ObjectObservation(Proposal(tuple(b), None, np.array([0.0, 0.0, 0.6]), np.full(3, 0.05), 0.9),
                             {lab: 0.8, "other": 0.2}, True) for lab, b in labels_boxes]
    tracks = ObjectTracker().update(obs, 1.0)
    return make_detections_msg(Header(stamp=Time(sec=7), frame_id="cam"), tracks, 4)


def test_default_scope_follows_the_stream_and_images_stay_whole() -> None:
    assert plan_classify(SCOPE_DEFAULT, False, False, True).target == "objects"
    p = plan_classify(SCOPE_DEFAULT, False, False, False)
    assert p.target == "frame" and "no objects are streaming" in p.note
    assert plan_classify(SCOPE_FRAME, False, False, True).target == "frame"
    assert plan_classify(SCOPE_DEFAULT, False, True, True) == plan_classify(SCOPE_FRAME, False, True, True)
    assert plan_classify(SCOPE_DEFAULT, False, True, True).source == "image"
    assert plan_classify(SCOPE_OBJECTS, False, True, False).target == "object"
    assert plan_classify(SCOPE_DEFAULT, True, True, True).source == "feature"  # features first, as before


@pytest.mark.parametrize("args, match", [
    ((3, False, False, True), "scope 3 is not one of"),
    ((SCOPE_OBJECTS, True, False, True), "a feature vector has no objects"),
    ((SCOPE_OBJECTS, False, False, False), "no objects are streaming"),
])
def test_clashing_scope_is_refused_with_the_reason(args, match) -> None:
    with pytest.raises(ValueError, match=match):
        plan_classify(*args)


def test_object_in_view_is_the_large_central_one() -> None:
    shape = (480, 640)
    big_border, small_centre = (0, 0, 120, 200), (290, 210, 350, 270)  # 24000 px at the corner vs 3600 at the centre
    assert object_in_view([big_border, small_centre], shape) == 1
    assert object_in_view([(250, 150, 390, 330), small_centre], shape) == 0
    assert object_in_view([], shape) is None


def test_classify_from_detections_gives_the_detections_answer() -> None:
    from cbcl_pr_ros.nodes.conversions import fill_classify_from_detections
    from cbcl_pr_ros.srv import Classify

    det = _det([("mug", (280, 200, 360, 280)), ("can", (10, 10, 60, 90))])
    resp = fill_classify_from_detections(Classify.Response(), det, (480, 640), top_k=1)
    assert resp.success and resp.label == "mug" and resp.known
    assert len(resp.objects) == 2 and {o.label for o in resp.objects} == {"mug", "can"}
    assert resp.top_labels == ["mug"] and math.isclose(resp.confidence, det.objects[0].confidence, rel_tol=1e-6)
    assert resp.header.stamp.sec == 7 and resp.model_version == 4 and "track" in resp.message
    empty = fill_classify_from_detections(Classify.Response(), _det([]), (480, 640))
    assert empty.success and empty.label == "" and not empty.known and empty.objects == []
    assert "no object in view" in empty.message


def test_answer_for_an_images_object_carries_its_box() -> None:
    from cbcl_pr_ros.core.learner import Prediction
    from cbcl_pr_ros.nodes.conversions import fill_classify_response
    from cbcl_pr_ros.srv import Classify

    pred = Prediction(label="mug", confidence=0.7, known=True, top_labels=("mug",), top_scores=(0.7,),
                      nearest_label="mug", distance=float("nan"))
    resp = fill_classify_response(Classify.Response(), success=True, message="ok", pred=pred, box=(5, 6, 50, 60))
    assert len(resp.objects) == 1 and (resp.objects[0].x0, resp.objects[0].y1) == (5, 60)
    assert resp.objects[0].label == "mug" and math.isnan(resp.objects[0].centroid.z)
    whole = fill_classify_response(Classify.Response(), success=True, message="ok", pred=pred)
    assert whole.objects == []


def test_image_object_crop_finds_the_object_or_none() -> None:
    rgb = np.full((120, 160, 3), 200, np.uint8)
    assert image_object_crop(rgb) is None  # a bare table
    rgb[40:80, 60:100] = (200, 30, 30)
    box, crop = image_object_crop(rgb)
    x0, y0, x1, y1 = box
    assert abs(x0 - 60) <= 3 and abs(y1 - 80) <= 3 and crop.ndim == 3 and crop.shape[0] >= 40
