"""Objects the depth camera cannot see (glass, black, shiny) show as holes in its readings enclosed by
the table: such a hole of an object's size, where the colour image sees something, is a proposal
without 3D; the table's own dropouts and the shadow bands beside depth edges are not.

The rule is off by default (``ProposalRules.unseen_ring_share`` 0); these tests turn it on as measured.
Scenes are ray-cast exactly (table frame in metres, z up), the camera 0.7 m from the middle of the table.
"""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from cbcl_pr_ros.perception import ProposalConfig, box_iou, propose
from cbcl_pr_ros.perception.proposals import ProposalRules

from synthetic import camera_rays, cast_boxes

EYE, TARGET = (0.0, -0.40, 0.60), (0.0, 0.15, 0.0)
BOX = ((-0.16, 0.10, 0.0), (-0.08, 0.18, 0.08))  # an opaque box the camera reads
GLASS = ((0.04, 0.10, 0.0), (0.11, 0.17, 0.12))  # a glass: where it stands the camera reads nothing
TABLE_GREY = 150
ON = ProposalConfig.with_overrides(unseen_ring_share=0.6)


def _scene(boxes):
    """(rgb, depth, intrinsics, index: 0 table, i the i-th box) of a table z = 0 and ``boxes``."""
    eye, d, K = camera_rays(EYE, TARGET, 320, 240, 280.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_best = np.where(d[..., 2] < 0, -eye[2] / d[..., 2], np.inf)
    t_best, index = cast_boxes(eye, d, t_best, boxes)
    depth = np.where(np.isfinite(t_best), t_best, np.nan).astype(np.float32)
    noise = np.random.default_rng(0).normal(0.0, 1.0, depth.shape).astype(np.float32) * 0.002 * depth * depth
    rgb = np.full(depth.shape + (3,), TABLE_GREY, np.uint8)
    rgb[index == 1] = (40, 90, 200)
    return rgb, (depth + noise).astype(np.float32), K, index


def _box_of(m: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(m)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def _glass_frame(outline: bool = True):
    """The box and the glass on the table; the glass's pixels read nothing, and in colour show the table
    through it with the glass's outline and a highlight (``outline``), or nothing at all."""
    rgb, depth, K, index = _scene([BOX, GLASS])
    glass = index == 2
    depth[glass] = np.nan
    if outline:
        edge = glass & ~cv2.erode(glass.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
        rgb[edge] = (235, 235, 235)
        ys, xs = np.nonzero(glass)
        rgb[ys.min() + 6: ys.max() - 6, xs.min() + 5: xs.min() + 8] = (250, 250, 250)  # a highlight down its side
    return rgb, depth, K, glass, index == 1


def test_a_glass_on_the_table_is_one_proposal_without_3d():
    rgb, depth, K, glass, box = _glass_frame()
    props = propose(rgb, depth, K, ON)
    assert len(props) == 2
    seen = max(props, key=lambda p: box_iou(p.box, _box_of(glass)))
    assert box_iou(seen.box, _box_of(glass)) >= 0.7
    assert not seen.has_depth and np.isnan(seen.centroid).all() and np.isnan(seen.size).all()  # no wrong 3D
    read = max(props, key=lambda p: box_iou(p.box, _box_of(box)))
    assert box_iou(read.box, _box_of(box)) >= 0.7 and read.has_depth
    # the rule off (the default): the glass is gone
    off = propose(rgb, depth, K)
    assert max(box_iou(p.box, _box_of(glass)) for p in off) < 0.3 and all(p.has_depth for p in off)


def test_the_same_glass_frame_gives_the_same_proposals_every_time():
    rgb, depth, K, _, _ = _glass_frame()
    first = propose(rgb, depth, K, ON)
    for _ in range(20):
        again = propose(rgb, depth, K, ON)
        assert [p.box for p in again] == [p.box for p in first]
        assert all(np.array_equal(a.mask, b.mask) for a, b in zip(again, first))


def test_a_dropout_that_looks_like_the_table_is_no_object():
    """A bright sheet or a dark patch of the table itself returns no reading: a hole with no edge in colour."""
    rgb, depth, K, glass, box = _glass_frame(outline=False)
    props = propose(rgb, depth, K, ON)
    assert len(props) == 1 and props[0].has_depth
    assert box_iou(props[0].box, _box_of(box)) >= 0.7


def test_a_narrow_band_without_readings_is_no_object():
    """A camera's shadow band beside a depth edge, or a crack, is a few pixels wide: no object's body."""
    rgb, depth, K, index = _scene([BOX])
    band = np.zeros(depth.shape, bool)
    band[150:190, 200:203] = True  # on the table, 3 px (under a centimetre) wide, 40 px long
    assert not (band & (index > 0)).any()
    depth[band] = np.nan
    rgb[band] = 60  # dark, with edges: only its width says it is no object
    props = propose(rgb, depth, K, ON)
    assert len(props) == 1 and props[0].has_depth
    wider = band.copy()
    wider[150:190, 200:215] = True  # 15 px, about 4 cm: an object's body
    depth[wider], rgb[wider] = np.nan, 60
    assert len(propose(rgb, depth, K, ON)) == 2


def test_a_hole_off_the_table_is_no_object():
    """Holes where the table is not (the ring around them is no table reading) stay holes."""
    rgb, depth, K, glass, box = _glass_frame()
    ring = cv2.dilate(glass.astype(np.uint8), np.ones((15, 15), np.uint8)).astype(bool) & ~glass
    depth[ring] = depth[ring] - 0.15  # the glass's surroundings a raised shelf, not the support
    props = propose(rgb, depth, K, ON)
    assert all(box_iou(p.box, _box_of(glass)) < 0.5 or p.has_depth for p in props)


def test_a_shiny_patch_inside_a_bowl_is_the_bowl_not_another_object():
    """A hole inside a found object's outline (a bowl's shiny floor) is that object's unread part."""
    x0, y0, x1, y1, t, hgt = -0.02, 0.08, 0.14, 0.22, 0.012, 0.05
    walls = [((x0, y0, 0.0), (x1, y0 + t, hgt)), ((x0, y1 - t, 0.0), (x1, y1, hgt)),
             ((x0, y0, 0.0), (x0 + t, y1, hgt)), ((x1 - t, y0, 0.0), (x1, y1, hgt))]
    rgb, depth, K, index = _scene(walls)
    bowl = index > 0
    inside = cv2.morphologyEx(bowl.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((61, 61), np.uint8)).astype(bool) & ~bowl
    ys, xs = np.nonzero(inside)
    cy, cx = int(ys.mean()), int(xs.mean())
    patch = np.zeros(depth.shape, bool)
    patch[cy - 6: cy + 6, cx - 9: cx + 9] = True  # the floor's middle unread, read table around it
    assert not (patch & bowl).any()
    depth[patch] = np.nan
    rgb[patch] = 235
    props = propose(rgb, depth, K, ON)
    assert props and all(p.has_depth for p in props)
    # the same patch on the open table is an object
    rgb2, depth2, K2, _ = _scene([])
    depth2[patch], rgb2[patch] = np.nan, 235
    assert [p.has_depth for p in propose(rgb2, depth2, K2, ON)] == [False]


@pytest.mark.parametrize("bad", [{"unseen_ring_share": 1.5}, {"unseen_ring_share": -0.1}, {"unseen_edge_share": 2.0}])
def test_bad_unseen_rule_values_are_refused(bad):
    with pytest.raises(ValueError, match="unseen"):
        ProposalRules(**bad)
