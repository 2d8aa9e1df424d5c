"""Height from the table's own level (``ProposalRules.table_curve_rounds``; off by default, measured in
docs/perception.md): on a sagging table a plane leaves a smooth misfit that the noise test passes as
noise, and a low object is lost; measured from a quadratic level fitted to the table it is found.

The scene is ray-cast (table frame in metres, z up): a table sagging 9 mm 30 cm from the middle of the
view, a box 3 cm high in the middle, a camera about 1.1 m away with 1 mm of noise at 1 m.
"""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.perception import ProposalConfig, box_iou, propose
from cbcl_pr_ros.perception.proposals import ProposalRules

from synthetic import camera_rays

SAG = 0.1  # z = -SAG * r^2, r the distance from the middle of the view (metres)
BOX = ((-0.04, 0.10, 0.0), (0.04, 0.18, 0.03))


def _sagging_table():
    eye, d, K = camera_rays((0.0, -0.45, 0.95), (0.0, 0.15, 0.0), 320, 240, 280.0)
    t = np.ones(d.shape[:2])
    for _ in range(30):  # the ray's hit on the curved table, by fixed-point iteration (the curve is gentle)
        x, y = eye[0] + t * d[..., 0], eye[1] + t * d[..., 1]
        t = (-SAG * (x ** 2 + (y - 0.15) ** 2) - eye[2]) / d[..., 2]
    lo, hi = np.asarray(BOX[0]), np.asarray(BOX[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        t1, t2 = (lo - eye) / d, (hi - eye) / d
    t_in, t_out = np.nanmax(np.minimum(t1, t2), axis=-1), np.nanmin(np.maximum(t1, t2), axis=-1)
    hit = (t_in <= t_out) & (t_in > 0) & (t_in < t)
    depth = np.where(hit, t_in, t).astype(np.float32)
    depth += np.random.default_rng(0).normal(0.0, 1.0, depth.shape).astype(np.float32) * 0.001 * depth ** 2
    ys, xs = np.nonzero(hit)
    box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    return np.full(depth.shape + (3,), 150, np.uint8), depth, K, box


def test_a_low_box_on_a_sagging_table_is_found_from_the_tables_own_level():
    rgb, depth, K, box = _sagging_table()
    assert max((box_iou(p.box, box) for p in propose(rgb, depth, K)), default=0.0) < 0.5  # from the plane: lost
    props = propose(rgb, depth, K, ProposalConfig.with_overrides(table_curve_rounds=3))
    best = max(props, key=lambda p: box_iou(p.box, box))
    assert box_iou(best.box, box) >= 0.6 and best.has_depth


@pytest.mark.parametrize("rounds", [-1, 11])
def test_table_curve_rounds_out_of_range_are_refused(rounds):
    with pytest.raises(ValueError, match="table_curve_rounds"):
        ProposalRules(table_curve_rounds=rounds)
