"""Robot layer without ROS: pointing accuracy, refusal, world determinism, data set layout, backends."""
from __future__ import annotations

import json

import numpy as np
import pytest

from cbcl_pr_ros.robot import baxter
from cbcl_pr_ros.robot.backends import BaxterCommandStream, plan_trajectory
from cbcl_pr_ros.robot.dataset import DatasetSpec, render_dataset
from cbcl_pr_ros.robot.kinematics import BaxterKinematics, Unreachable, ray_distance
from cbcl_pr_ros.robot.world import CameraConfig, SimWorld, WorldConfig, quaternion_to_matrix, sample_instances


@pytest.fixture(scope="module")
def world():
    w = SimWorld(WorldConfig(camera=CameraConfig(160, 120)), seed=3)
    rng = np.random.default_rng(0)
    for c in ("mug", "can", "duck", "bottle", "teddy"):
        w.add_object(sample_instances(c, 1, rng)[0], (0.7, 0.0))
    w.arrange([o.name for o in w.objects], rng)
    yield w
    w.close()


@pytest.fixture(scope="module")
def kin():
    k = BaxterKinematics("right")
    yield k
    k.close()


def test_joint_names_and_limits_match_urdf(world):
    for n, lim in baxter.JOINT_LIMITS.items():
        assert world.joint_limits[n] == pytest.approx(lim, abs=1e-6)
    assert baxter.arm_joint_names("right") == [f"right_{j}" for j in ("s0", "s1", "e0", "e1", "w0", "w1", "w2")]


def test_pointing_ray_within_3cm_in_the_world(world, kin):
    for obj in world.objects:
        sol = kin.point_at(obj.position, seed=world.joint_positions(kin.joint_names))
        world.set_joint_positions(sol.as_dict())
        hp, hq = world.link_pose("right_hand")
        assert ray_distance(hp, quaternion_to_matrix(hq)[:, 2], obj.position) < 0.03
        for n, v in sol.as_dict().items():
            lo, hi = baxter.JOINT_LIMITS[n]
            assert lo - 1e-6 <= v <= hi + 1e-6


@pytest.mark.parametrize("target", [[2.0, 0.0, 0.0], [0.3, 0.95, 0.0], [0.1, -0.1, -0.5]])
def test_unreachable_targets_refused_and_arm_unchanged(world, kin, target):
    before = world.joint_positions()
    with pytest.raises(Unreachable):
        kin.point_at(target, seed=before)
    assert world.joint_positions() == before


def test_out_of_limit_command_moves_nothing(world):
    before = world.joint_positions()
    with pytest.raises(ValueError, match="right_e1"):
        world.set_joint_positions({"right_s0": 0.1, "right_e1": 3.5})
    assert world.joint_positions() == before


def test_world_is_deterministic_under_seed():
    imgs = []
    for _ in range(2):
        with SimWorld(WorldConfig(with_robot=False, camera=CameraConfig(96, 72)), seed=5) as w:
            rng = np.random.default_rng(1)
            for c in ("mug", "lemon"):
                w.add_object(sample_instances(c, 1, rng)[0], (0.7, 0.0))
            w.arrange([o.name for o in w.objects], rng)
            w.set_free_camera([0.7, 0.0, 0.4], [0.7, 0.0, -0.18])
            imgs.append(w.render())
    assert np.array_equal(imgs[0].rgb, imgs[1].rgb)
    assert (imgs[0].segmentation >= 0).sum() > 50


def test_arm_locates_objects_from_the_proposals_centroids(world):
    """The arm's one source of places: each proposal's camera-frame centroid moved to the base frame
    with the camera pose (as the learner places its tracks for ``detections``), named as the learner
    would (here: the object the box covers)."""
    from cbcl_pr_ros.perception import box_iou
    from cbcl_pr_ros.perception.proposals import propose
    from cbcl_pr_ros.perception.types import CameraIntrinsics
    from cbcl_pr_ros.robot.arm_logic import ArmController
    from cbcl_pr_ros.robot.scenes import ground_truth

    world.set_free_camera([0.7, -0.15, 0.45], [0.7, -0.15, -0.18])
    f = world.render(CameraConfig(320, 240))
    world.use_hand_camera()
    gts = list(ground_truth(world, f, min_visible_px=200))
    props = [p for p in propose(f.rgb, f.depth, CameraIntrinsics.from_k(f.K)) if p.has_depth]
    named = []
    for k, p in enumerate(props):
        g = max(gts, key=lambda g: box_iou(p.box, g.box))
        if box_iou(p.box, g.box) >= 0.5:
            named.append((k + 1, g.category, True, 0.9, p.centroid, p.box))
    assert len(named) >= 2, (len(props), [g.category for g in gts])
    arm = ArmController("right", table_height=world.config.table_height)
    try:
        R = quaternion_to_matrix(f.camera_quaternion)  # what the learner sends: base-frame positions
        placed = [(*d[:4], R @ np.asarray(d[4], float) + f.camera_position, d[5]) for d in named]
        arm.detected.update(placed, 1.0, (f.camera_position, f.camera_quaternion), f.K, (320, 240))
        by_cat = {o.category: o for o in world.objects}
        for _, category, *_ in named:
            assert np.linalg.norm(arm.locate(category)[:2] - by_cat[category].position[:2]) < 0.03, category
    finally:
        arm.close()


def test_dataset_layout_and_manifest(tmp_path):
    spec = DatasetSpec(classes=("mug", "lemon", "pebble"), objects_per_class=3, poses_per_object=2,
                       train_per_class=2, image_size=48, seed=2)
    m = render_dataset(tmp_path, spec)
    for c in spec.classes:
        assert len(list((tmp_path / "train" / c).glob("*.png"))) == 2
        assert len(list((tmp_path / "test" / c).glob("*.png"))) == 4
    saved = json.loads((tmp_path / "manifest.json").read_text())
    assert saved["spec"]["seed"] == 2 and saved["num_train"] == 6 and saved["num_test"] == 12
    with pytest.raises(FileExistsError):
        render_dataset(tmp_path, spec)
    with pytest.raises(ValueError, match="unknown classes"):
        DatasetSpec(classes=("spaceship",))


def test_baxter_stream_logic_rate_and_names():
    s = BaxterCommandStream("right", rate_hz=20.0, hold_s=1.0)
    assert s.topic == "/robot/limb/right/joint_command"
    cmd = s.set_target({"right_s0": 0.1, "right_e1": 1.0}, now=0.0)
    assert cmd.mode == baxter.POSITION_MODE and cmd.names == ("right_s0", "right_e1")
    ticks = [s.tick(t) for t in np.arange(0.0, 1.5, s.period_s)]
    assert sum(t is not None for t in ticks) >= 20  # 1 s at 20 Hz
    with pytest.raises(ValueError):
        BaxterCommandStream("right", rate_hz=4.0)
    with pytest.raises(ValueError, match="left_s0"):
        s.set_target({"left_s0": 0.0}, now=0.0)


def test_trajectory_plan_reaches_target_at_limited_speed():
    plan = plan_trajectory({"a": 0.0, "b": 1.0}, {"a": 1.2, "b": 1.0}, max_velocity=0.6, steps=4)
    assert plan.points[-1][0] == (1.2, 1.0) and plan.points[-1][1] == pytest.approx(2.0)
