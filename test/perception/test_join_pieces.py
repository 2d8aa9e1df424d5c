"""Pieces of one object cut apart by a depth jump are joined again (proposals ``join_m``).

A seated teddy seen from a hand camera's height: its legs hide the bottom of its belly, the depth jumps
there, and the legs come out as a proposal of their own (tracked, named and pointed at as a second
object). The pieces share one body (their 3D extents overlap) and one colour, and are joined; two
objects side by side, or one standing on another (its own level top), are not (test_proposals,
test_layers).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pybullet", reason="the scene renderer needs pybullet (requirements/core.txt)")

from cbcl_pr_ros.objects.pieces import nested_parts  # noqa: E402
from cbcl_pr_ros.perception import CameraIntrinsics, ProposalConfig, propose  # noqa: E402
from cbcl_pr_ros.robot.scenes import table_world  # noqa: E402
from cbcl_pr_ros.robot.world import CameraConfig  # noqa: E402


@pytest.fixture(scope="module")
def teddy():
    """(frame, teddy pixels) of one seated teddy seen from 43 cm above the table and 30 cm before it."""
    w = table_world(0, CameraConfig(640, 480, 60.0))
    try:
        (cx, cy), top = w.config.table_center, w.config.table_height
        w.place("teddy", 1, name="teddy", xy=(cx, cy), yaw=0.7, seed=5)
        w.set_free_camera((cx - 0.3, cy + 0.05, top + 0.43), (cx, cy, top))
        f = w.render()
    finally:
        w.close()
    return f, f.segmentation == f.object_names.index("teddy")


def _objects(frame, config: ProposalConfig) -> list:
    """The proposals that are not a part of a larger one (what gets a track)."""
    props = propose(frame.rgb, frame.depth, CameraIntrinsics.from_k(frame.K), config)
    parts = nested_parts(props)
    return [p for i, p in enumerate(props) if i not in parts]


def test_a_seated_teddy_cut_by_its_legs_is_one_proposal(teddy):
    frame, mask = teddy
    assert len(_objects(frame, ProposalConfig.with_overrides(join_m=0.0))) >= 2  # what the join repairs
    (whole,) = _objects(frame, ProposalConfig())
    assert (whole.mask & mask).sum() >= 0.8 * mask.sum() and (whole.mask & mask).sum() >= 0.8 * whole.mask.sum()


def test_join_settings_are_checked():
    for bad in ({"join_m": -0.01}, {"join_share": 1.5}, {"join_colour_de": -1.0}):
        with pytest.raises(ValueError, match="join_m"):
            ProposalConfig.with_overrides(**bad)
