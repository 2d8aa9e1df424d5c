"""Where objects are: depth segmentation separates neighbours, memory forgets moved objects."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.robot.arm_logic import ArmController, PointingRefused
from cbcl_pr_ros.robot.world import CameraConfig, SimWorld, WorldConfig, sample_instances


@pytest.fixture(scope="module")
def scene():
    w = SimWorld(WorldConfig(with_robot=False, camera=CameraConfig(160, 120)), seed=1)
    rng = np.random.default_rng(4)
    a, b = sample_instances("mug", 1, rng)[0], sample_instances("can", 1, rng)[0]
    w.add_object(a, (0.62, -0.25))
    w.add_object(b, (0.78, 0.0))
    yield w, a.name, b.name
    w.close()


def _look(w, xy, cam=CameraConfig(160, 120)):
    w.set_free_camera([xy[0], xy[1], 0.25], [xy[0], xy[1], -0.18])
    f = w.render(cam)
    return f


def test_memory_forgets_an_object_whose_place_shows_bare_table(scene):
    w, mug, can = scene
    ctl = ArmController(table_height=w.config.table_height)
    try:
        f = _look(w, (0.62, -0.25))
        centre = ctl.observe("mug", 0.9, True, f.depth, f.K, f.camera_position, f.camera_quaternion)
        assert centre is not None and np.linalg.norm(centre[:2] - [0.62, -0.25]) < 0.02
        f = _look(w, (0.78, 0.0))
        ctl.observe("can", 0.9, True, f.depth, f.K, f.camera_position, f.camera_quaternion)
        # the teacher moves the mug away; a later look at its old place shows the table only
        w.move_object(mug, (0.80, -0.40))
        f = _look(w, (0.62, -0.25))
        ctl.observe("", 0.0, False, f.depth, f.K, f.camera_position, f.camera_quaternion)
        with pytest.raises(PointingRefused, match="mug"):
            ctl.locate("mug")
        # the can was out of that view: still remembered where it is
        assert np.linalg.norm(ctl.locate("can")[:2] - [0.78, 0.0]) < 0.02
    finally:
        w.move_object(mug, (0.62, -0.25))
        ctl.close()


def test_object_still_in_place_is_kept(scene):
    w, mug, can = scene
    ctl = ArmController(table_height=w.config.table_height)
    try:
        f = _look(w, (0.62, -0.25))
        ctl.observe("mug", 0.9, True, f.depth, f.K, f.camera_position, f.camera_quaternion)
        f = _look(w, (0.66, -0.2))  # another view that still shows the mug
        ctl.observe("", 0.0, False, f.depth, f.K, f.camera_position, f.camera_quaternion)
        assert np.linalg.norm(ctl.locate("mug")[:2] - [0.62, -0.25]) < 0.02
    finally:
        ctl.close()
