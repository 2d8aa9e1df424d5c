"""Rendered cluttered scenes: ground truth from the segmentation mask, and proposals that find it."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pybullet", reason="the scene renderer needs pybullet (requirements/core.txt)")

from cbcl_pr_ros.perception import CameraIntrinsics, box_iou, propose  # noqa: E402
from cbcl_pr_ros.robot.scenes import SceneSpec, make_scene, render_object_views, render_scene_views, table_world  # noqa: E402
from cbcl_pr_ros.robot.world import CameraConfig, sample_instances  # noqa: E402

CAM = CameraConfig(320, 240, 60.0)


@pytest.fixture(scope="module")
def world():
    w = table_world(3, CAM)
    yield w
    w.close()


def test_scene_ground_truth_and_depth_proposals(world):
    rng = np.random.default_rng(5)
    spec = SceneSpec(n_objects=(4, 4), camera=CAM, min_visible_px=40)
    placed = make_scene(world, ["mug", "can", "lemon", "toy_cube", "milk"], rng, spec)
    assert len(placed) == 4 and len({p.category for p in placed}) == 4
    views = render_scene_views(world, rng, 2, spec)
    assert len(views) == 2 and views[1].frame.stamp > views[0].frame.stamp
    sf = views[0]
    assert 1 <= len(sf.objects) <= 4
    for o in sf.objects:
        x0, y0, x1, y1 = o.box
        assert 0 <= x0 < x1 <= CAM.width and 0 <= y0 < y1 <= CAM.height and o.pixels >= 40
        assert 0.2 < o.centre_cam[2] < 1.5  # in front of the camera, at table distance
    props = propose(sf.frame.rgb, sf.frame.depth, CameraIntrinsics.from_k(sf.frame.K))
    found = [max((box_iou(p.box, o.box) for p in props), default=0.0) >= 0.5 for o in sf.objects]
    assert np.mean(found) >= 0.75
    errs = [min(np.linalg.norm(p.centroid - o.centre_cam) for p in props) for o in sf.objects]
    assert np.median(errs) < 0.03


def test_teaching_views_show_one_object_and_clear_the_table(world):
    rng = np.random.default_rng(1)
    inst = sample_instances("duck", 1, rng, prefix="teach")[0]
    views = render_object_views(world, inst, 2, rng, camera=CAM)
    assert len(views) == 2
    assert all(len(v.objects) == 1 and v.objects[0].category == "duck" for v in views)
    assert world.objects == []


def test_scene_spec_is_validated(world):
    with pytest.raises(ValueError, match="n_objects"):
        SceneSpec(n_objects=(5, 3))
    with pytest.raises(ValueError, match="categories"):
        make_scene(world, [], np.random.default_rng(0))
