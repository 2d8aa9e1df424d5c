"""How a joint target reaches an arm: the simulated world, a Baxter, or a JointTrajectory controller.

The pure part of each backend lives here (what to send, when, and for how long); the ROS node only
publishes what these objects return. A Baxter in position mode expects its command to be repeated
faster than 5 Hz (it drops out of position control after 0.2 s without one), so the Baxter backend
is a *stream* that keeps returning the command at ``rate_hz`` for ``hold_s`` seconds.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..stamps import seconds_to_ns, split_ns
from . import baxter

__all__ = [
    "BACKENDS",
    "BaxterCommand",
    "BaxterCommandStream",
    "TrajectoryPlan",
    "plan_trajectory",
    "load_baxter_joint_command",
    "check_backend",
]

BACKENDS = ("sim", "baxter", "trajectory")


def check_backend(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"arm backend must be one of {BACKENDS}, got {name!r}")
    return name


def load_baxter_joint_command() -> type:
    """The ``baxter_core_msgs/msg/JointCommand`` class, imported only when the Baxter backend is used."""
    try:
        mod = importlib.import_module("baxter_core_msgs.msg")
        return mod.JointCommand
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(
            "arm backend 'baxter' needs the ROS 2 interface package baxter_core_msgs (JointCommand: "
            "int32 mode, float64[] command, string[] names), as carried by Baxter's ROS 1<->2 bridge; "
            f"it is not importable here ({exc}). Build it into your workspace, or use backend 'trajectory' or 'sim'."
        ) from exc


@dataclass(frozen=True)
class BaxterCommand:
    """One ``JointCommand``: mode, joint names, and positions in the same order."""

    mode: int
    names: tuple[str, ...]
    command: tuple[float, ...]

    def fill(self, msg: Any) -> Any:
        """Copy into a JointCommand message instance and return it."""
        msg.mode = int(self.mode)
        msg.names = list(self.names)
        msg.command = [float(v) for v in self.command]
        return msg


@dataclass
class BaxterCommandStream:
    """Repeats a position-mode command at ``rate_hz`` for ``hold_s`` seconds after each new target."""

    side: str = "right"
    rate_hz: float = 20.0
    hold_s: float = 3.0
    _current: BaxterCommand | None = field(default=None, init=False)
    _until: float = field(default=-math.inf, init=False)

    def __post_init__(self) -> None:
        baxter.check_side(self.side)
        if not 5.0 < float(self.rate_hz) <= 1000.0:
            raise ValueError(f"rate_hz must be above 5 Hz (Baxter times out after 0.2 s) and at most 1000, got {self.rate_hz}")
        if float(self.hold_s) <= 0:
            raise ValueError(f"hold_s must be positive, got {self.hold_s}")

    @property
    def topic(self) -> str:
        return baxter.joint_command_topic(self.side)

    @property
    def period_s(self) -> float:
        return 1.0 / float(self.rate_hz)

    def set_target(self, positions: Mapping[str, float], now: float) -> BaxterCommand:
        """Start streaming a new target. Joint names must be this arm's; limits are checked."""
        names = baxter.arm_joint_names(self.side)
        extra = set(positions) - set(names)
        if extra:
            raise ValueError(f"joints {sorted(extra)} are not joints of Baxter's {self.side} arm ({names})")
        for n, v in positions.items():
            lo, hi = baxter.JOINT_LIMITS[n]
            if not (math.isfinite(float(v)) and lo - 1e-6 <= float(v) <= hi + 1e-6):
                raise ValueError(f"joint {n!r} target {v} outside its limits [{lo}, {hi}]")
        order = [n for n in names if n in positions]
        self._current = BaxterCommand(baxter.POSITION_MODE, tuple(order), tuple(float(positions[n]) for n in order))
        self._until = float(now) + float(self.hold_s)
        return self._current

    def tick(self, now: float) -> BaxterCommand | None:
        """The command to publish at time ``now`` (None when idle)."""
        if self._current is None or float(now) > self._until:
            return None
        return self._current

    def stop(self) -> None:
        self._current = None


@dataclass(frozen=True)
class TrajectoryPlan:
    """Waypoints for a ``trajectory_msgs/JointTrajectory``: names, then (positions, seconds from start)."""

    joint_names: tuple[str, ...]
    points: tuple[tuple[tuple[float, ...], float], ...]

    def fill(self, msg: Any, point_type: type, duration_type: type) -> Any:
        msg.joint_names = list(self.joint_names)
        msg.points = []
        for pos, t in self.points:
            pt = point_type()
            pt.positions = list(pos)
            sec, nanosec = split_ns(seconds_to_ns(t))
            pt.time_from_start = duration_type(sec=sec, nanosec=nanosec)
            msg.points.append(pt)
        return msg


def plan_trajectory(current: Mapping[str, float], target: Mapping[str, float], max_velocity: float = 0.6,
                    steps: int = 10, min_duration_s: float = 0.5) -> TrajectoryPlan:
    """Straight-line joint-space trajectory whose slowest joint moves at most ``max_velocity`` rad/s."""
    if max_velocity <= 0:
        raise ValueError(f"max_velocity must be positive, got {max_velocity}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    missing = set(target) - set(current)
    if missing:
        raise ValueError(f"current positions lack joints {sorted(missing)}")
    names = tuple(target)
    span = max((abs(float(target[n]) - float(current[n])) for n in names), default=0.0)
    duration = max(min_duration_s, span / max_velocity)
    pts = []
    for k in range(1, steps + 1):
        a = k / steps
        pts.append((tuple(float(current[n]) + a * (float(target[n]) - float(current[n])) for n in names), a * duration))
    return TrajectoryPlan(names, tuple(pts))
