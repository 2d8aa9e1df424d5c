"""The scripted teacher's held-up views when the arm cannot reach the first camera pose (no ROS
graph: the teacher's world and kinematics are stand-ins).

A tall object held beside the arm's reach once ended the main job with ``Unreachable`` (seed 3's
cereal box: neither the drawn view nor the one straight above was reachable); the teacher now tries
two more directions and otherwise skips that view.
"""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.nodes.demo_teacher import ScriptedTeacher
from cbcl_pr_ros.robot.kinematics import Unreachable


class _Kin:
    """Reaches a camera pose only from the ``reach_from``-th request on (None: never)."""

    def __init__(self, reach_from: int | None) -> None:
        self.reach_from, self.eyes = reach_from, []

    def aim_camera(self, eye, target, seed=None):
        self.eyes.append(np.asarray(eye, float))
        if self.reach_from is None or len(self.eyes) <= self.reach_from:
            raise Unreachable("out of reach")
        return type("Solution", (), {"as_dict": lambda self: {"right_s0": 0.0}})()


class _World:
    def __init__(self) -> None:
        self.moves: list = []

    def joints(self) -> dict:
        return {}

    def move_joints(self, joints: dict) -> None:
        self.moves.append(joints)


def _teacher(kin: _Kin) -> ScriptedTeacher:
    teacher = object.__new__(ScriptedTeacher)  # only the parts aim_at_held uses
    teacher.kin, teacher.world = kin, _World()
    return teacher


def test_a_view_out_of_reach_is_taken_from_above_or_another_side():
    pos = np.array([0.66, 0.14, -0.1])
    kin = _Kin(reach_from=2)
    teacher = _teacher(kin)
    teacher.aim_at_held(pos, np.random.default_rng(0))
    assert len(kin.eyes) == 3 and len(teacher.world.moves) == 1  # moved once, to the first reachable pose
    above = kin.eyes[1] - pos
    assert above[:2] == pytest.approx([0.0, 0.0]) and 0.3 <= above[2] <= 0.45
    assert np.linalg.norm(kin.eyes[2] - pos) == pytest.approx(0.3)


def test_a_reachable_view_draws_no_more_than_before():
    """The first pose reached: the generator is left where the one-try code left it (main-job
    figures stay comparable)."""
    rng, ref = np.random.default_rng(5), np.random.default_rng(5)
    _teacher(_Kin(reach_from=0)).aim_at_held(np.zeros(3), rng)
    ref.uniform(size=3)
    assert rng.uniform() == ref.uniform()


def test_no_reachable_pose_raises_unreachable_and_moves_nothing():
    teacher = _teacher(_Kin(reach_from=None))
    with pytest.raises(Unreachable):
        teacher.aim_at_held(np.zeros(3), np.random.default_rng(1))
    assert len(teacher.kin.eyes) == 4 and teacher.world.moves == []
