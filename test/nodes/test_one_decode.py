"""Each request image is decoded once in the learner: TeachClass and Classify hand the decoded arrays
(whole, cropped or with their jittered views) to an in-process backbone, never a message again."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
from ros_testing import domain  # noqa: E402

D = 6


class _Backbone:
    """A stand-in backbone: mean colour and size of each array (no model to load)."""

    name, preprocessing_id = "fake", "p0"

    def __init__(self) -> None:
        self.seen: list[tuple[int, ...]] = []

    def extract(self, rgbs):
        self.seen += [r.shape for r in rgbs]
        return np.array([[*r.reshape(-1, 3).mean(0), r.shape[0], r.shape[1], 1.0] for r in rgbs], np.float32)


@pytest.fixture
def decodes(monkeypatch):
    """Counts every decode of an Image's bytes, wherever in the package it happens."""
    import cbcl_pr_ros.features as features
    import cbcl_pr_ros.features.preprocessing as preprocessing
    import cbcl_pr_ros.nodes.conversions as conversions
    import cbcl_pr_ros.request_checks as validation

    calls: list[tuple[int, int]] = []
    real = preprocessing.image_to_rgb

    def counted(encoding, height, width, *args, **kwargs):
        calls.append((int(height), int(width)))
        return real(encoding, height, width, *args, **kwargs)

    for module in (features, preprocessing, conversions, validation):
        monkeypatch.setattr(module, "image_to_rgb", counted)
    return calls


def _images(n: int):
    from cbcl_pr_ros.nodes.conversions import rgb_to_image_msg

    out = []
    for i in range(n):
        rgb = np.full((64, 80, 3), 120, np.uint8)
        rgb[20:44, 25 + i:55 + i] = (200, 40 + 30 * i, 40)  # one object in view
        out.append(rgb_to_image_msg(rgb))
    return out


@pytest.mark.parametrize("mode,views", [(2, 0), (2, 2), (1, 0)])  # whole frames, with views, the object in view
def test_teach_class_decodes_each_request_image_once(decodes, mode, views):
    from rclpy.parameter import Parameter

    from cbcl_pr_ros.nodes.feature_source import LocalFeatureSource
    from cbcl_pr_ros.nodes.learner import LearnerNode
    from cbcl_pr_ros.srv import Classify, TeachClass

    backbone = _Backbone()
    with domain() as dom:
        ctx = rclpy.Context()
        rclpy.init(context=ctx, domain_id=dom)
        node = LearnerNode(feature_source=LocalFeatureSource(backbone), context=ctx, parameter_overrides=[
            Parameter("memory_path", value=""), Parameter("backbone", value="fake"),
            Parameter("feature_dim", value=D), Parameter("teach_views", value=views)])
        try:
            n = 3
            resp = node._on_teach(TeachClass.Request(label="mug", mode=mode, images=_images(n)),
                                  TeachClass.Response())
            assert resp.success, resp.message
            assert len(decodes) == n and set(decodes) == {(64, 80)}
            assert len(backbone.seen) == n * (1 + views)  # every array (and view) reached the backbone
            if mode == 1:
                assert all(s[:2] != (64, 80) for s in backbone.seen)  # crops of the object, not whole frames
            del decodes[:]
            answer = node._on_classify(Classify.Request(scope=1, image=_images(1)[0]), Classify.Response())
            assert answer.success and "mug" in answer.top_labels, answer.message  # answered (known or not)
            assert len(decodes) == 1
        finally:
            node.destroy_node()
            rclpy.shutdown(context=ctx)
