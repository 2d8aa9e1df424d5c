"""Classify without ROS (issue 23): which vectors a request is answered for, through a fake port."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cbcl_pr_ros.service.classify_scope import ClassifyRequest, classify_vectors, plan_classify
from cbcl_pr_ros.request_checks import RequestLimits

D = 8
NO_FEATURE = SimpleNamespace(values=[], backbone="", dimension=0, header="none")
NO_IMAGE = SimpleNamespace(data=b"", width=0, height=0, step=0, encoding="", is_bigendian=0, header="none")


def _image(rgb: np.ndarray) -> SimpleNamespace:
    h, w = rgb.shape[:2]
    return SimpleNamespace(encoding="rgb8", height=h, width=w, step=3 * w, data=rgb.tobytes(), is_bigendian=0,
                           header="image header")


class FakePort:
    def __init__(self, latest: Any = None) -> None:
        self.latest = latest
        self.sizes: list[tuple[int, int]] = []

    def extract(self, rgbs: list[np.ndarray]) -> np.ndarray:
        self.sizes += [r.shape[:2] for r in rgbs]
        return np.stack([np.full(D, r.shape[0] * r.shape[1], np.float32) for r in rgbs]) if rgbs else \
            np.empty((0, D), np.float32)

    def latest_features(self) -> Any:
        return self.latest

    def no_frame_reason(self) -> str:
        return "no camera frame received yet"


def _ask(req: ClassifyRequest, port: FakePort, streaming: bool = False):
    plan = plan_classify(req.scope, req.has_feature, req.has_image, streaming)
    return classify_vectors(req, plan, port, "synthetic", D, RequestLimits(), 0.1)


def test_a_sent_vector_is_answered_as_it_is():
    v = SimpleNamespace(values=list(np.linspace(0, 1, D)), backbone="synthetic", dimension=D, header="vector header")
    feats, origin, box, plan = _ask(ClassifyRequest(0, v, NO_IMAGE), FakePort())
    assert feats.shape == (1, D) and origin.header == "vector header" and box is None and plan.target == "frame"


def test_an_image_scope_objects_answers_for_its_object_in_view_with_its_box():
    rgb = np.full((96, 96, 3), 128, np.uint8)
    rgb[30:70, 25:65] = (220, 30, 30)
    port = FakePort()
    feats, origin, box, plan = _ask(ClassifyRequest(1, NO_FEATURE, _image(rgb)), port)
    x0, y0, x1, y1 = box
    assert abs(x0 - 25) <= 3 and abs(y0 - 30) <= 3 and abs(x1 - 65) <= 3 and abs(y1 - 70) <= 3
    assert port.sizes[0] != (96, 96) and np.all(feats < 96 * 96)  # the crop went to the backbone
    blank = np.full((96, 96, 3), 128, np.uint8)
    port = FakePort()
    feats, _, box, plan = _ask(ClassifyRequest(1, NO_FEATURE, _image(blank)), port)
    assert box is None and plan.target == "frame" and "no object found" in plan.note
    assert port.sizes == [(96, 96)] and np.all(feats == 96 * 96)  # the whole image, decoded once


def test_the_stream_answers_with_the_latest_frame_or_says_why_not():
    with pytest.raises(ValueError, match="no camera frame received yet"):
        _ask(ClassifyRequest(2, NO_FEATURE, NO_IMAGE), FakePort())
    latest = SimpleNamespace(values=[0.5] * D, backbone="synthetic", dimension=D, header="frame header")
    feats, origin, _, _ = _ask(ClassifyRequest(2, NO_FEATURE, NO_IMAGE), FakePort(latest))
    assert origin.header == "frame header" and np.allclose(feats, 0.5)
    other = SimpleNamespace(values=[0.5] * D, backbone="other", dimension=D, header="h")
    with pytest.raises(ValueError, match="backbone 'other'"):
        _ask(ClassifyRequest(2, NO_FEATURE, NO_IMAGE), FakePort(other))


def test_a_bad_image_is_refused_before_any_backbone_call():
    bad = SimpleNamespace(encoding="rgb8", height=10, width=10, step=30, data=b"\0" * 5, is_bigendian=0, header="h")
    port = FakePort()
    with pytest.raises(ValueError):
        _ask(ClassifyRequest(1, NO_FEATURE, bad), port)
    assert port.sizes == []
