"""A message header's two fields in one place (ROS-free): time stamps ↔ integer nanoseconds, and
the rule for frame names.

A ROS ``builtin_interfaces`` Time or Duration is two integers, ``sec`` and ``nanosec``; the package
keys frames and records events by integer nanoseconds. These functions take anything with ``sec``
and ``nanosec`` (an rclpy message, a rosbags one), so the nodes, the bag tools and the robot code
share them; ``nodes.conversions.ns_to_stamp`` builds the rclpy message from :func:`split_ns`.
"""
from __future__ import annotations

from typing import Any

__all__ = ["NS_PER_S", "MAX_FRAME_NAME_CHARS", "stamp_to_ns", "stamp_to_s", "split_ns", "seconds_to_ns",
           "check_frame_name"]

NS_PER_S = 1_000_000_000
#: the longest coordinate-frame name taken from a message (an image header's frame_id, a camera pose's
#: frame): a learner echoes both into every Detections it publishes, and a reader of those refuses a
#: message larger than one with names of this length (nodes/learner_client.py)
MAX_FRAME_NAME_CHARS = 256


def check_frame_name(frame: object, what: str = "frame_id", allow_empty: bool = True) -> str:
    """A coordinate-frame name from a message, unchanged: a string of at most
    :data:`MAX_FRAME_NAME_CHARS` printable characters (empty only when ``allow_empty``). ValueError
    otherwise, quoting at most a short prefix: a name is never cut, since a cut name is another frame."""
    if not isinstance(frame, str):
        raise ValueError(f"{what} must be a string, got {type(frame).__name__}")
    if not frame and not allow_empty:
        raise ValueError(f"empty {what}: a frame needs a name")
    if len(frame) > MAX_FRAME_NAME_CHARS:
        raise ValueError(f"{what} has {len(frame)} characters; the most is {MAX_FRAME_NAME_CHARS}")
    for i, ch in enumerate(frame):
        if not ch.isprintable():
            raise ValueError(f"{what} {frame[:40]!r} has an unprintable character U+{ord(ch):04X} at position {i}")
    return frame


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
