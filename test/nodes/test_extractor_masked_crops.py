"""The extractor sends each depth object's crop with its background filled grey (issue 20, outcome 3),
and crops as plain boxes when ``mask_crops`` is set false at run time. The node's callbacks are called
directly (no spin); the crop rules are unit-tested in test/perception/test_masked_crops.py."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")


def _neutral_share(crop: np.ndarray) -> float:
    from cbcl_pr_ros.perception.boxes import NEUTRAL_RGB

    return float((crop == np.asarray(NEUTRAL_RGB, np.uint8)).all(axis=2).mean())


def test_object_crops_are_masked_and_the_switch_turns_it_off():
    from extractor_table import TABLE_RGB, MeanColourBackbone, extractor, show, two_objects
    from rclpy.parameter import Parameter

    rgb, depth, k = two_objects()
    backbone = MeanColourBackbone()
    with extractor(backbone, k, reuse_still_crops=False) as node:
        show(node, rgb, depth, 0)
        frame, *crops = backbone.pictures[-1]
        assert frame.shape == rgb.shape and len(crops) >= 2, [c.shape for c in crops]
        for c in crops:  # the square crop's corners hold table, now grey; the object's centre is kept
            assert _neutral_share(c) > 0.1, _neutral_share(c)
            h, w = c.shape[:2]
            assert _neutral_share(c[h // 2 - 2:h // 2 + 2, w // 2 - 2:w // 2 + 2]) == 0.0
        assert node.set_parameters([Parameter("mask_crops", value=False)])[0].successful
        show(node, rgb, depth, 1)
        _, *plain = backbone.pictures[-1]
        assert len(plain) == len(crops)
        for c in plain:
            assert _neutral_share(c) == 0.0
            corner = c[:4, :4].reshape(-1, 3).astype(int)
            assert np.abs(corner - np.asarray(TABLE_RGB)).max() <= 8  # table, as the picture has it
