"""Where the hand camera looks: named look poses over the table and "look at this point" (no ROS).

A person setting up a session should not have to compute seven joint angles to see the table. A look
pose is a point on the table; the camera is put ``height_m`` above it (a little behind, so the
image's "up" points away from the robot) and aimed at it with the arm's inverse kinematics.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .kinematics import BaxterKinematics, PointingSolution, Unreachable

__all__ = ["LOOK_POSES", "DEFAULT_HEIGHT_M", "look_target", "look_eye", "solve_look", "LookRefused"]

# Points on the table (base frame x, y; z is the table top) the named poses look at.
LOOK_POSES: dict[str, tuple[float, float]] = {
    "table": (0.70, -0.16),        # the middle of the right arm's half: the sim launch file's objects
    "table_left": (0.70, 0.10),
    "table_right": (0.70, -0.40),
    "table_near": (0.55, -0.16),
    "table_far": (0.85, -0.16),
}
DEFAULT_HEIGHT_M = 0.48
_REACH_M = 1.6  # nothing Baxter can look at lies farther from its base


class LookRefused(ValueError):
    """The camera will not move: unknown pose name, a target out of reach or not finite."""


def look_target(pose: str, table_height: float) -> np.ndarray:
    """The base-frame point a named look pose aims at."""
    if pose not in LOOK_POSES:
        raise LookRefused(f"unknown look pose {pose[:40]!r}; known: {', '.join(LOOK_POSES)}")
    x, y = LOOK_POSES[pose]
    return np.array([x, y, float(table_height)])


def look_eye(target: Sequence[float], height_m: float = DEFAULT_HEIGHT_M) -> np.ndarray:
    """Camera position for looking at ``target``: ``height_m`` above it, 1/6 of that behind it."""
    t = np.asarray(target, float)
    return t + np.array([-height_m / 6.0, 0.0, height_m])


def solve_look(kin: BaxterKinematics, target: Sequence[float], height_m: float = DEFAULT_HEIGHT_M,
               seed: Mapping[str, float] | None = None) -> PointingSolution:
    """Joint positions that aim ``kin``'s hand camera at ``target``; :class:`LookRefused` otherwise."""
    t = np.asarray(target, float)
    if t.shape != (3,) or not np.all(np.isfinite(t)):
        raise LookRefused("the target must be three finite numbers (x, y, z in metres, base frame)")
    if float(np.linalg.norm(t)) > _REACH_M:
        raise LookRefused(f"target {np.round(t, 3).tolist()} is {np.linalg.norm(t):.2f} m from the base; "
                          f"the arm reaches about {_REACH_M} m")
    if not (math.isfinite(height_m) and 0.15 <= height_m <= 1.0):
        raise LookRefused(f"height_m must be 0.15..1.0 m, got {height_m!r}")
    try:
        return kin.aim_camera(look_eye(t, height_m), t, seed=seed)
    except Unreachable as exc:
        raise LookRefused(f"{exc}: try a nearer point or another height") from None
