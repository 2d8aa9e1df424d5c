"""The arm's IK seed is the joint_states it hears, and anyone on the domain may publish those:
a seed can help the solver, never keep it from pointing or looking where the neutral start can."""
from __future__ import annotations

import pytest

from cbcl_pr_ros.robot.kinematics import BaxterKinematics
from cbcl_pr_ros.robot.look_poses import look_eye


@pytest.fixture(scope="module")
def kin():
    k = BaxterKinematics("right")
    yield k
    k.close()


def _seeds(kin):
    names = kin.joint_names
    return {"outside the limits (100 rad)": {n: 100.0 for n in names},
            "1e300": {n: 1e300 for n in names},
            "at the upper limits": {n: kin.limits[n][1] for n in names},
            "at the lower limits": {n: kin.limits[n][0] for n in names}}


def test_a_stranger_seed_cannot_keep_the_arm_from_pointing(kin):
    """Each of these seeds made point_at answer 'no solution within joint limits' for a target the
    neutral start reaches (ray 1.4 mm off)."""
    target = (0.7, -0.2, -0.15)
    assert kin.point_at(target).error_m <= 0.03
    for why, seed in _seeds(kin).items():
        sol = kin.point_at(target, seed=seed)
        assert sol.error_m <= 0.03, why
        assert kin._within_limits(dict(zip(sol.joint_names, sol.joint_positions))), why


def test_a_stranger_seed_cannot_keep_the_camera_from_looking(kin):
    target = (0.7, -0.2, -0.18)
    eye = look_eye(target, 0.48)
    assert kin.aim_camera(eye, target).error_m <= 0.02
    for why, seed in _seeds(kin).items():
        assert kin.aim_camera(eye, target, seed=seed).error_m <= 0.02, why
