"""Camera poses by stamp: checked numbers, jump refusal (against kept poses only), a second publisher,
exact / interpolated / refused lookups."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from cbcl_pr_ros.perception.camera_pose import CameraPose, CameraPoses

S = 1_000_000_000  # ns per second
UP = (0.0, 0.0, 0.0, 1.0)


def test_to_fixed_turns_then_moves():
    pose = CameraPose.checked((1.0, 2.0, 3.0), Rotation.from_euler("z", 90, degrees=True).as_quat(), "base")
    out = pose.to_fixed(np.array([[1.0, 0.0, 0.0], [np.nan, 0.0, 0.0]]))
    assert np.allclose(out[0], [1.0, 3.0, 3.0])
    assert np.all(np.isnan(out[1]))  # no depth stays no depth


@pytest.mark.parametrize("position, quat, match", [
    ((0.0, 0.0, math.nan), UP, "non-finite"),
    ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, math.inf), "non-finite"),
    ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0), "unit quaternion"),
    ((0.0, 0.0, 0.0), (0.0, 0.0, 0.5, 0.5), "unit quaternion"),
    ((0.0, 0.0), UP, "3 position"),
    ((1e9, 0.0, 0.0), UP, "10 km"),
])
def test_bad_pose_is_refused_and_kept_out(position, quat, match):
    poses = CameraPoses()
    assert poses.add(0, (0.0, 0.0, 0.0), UP, "base") == ""
    why = poses.add(S // 10, position, quat, "base")
    assert match in why
    assert poses.refused == 1 and poses.received == 2
    assert poses.pose_at(S // 10) is None  # nothing kept for that stamp (0.1 s from the kept one)


@pytest.mark.parametrize("frame", ["", "   "])
def test_a_pose_that_names_no_frame_is_refused(frame):
    """tf frames have names: a pose in "" would be taken for the camera frame's own positions."""
    with pytest.raises(ValueError, match="names no frame"):
        CameraPose.checked((0.0, 0.0, 0.0), UP, frame)
    poses = CameraPoses()
    assert "names no frame" in poses.add(0, (0.0, 0.0, 0.0), UP, frame)
    assert poses.refused == 1 and poses.pose_at(0) is None
    assert poses.add(S // 10, (0.0, 0.0, 0.0), UP, "base") == ""  # the next named pose is the first kept


def test_a_frame_name_is_kept_whole_or_refused_never_cut():
    """A cut name is another frame: a 100-character frame is kept as it is (it used to be cut to 64, so
    positions said a frame nobody named); one over the bound, or with a control character, is refused."""
    MAX_FRAME_NAME_CHARS = 256  # what LearnerClient counts in a learner's largest Detections

    long_name = "robot1/" + "b" * 93
    assert CameraPose.checked((0.0, 0.0, 0.0), UP, long_name).frame == long_name
    poses = CameraPoses()
    for bad, why in (("f" * (MAX_FRAME_NAME_CHARS + 1), f"the most is {MAX_FRAME_NAME_CHARS}"),
                     ("base\n[ERROR] forged", "unprintable"), ("x" * 1_000_000, "1000000 characters")):
        said = poses.add(0, (0.0, 0.0, 0.0), UP, bad)
        assert why in said and len(said) < 200, said[:300]
    assert poses.refused == 3 and poses.pose_at(0) is None
    assert poses.add(0, (0.0, 0.0, 0.0), UP, "f" * MAX_FRAME_NAME_CHARS) == ""  # at the bound: kept


def test_exact_stamp_then_interpolation_then_nothing():
    poses = CameraPoses(max_gap_s=0.25, tolerance_s=0.02)
    q0, q1 = Rotation.identity().as_quat(), Rotation.from_euler("z", 0.2).as_quat()
    assert poses.add(1 * S, (0.0, 0.0, 0.0), q0, "base") == ""
    assert poses.add(1 * S + S // 5, (0.2, 0.0, 0.0), q1, "base") == ""  # 1 m/s, 1 rad/s
    assert np.allclose(poses.pose_at(1 * S).position, 0.0)
    mid = poses.pose_at(1 * S + S // 10)
    assert np.allclose(mid.position, [0.1, 0.0, 0.0])
    assert math.isclose(mid.rotation.magnitude(), 0.1, abs_tol=1e-9)
    assert poses.pose_at(1 * S + S // 5 + S // 100) is not None  # 10 ms past the newest: within tolerance
    assert poses.pose_at(1 * S + S // 2) is None  # 0.3 s past the newest: no pose, not an old one
    assert poses.pose_at(S // 2) is None  # before the history


def test_no_interpolation_across_a_long_gap():
    poses = CameraPoses(max_gap_s=0.25)
    poses.add(0, (0.0, 0.0, 0.0), UP, "base")
    poses.add(S, (0.5, 0.0, 0.0), UP, "base")  # paused camera: 1 s later, elsewhere
    assert poses.pose_at(S // 2) is None


def test_a_glitch_costs_only_itself_and_a_teleport_is_taken_once_it_holds():
    poses = CameraPoses(max_speed_mps=3.0, relocalise_s=1.0)
    dt = S // 10
    assert poses.add(0, (0.5, 0.0, 0.3), UP, "base", now_s=0.0) == ""
    assert "jumped" in poses.add(dt, (0.0, 0.0, 0.0), UP, "base", now_s=0.1)  # a zero pose: 0.58 m in 0.1 s
    assert poses.add(2 * dt, (0.5, 0.0, 0.3), UP, "base", now_s=0.2) == ""  # judged against the kept pose
    assert poses.pose_at(dt) is not None  # interpolated between the two kept ones, not the glitch
    assert np.allclose(poses.pose_at(dt).position, [0.5, 0.0, 0.3])
    # re-localised far away: refused while it has not held for relocalise_s (arrival time) ...
    for k, now in enumerate((0.3, 0.6, 0.9, 1.2)):
        assert "jumped" in poses.add((3 + k) * dt, (5.0, 0.0, 0.3), UP, "base", now_s=now)
    assert poses.add(7 * dt, (5.0, 0.0, 0.3), UP, "base", now_s=1.3) == ""  # ... then taken
    assert poses.add(8 * dt, (5.0, 0.0, 0.3), UP, "base", now_s=1.4) == ""  # consistent from then on
    turn = Rotation.from_euler("z", 3.0).as_quat()
    assert "deg" in poses.add(8 * dt + S // 100, (5.0, 0.0, 0.3), turn, "base", now_s=1.41)  # 3 rad in 10 ms


def test_a_rogue_pose_after_each_real_one_never_displaces_the_real_ones():
    """The real camera moves 8 cm per 0.25 s; after each real pose comes a rogue one (elsewhere, in
    another frame, or from a second publisher close by). Every real pose is kept, no rogue one is."""
    poses = CameraPoses(relocalise_s=1.0)
    dt = S // 4
    for f in range(43):
        x, now = 0.5 + 0.08 * f, 0.25 * f
        assert poses.add(f * dt, (x, -0.3, 0.3), UP, "base", source="real", now_s=now) == "", f
        rogue = [((0.0, 0.0, 0.0), "base", "real"),  # a glitch of the real publisher's kind
                 ((x, -0.3, 0.3), "odom", "real"),  # another frame
                 ((x + 0.3, -0.3, 0.3), "base", "stranger")][f % 3]  # plausible, but a second publisher
        assert poses.add(f * dt + S // 100, rogue[0], UP, rogue[1], source=rogue[2], now_s=now + 0.01) != "", f
    assert poses.refused == 43 and poses.received == 86
    assert np.allclose(poses.pose_at(42 * dt).position, [0.5 + 0.08 * 42, -0.3, 0.3])


def test_a_second_publisher_takes_over_only_after_the_first_went_quiet():
    poses = CameraPoses(relocalise_s=1.0)
    assert poses.add(0, (0.5, 0.0, 0.3), UP, "base", source="a", now_s=0.0) == ""
    assert "second publisher" in poses.add(S // 10, (0.5, 0.0, 0.3), UP, "base", source="b", now_s=0.5)
    assert poses.add(2 * S, (0.6, 0.0, 0.3), UP, "base", source="b", now_s=2.0) == ""  # a quiet for 2 s
    assert "second publisher" in poses.add(2 * S + S // 10, (0.6, 0.0, 0.3), UP, "base", source="a", now_s=2.1)


def test_a_change_of_frame_is_a_jump_until_the_new_frame_holds():
    poses = CameraPoses(relocalise_s=1.0)
    poses.add(0, (0.0, 0.0, 0.0), UP, "base", now_s=0.0)
    assert "frame changed" in poses.add(S, (0.0, 0.0, 0.0), UP, "odom", now_s=1.0)
    assert "frame changed" in poses.add(S + S // 2, (0.0, 0.0, 0.0), UP, "odom", now_s=1.5)
    assert poses.add(2 * S, (0.0, 0.0, 0.0), UP, "odom", now_s=2.0) == ""  # odom for 1 s, base quiet
    assert poses.pose_at(2 * S).frame == "odom"


def test_history_is_bounded_and_cleared():
    poses = CameraPoses(capacity=10)
    for i in range(50):
        assert poses.add(i * S // 10, (0.01 * i, 0.0, 0.0), UP, "base") == ""
    assert poses.pose_at(0) is None and poses.pose_at(49 * S // 10) is not None
    poses.clear()
    assert poses.pose_at(49 * S // 10) is None


@pytest.mark.parametrize("kw", [{"capacity": 1}, {"max_speed_mps": -1.0}, {"max_gap_s": math.nan},
                                {"relocalise_s": math.inf}])
def test_bad_settings_raise(kw):
    with pytest.raises(ValueError):
        CameraPoses(**kw)
