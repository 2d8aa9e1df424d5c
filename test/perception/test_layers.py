"""An object stacked on another is split by its own level top (perception/regions.py, ``split_layers``).

A real sensor smooths depth across an outline, so the step between a box and the box it stands on can
pass for a slope and both become one component; their level tops, centimetres apart, still tell them apart.
"""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from cbcl_pr_ros.perception import ProposalConfig, propose
from cbcl_pr_ros.perception.regions import flat_pixels, split_layers

from .test_attached_parts import raycast

BASE = ((-0.06, 0.0, 0.0), (0.06, 0.10, 0.06))  # a box 6 cm high
STACKED = ((-0.03, 0.02, 0.06), (0.03, 0.07, 0.095))  # a smaller one on it, its top 3.5 cm higher


def _objects(boxes, config: ProposalConfig, blur: int) -> list[set[int]]:
    """Per proposal, the boxes it holds (a quarter of their visible pixels); depth blurred as a sensor's."""
    rgb, depth, K, index = raycast(boxes)
    d = np.where(np.isfinite(depth), depth, 0.0).astype(np.float32)
    if blur:
        d = cv2.GaussianBlur(d, (blur, blur), 0)
    seen = np.bincount(index.ravel(), minlength=len(boxes) + 1)
    return [{i for i in range(1, len(boxes) + 1) if (index[p.mask] == i).sum() >= 0.25 * seen[i]}
            for p in propose(rgb, d, K, config)]


def test_a_box_stacked_on_another_behind_a_smoothed_edge_is_split_by_its_level_top():
    assert _objects([BASE, STACKED], ProposalConfig.with_overrides(layer_gap_m=0.0), blur=9) == [{1, 2}]  # what the rule repairs
    assert sorted(map(sorted, _objects([BASE, STACKED], ProposalConfig(), blur=9))) == [[1], [2]]


def test_a_single_box_with_a_smoothed_edge_stays_whole():
    assert _objects([BASE], ProposalConfig(), blur=9) == [{1}]


def _two_tops(step_m: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One component of two level tops (the left at 5 cm, the right ``step_m`` higher) joined by a ramp:
    (labels, flat mask, height)."""
    labels = np.zeros((60, 90), np.int32)
    labels[10:50, 10:80] = 1
    height = np.full(labels.shape, np.nan, np.float32)
    height[10:50, 10:40] = 0.05
    height[10:50, 40:50] = 0.05 + step_m * (np.arange(10) + 1)[None, :] / 10  # the wall between them
    height[10:50, 50:80] = 0.05 + step_m
    flat = np.isfinite(height)
    flat[10:50, 40:50] = False
    return labels, flat, height


def test_level_tops_a_gap_apart_become_two_parts_and_nearer_ones_stay_one():
    rgb = np.full((60, 90, 3), 128, np.uint8)
    labels, flat, height = _two_tops(0.04)
    out = split_layers(labels, flat, height, rgb, gap_m=0.03, min_pixels=60)
    left, right = np.unique(out[10:50, 10:40]), np.unique(out[10:50, 50:80])
    assert len(left) == 1 and len(right) == 1 and left[0] != right[0] and left[0] > 0 and right[0] > 0
    assert set(np.unique(out[labels == 1])) == {left[0], right[0]}  # the wall went to a part, none lost
    labels, flat, height = _two_tops(0.02)
    assert np.array_equal(split_layers(labels, flat, height, rgb, gap_m=0.03, min_pixels=60), labels)


def test_flat_pixels_tell_a_level_top_from_a_steep_wall():
    h, w = 40, 40
    xs, ys = np.meshgrid(np.arange(w) * 0.003, np.arange(h) * 0.003)  # 3 mm per pixel
    P = np.stack([xs, ys, np.full((h, w), 0.8)], axis=-1).astype(np.float32)
    level = np.full((h, w), 0.05, np.float32)
    steep = (0.05 + 1.0 * xs).astype(np.float32)  # 45 degrees
    assert flat_pixels(P, level, 0.35)[5:-5, 5:-5].all()
    assert not flat_pixels(P, steep, 0.35)[5:-5, 5:-5].any()


def test_bad_layer_settings_are_refused():
    for bad in ({"layer_gap_m": -0.01}, {"layer_tilt": 0.0}, {"layer_tilt": 1.5}, {"layer_min_part": 0.0}):
        with pytest.raises(ValueError, match="layer_"):
            ProposalConfig.with_overrides(**bad)
