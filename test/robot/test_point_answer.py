"""A point-at answer names the object it chose: its track id, its label and, among several objects
seen as that label, which one (and where the others are)."""
from __future__ import annotations

import numpy as np

from cbcl_pr_ros.robot.arm_logic import ArmController
from cbcl_pr_ros.robot.detected_objects import DetectedObjects, SeenObject


def _arm(objects, configured=None) -> ArmController:
    arm = object.__new__(ArmController)  # no kinematics needed to say which object
    arm.detected = DetectedObjects()
    arm.detected.objects_.extend(objects)
    arm.configured = configured or {}
    return arm


def _seen(track: int, x: float, y: float, votes: dict) -> SeenObject:
    return SeenObject(track, np.array([x, y, -0.15]), 0.0, track, dict(votes))


def test_one_object_is_named_by_track_and_label():
    text = _arm([_seen(3, 0.7, -0.2, {"mug": 4.0, "": 1.0})]).which("mug")
    assert text.startswith("object #3 ('mug', 80 % of its views)") and "such objects" not in text


def test_of_two_mugs_the_answer_says_which_and_where_the_other_is():
    arm = _arm([_seen(3, 0.7, -0.26, {"mug": 2.0}), _seen(7, 0.65, 0.1, {"mug": 5.0}),
                _seen(9, 0.6, 0.0, {"duck": 3.0})])
    text = arm.which("mug")
    assert text.startswith("object #7 ('mug'")
    assert "of 2 such objects" in text and "#3 at (0.70, -0.26)" in text and "#9" not in text


def test_a_configured_pose_is_said_to_be_one():
    assert "configured position" in _arm([], {"mug": np.zeros(3)}).which("mug")
