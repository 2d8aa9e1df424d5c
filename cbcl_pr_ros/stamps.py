"""Time stamps ↔ integer nanoseconds, in one place (ROS-free).

A ROS ``builtin_interfaces`` Time or Duration is two integers, ``sec`` and ``nanosec``; the package
keys frames and records events by integer nanoseconds. These functions take anything with ``sec``
and ``nanosec`` (an rclpy message, a rosbags one), so the nodes, the bag tools and the robot code
share them; ``nodes.conversions.ns_to_stamp`` builds the rclpy message from :func:`split_ns`.
"""
from __future__ import annotations

from typing import Any

__all__ = ["NS_PER_S", "stamp_to_ns", "stamp_to_s", "split_ns", "seconds_to_ns"]

NS_PER_S = 1_000_000_000


def stamp_to_ns(stamp: Any) -> int:
    """Integer nanoseconds of a stamp (exact; the frame keys and bag records use these)."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def stamp_to_s(stamp: Any) -> float:
    """Seconds of a stamp as a float (for ages and latencies; not exact, never a key)."""
    return stamp_to_ns(stamp) / NS_PER_S


def split_ns(ns: int) -> tuple[int, int]:
    """``(sec, nanosec)`` of a non-negative nanosecond count, the fields of a Time or Duration."""
    ns = int(ns)
    if ns < 0:
        raise ValueError(f"a stamp must be >= 0 ns, got {ns}")
    return divmod(ns, NS_PER_S)


def seconds_to_ns(seconds: float) -> int:
    """Nanoseconds of a duration in seconds, rounded (``split_ns`` then never gives 1e9 nanosec)."""
    return int(round(float(seconds) * NS_PER_S))
