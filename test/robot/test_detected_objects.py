"""Without ROS: base-frame detections remembered for pointing; placing objects in the world."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.robot.arm_logic import ArmController, PointingRefused
from cbcl_pr_ros.robot.detected_objects import DetectedObjects
from cbcl_pr_ros.robot.world import CameraConfig, SimWorld, WorldConfig, look_at_quaternion

CAM = np.array([0.7, -0.1, 0.4])
QUAT = look_at_quaternion(CAM, [0.7, -0.1, -0.18])  # straight down at the table
K = CameraConfig(640, 480, 60.0).intrinsics()


CAMERA = (CAM, QUAT)


def test_base_frame_detections_are_remembered_and_best_confidence_wins() -> None:
    mem = DetectedObjects()
    a, b = np.array([0.72, -0.05, -0.14]), np.array([0.65, -0.2, -0.15])
    n = mem.update([(1, "mug", True, 0.6, a), (2, "mug", True, 0.9, b),
                    (3, "", False, 0.3, a + 0.1), (4, "duck", True, 0.8, [np.nan] * 3)], 1.0, CAMERA)
    assert n == 3  # the depth-less duck has no position
    np.testing.assert_allclose(mem.best("mug").centre, b, atol=1e-9)
    assert mem.best("duck") is None and mem.labels() == ["mug"]  # unknown objects are no target


def test_one_bad_view_does_not_relabel_a_remembered_object() -> None:
    mem = DetectedObjects()
    a = np.array([0.72, -0.05, -0.14])
    for label, conf in (("mug", 0.8), ("mug", 0.7), ("duck", 1.0), ("mug", 0.6)):
        mem.update([(1, label, True, conf, a + np.array([0.01, 0.0, 0.0]))], 1.0, CAMERA)
    assert len(mem.objects_) == 1 and mem.best("mug") is not None and mem.best("duck") is None
    # a view that only shows part of it (box at the image border) counts less
    for _ in range(2):
        mem.update([(1, "duck", True, 1.0, a, (0, 10, 50, 60))], 2.0, CAMERA, K, (640, 480))
    assert mem.best("mug") is not None
    # a newer model (a class taught since) starts the votes afresh
    mem.update([(1, "cup", True, 0.5, a)], 3.0, CAMERA, model_version=2)
    assert mem.best("cup") is not None and mem.best("mug") is None


def test_objects_out_of_view_are_kept_and_vanished_ones_dropped() -> None:
    mem = DetectedObjects()
    a = np.array([0.72, -0.05, -0.14])
    mem.update([(1, "mug", True, 0.9, a)], 1.0, CAMERA, K, (640, 480))
    far_cam = CAM + np.array([0.0, 1.0, 0.0])  # looking elsewhere: the mug is kept
    mem.update([], 2.0, (far_cam, look_at_quaternion(far_cam, far_cam - [0, 0, 0.6])), K, (640, 480))
    assert mem.best("mug") is not None
    mem.update([], 2.5, None, K, (640, 480))  # no camera pose: nothing can be judged out of view
    assert mem.best("mug") is not None
    mem.update([], 3.0, CAMERA, K, (640, 480))  # its place in view, nothing there: gone
    assert mem.best("mug") is None


def test_a_detection_is_its_tracks_object_and_a_new_track_is_matched_by_place() -> None:
    """The learner's track id says which remembered object a detection is (an object moved in view
    keeps its votes); a track id not remembered lands on the object at its place (its track began
    anew) or starts a new object."""
    mem = DetectedObjects(merge_m=0.06)
    a, b = np.array([0.72, -0.05, -0.14]), np.array([0.6, -0.25, -0.14])
    mem.update([(1, "mug", True, 0.9, a), (2, "duck", True, 0.9, b)], 1.0, CAMERA)
    moved = a + np.array([0.1, 0.0, 0.0])  # 10 cm: farther than merge_m, still track 1
    mem.update([(1, "mug", True, 0.8, moved), (2, "duck", True, 0.9, b)], 2.0, CAMERA, K, (640, 480))
    assert len(mem.objects_) == 2
    mug = mem.best("mug")
    np.testing.assert_allclose(mug.centre, moved)
    assert mug.votes["mug"] == pytest.approx(1.7)
    mem.update([(7, "duck", True, 0.5, b + 0.01), (1, "mug", True, 0.8, moved)], 3.0, CAMERA)  # duck's new track
    duck = mem.best("duck")
    assert len(mem.objects_) == 2 and duck.track_id == 7 and duck.votes["duck"] == pytest.approx(2.3)
    mem.update([(9, "cup", True, 0.7, np.array([0.5, 0.1, -0.14])), (1, "mug", True, 0.8, moved)], 4.0)
    assert len(mem.objects_) == 3 and mem.best("cup").track_id == 9


def test_point_at_prefers_a_detection_and_refuses_unknown_labels() -> None:
    arm = ArmController("right")
    try:
        target = np.array([0.7, -0.15, -0.12])
        arm.detected.update([(5, "duck", True, 0.8, target)], 1.0, CAMERA)
        pos, sol = arm.point_at("duck", {})
        np.testing.assert_allclose(pos, target, atol=1e-9)
        assert sol.error_m < 0.03
        with pytest.raises(PointingRefused, match="located: duck"):
            arm.point_at("teapot", {})
    finally:
        arm.close()


def test_world_place_checks_every_field_and_finds_free_spots() -> None:
    world = SimWorld(WorldConfig(camera=CameraConfig(64, 48), with_robot=False), seed=0)
    try:
        rng = np.random.default_rng(0)
        a = world.place("mug", 1, xy=(0.7, -0.1))
        again = SimWorld(WorldConfig(camera=CameraConfig(64, 48), with_robot=False), seed=0)
        try:  # the same (seed, category, instance) is the same object
            assert again.place("mug", 1, xy=(0.7, -0.1)).instance.rgba == a.instance.rgba
        finally:
            again.close()
        assert a.name == "mug_1" and a.category == "mug"
        spots = [world.place("can", i, rng=rng).position[:2] for i in range(4)]
        for i, p in enumerate(spots):
            assert np.linalg.norm(p - a.position[:2]) > 0.05
            assert all(np.linalg.norm(p - q) > 0.05 for q in spots[:i])
        for kw, match in [({"category": "spaceship"}, "unknown category"),
                          ({"category": "mug", "instance": 1}, "already on the table"),
                          ({"category": "mug", "instance": 2, "xy": (3.0, 0.0)}, "not on the table"),
                          ({"category": "mug", "instance": 2, "xy": (np.nan, 0.0)}, "finite"),
                          ({"category": "mug", "instance": -1}, "instance"),
                          # issue 22: names that forge log lines, look like paths or fill memory
                          ({"category": "mug", "instance": 3, "name": "x" * 1_000_000}, "object name"),
                          ({"category": "mug", "instance": 3, "name": "evil\nINFO forged"}, "object name"),
                          ({"category": "mug", "instance": 3, "name": "../etc/passwd"}, "object name"),
                          ({"category": "x" * 100_000}, "unknown category")]:
            n = len(world.objects)
            with pytest.raises(ValueError, match=match) as err:
                world.place(**kw)
            assert len(world.objects) == n and len(str(err.value)) < 400  # nothing placed, no long echo
    finally:
        world.close()


def test_world_caps_the_objects_placed_at_once() -> None:
    from cbcl_pr_ros.robot.world import MAX_OBJECTS

    world = SimWorld(WorldConfig(camera=CameraConfig(64, 48), with_robot=False), seed=0)
    try:
        for i in range(MAX_OBJECTS):
            world.place("ball", i, xy=(0.7, -0.1))  # one spot: the service does not check overlaps
        with pytest.raises(ValueError, match="the most placed at once"):
            world.place("ball", MAX_OBJECTS + 1, xy=(0.7, -0.1))
        assert len(world.objects) == MAX_OBJECTS
    finally:
        world.close()


def test_world_light_and_moves_check_everything_before_changing_anything() -> None:
    from cbcl_pr_ros.robot.world import random_light

    world = SimWorld(WorldConfig(camera=CameraConfig(64, 48), with_robot=False), seed=0)
    try:
        world.randomize_light(np.random.default_rng(7))  # the same draws as random_light (the teacher's SetLight)
        assert world.light == random_light(np.random.default_rng(7))
        before = dict(world.light)
        for args, match in [(((0, 0, 0), 0.5, 0.5, 0.1), "direction"), (((0, 0, np.nan), 0.5, 0.5, 0.1), "direction"),
                            (((0, 0, 1), 1.5, 0.5, 0.1), "ambient"), (((0, 0, 1), 0.5, -0.1, 0.1), "diffuse")]:
            with pytest.raises(ValueError, match=match):
                world.set_light(*args)
            assert world.light == before
        world.set_light((0.0, 0.0, 2.0), 0.6, 0.5, 0.0)
        assert world.light["direction"] == (0.0, 0.0, 2.0) and world.light["ambient"] == 0.6
        a, b = world.place("mug", 1, xy=(0.7, -0.1)), world.place("can", 1, xy=(0.6, -0.2))
        for names, poses, match in [(["mug_1", "ghost"], [(0.6, 0.0, 0.0), (0.7, 0.0, 0.0)], "ghost"),
                                    (["mug_1", "can_1"], [(0.6, 0.0, 0.0), (3.0, 0.0, 0.0)], "not on the table"),
                                    (["mug_1"], [(0.6, 0.0, np.inf)], "finite"),
                                    (["mug_1"], [], "1 names but 0 poses")]:
            with pytest.raises(ValueError, match=match):
                world.move_objects(names, poses)
            assert a.position[:2].tolist() == [0.7, -0.1] and b.position[:2].tolist() == [0.6, -0.2]
        world.move_objects(["mug_1", "can_1"], [(0.65, 0.0, 0.3), (0.75, -0.3, -1.0)])
        assert a.position[:2].tolist() == [0.65, 0.0] and b.yaw == -1.0
    finally:
        world.close()


def test_world_place_draws_the_instance_from_a_given_seed() -> None:
    """A script's own objects: instance k of a seed sequence is sample_instances' k-th of that seed."""
    from cbcl_pr_ros.robot.world import sample_instances

    world = SimWorld(WorldConfig(camera=CameraConfig(64, 48), with_robot=False), seed=0)
    try:
        drawn = sample_instances("duck", 2, np.random.default_rng([5, 3]))
        for k in (0, 1):
            o = world.place("duck", k, name=f"duck_{k}", xy=(0.7, -0.1 * k), instance_seed=[5, 3])
            assert (o.instance.model_index, o.instance.scale, o.instance.rgba) == \
                (drawn[k].model_index, drawn[k].scale, drawn[k].rgba)
        for bad in ([-1], [1] * 9):
            with pytest.raises(ValueError, match="seed"):
                world.place("duck", 2, xy=(0.7, 0.1), instance_seed=bad)
        assert len(world.objects) == 2
    finally:
        world.close()


def test_a_flood_of_fresh_objects_keeps_the_memory_bounded_and_the_real_object() -> None:
    """Objects of fresh track ids out of view used to pile up without end (10,240 after 40 messages of
    256, each message then costing seconds); now the least recently seen go first past MAX_REMEMBERED,
    and an object seen in every message stays."""
    from cbcl_pr_ros.robot.detected_objects import MAX_REMEMBERED

    mem = DetectedObjects()
    mug = np.array([0.72, -0.05, -0.14])
    tid = 100
    for k in range(40):
        junk = [(tid + i, "junk", True, 0.9, (50.0 + 0.1 * (tid + i), 0.0, 0.0)) for i in range(255)]
        tid += 255
        mem.update([(1, "mug", True, 0.8, mug), *junk], float(k))
        assert len(mem.objects_) <= MAX_REMEMBERED
    assert len(mem.objects_) == MAX_REMEMBERED
    np.testing.assert_allclose(mem.best("mug").centre, mug)
    newest = max(o.track_id for o in mem.objects_)
    assert newest == tid - 1  # the newest junk is kept, the oldest went first


@pytest.mark.parametrize("bad", [
    (7, "mug", True, float("nan"), [0.65, -0.2, -0.15]),
    (7, "mug", True, float("inf"), [0.65, -0.2, -0.15]),
    (7, "mug", True, 1e308, [0.65, -0.2, -0.15]),
    (7, "mug", True, -1.0, [0.65, -0.2, -0.15]),
    (7, "mug", True, 1.5, [0.65, -0.2, -0.15]),
    (7, "mug", True, 0.9, [1e30, 0.0, 0.0]),
    (7, "m" * 1000, True, 0.9, [0.65, -0.2, -0.15]),
    (7, "mug\nERROR forged", True, 0.9, [0.65, -0.2, -0.15]),
    (7, "mug", True, "lots", [0.65, -0.2, -0.15]),
])
def test_a_detection_out_of_range_votes_for_nothing(bad) -> None:
    """A confidence outside [0, 1] (NaN, inf, 1e308 outvoted every real view), a place beyond 10 km or
    a label no learner sends: the detection is not used and the honest view is still the target."""
    mem = DetectedObjects()
    honest = np.array([0.72, -0.05, -0.14])
    mem.update([(1, "mug", True, 0.6, honest)], 1.0)
    for k in range(3):
        assert mem.update([bad], 2.0 + k) == 0
    assert len(mem.objects_) == 1
    np.testing.assert_allclose(mem.best("mug").centre, honest)
    assert mem.best("mug").votes == {"mug": 0.6}


def test_a_new_label_in_every_message_keeps_the_votes_bounded_and_the_real_label() -> None:
    """A sender that gave its tracks a new label in every message grew each object's votes by one label
    a message, without end (102,400 labels, 22 MB after 400 messages of 256 objects); now each object
    keeps votes for at most MAX_LABELS labels, the fewest-voted going first, and stays what it was seen as."""
    from cbcl_pr_ros.robot.detected_objects import MAX_LABELS

    mem = DetectedObjects()
    mug = np.array([0.72, -0.05, -0.14])
    for _ in range(5):
        mem.update([(1, "mug", True, 0.9, mug)], 1.0)
    for k in range(200):
        mem.update([(1, f"label{k}", True, 1.0, mug)], 2.0 + k)
    (obj,) = mem.objects_
    assert len(obj.votes) == MAX_LABELS and obj.label == "mug"
    np.testing.assert_allclose(mem.best("mug").centre, mug)
