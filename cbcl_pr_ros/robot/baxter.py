"""Facts about the Baxter robot that every part of the robot layer shares (no simulator needed).

Joint names and limits are Baxter's (they match the URDF shipped in robosuite, from which the
simulated world reads them at run time; a test checks the two agree).
"""
from __future__ import annotations

__all__ = [
    "ARM_JOINTS",
    "JOINT_LIMITS",
    "POSITION_MODE",
    "VELOCITY_MODE",
    "TORQUE_MODE",
    "RAW_POSITION_MODE",
    "arm_joint_names",
    "joint_command_topic",
    "check_side",
]

# Suffixes in Baxter's order: shoulder roll/pitch, elbow roll/pitch, wrist roll/pitch/roll.
ARM_JOINTS: tuple[str, ...] = ("s0", "s1", "e0", "e1", "w0", "w1", "w2")

# Limits in radians (lower, upper), identical for both arms.
_LIMITS = {
    "s0": (-1.70167993878, 1.70167993878),
    "s1": (-2.147, 1.047),
    "e0": (-3.05417993878, 3.05417993878),
    "e1": (-0.05, 2.618),
    "w0": (-3.059, 3.059),
    "w1": (-1.57079632679, 2.094),
    "w2": (-3.059, 3.059),
}
JOINT_LIMITS: dict[str, tuple[float, float]] = {
    f"{side}_{j}": _LIMITS[j] for side in ("left", "right") for j in ARM_JOINTS
}

# baxter_core_msgs/JointCommand modes.
POSITION_MODE = 1
VELOCITY_MODE = 2
TORQUE_MODE = 3
RAW_POSITION_MODE = 4


def check_side(side: str) -> str:
    """Return ``side`` if it is ``"left"`` or ``"right"``, else raise ValueError."""
    if side not in ("left", "right"):
        raise ValueError(f"arm side must be 'left' or 'right', got {side!r}")
    return side


def arm_joint_names(side: str) -> list[str]:
    """Baxter's seven joint names of one arm, e.g. ``right_s0`` … ``right_w2``."""
    check_side(side)
    return [f"{side}_{j}" for j in ARM_JOINTS]


def joint_command_topic(side: str) -> str:
    """Topic a Baxter (through its ROS 1↔2 bridge) listens on for one arm's joint commands."""
    return f"/robot/limb/{check_side(side)}/joint_command"
