"""What a replay does, decided without ROS: the timed publications and the service calls.

The rclpy replay node only executes a :class:`ReplayPlan`; building the plan (reading and checking
the bag, timing at a rate, pairing each teaching event with its recorded frames) and summarising
what happened are pure functions, unit-tested here without a ROS graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import BagFormatError
from .reader import read_raw, read_session
from .records import EventKind, TeachingEventRecord
from .types import DEFAULT_EVENTS_TOPIC, check_topic_name, normalize_topic

__all__ = ["PlannedEvent", "PlannedMessage", "ReplayPlan", "build_plan", "kind_service", "timing_summary"]


@dataclass(frozen=True)
class PlannedMessage:
    """Publish ``data`` (CDR) on ``topic`` at ``offset_s`` after the replay starts."""

    offset_s: float
    topic: str
    msgtype: str
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class PlannedEvent:
    """Re-issue ``event`` as a service call, not before ``offset_s``, with its frames (CDR Images)."""

    offset_s: float
    event: TeachingEventRecord
    frames: tuple[bytes, ...] = field(repr=False)


@dataclass
class ReplayPlan:
    bag: Path
    rate: float | None  # None: as fast as possible
    messages: list[PlannedMessage]
    events: list[PlannedEvent]
    topics: dict[str, str]  # topic -> msgtype of the published topics
    duration_s: float  # at the replay's rate
    bag_duration_s: float = 0.0  # as recorded


def build_plan(
    path: str | Path,
    rate: float | None = 1.0,
    topics: list[str] | None = None,
    events_topic: str = DEFAULT_EVENTS_TOPIC,
    camera_topic: str | None = None,
    with_events: bool = True,
) -> ReplayPlan:
    """Read and check the bag (opened once), then time every message at ``rate`` (2.0 = twice as fast; None =
    as fast as possible).

    ``topics`` limits the published topics (default: every topic but the events topic). Teaching
    events become service calls when ``with_events``; a bag without them is then an error.
    """
    if rate is not None and not (0.01 <= float(rate) <= 1000.0):
        raise ValueError(f"rate must be in [0.01, 1000] or None (as fast as possible), got {rate}")
    path = Path(path)
    events_topic = normalize_topic(events_topic)
    session = read_session(path, camera_topic=camera_topic, events_topic=events_topic, keep="all") if with_events else None
    info, raw = (session.info, session.raw) if session else read_raw(path)
    wanted = [t for t in info.topics if t != events_topic] if topics is None else [normalize_topic(t) for t in topics]
    for t in wanted:
        if t not in info.topics:
            raise BagFormatError(path, f"topic not in bag (it has: {', '.join(sorted(info.topics))})", t)
        try:
            check_topic_name(t)
        except ValueError as exc:
            raise BagFormatError(path, f"cannot publish a topic of this bag: {exc}") from None
    t0 = info.start_ns
    scale = 0.0 if rate is None else 1.0 / float(rate)
    messages = [PlannedMessage((m.log_time_ns - t0) * 1e-9 * scale, m.topic, m.msgtype, m.data)
                for m in raw if m.topic in wanted]
    events = [PlannedEvent((log_time - t0) * 1e-9 * scale, ev, tuple(session.raw_frames[s] for s in ev.frame_stamps_ns))
              for ev, log_time in zip(session.events, session.event_log_times_ns)] if session else []
    return ReplayPlan(path, None if rate is None else float(rate), messages, events,
                      {t: info.topics[t].msgtype for t in wanted}, info.duration_ns * 1e-9 * scale,
                      info.duration_ns * 1e-9)


def timing_summary(errors_s: list[float] | np.ndarray) -> dict[str, float]:
    """p50/p95/max of absolute timing errors, in milliseconds."""
    e = np.abs(np.asarray(errors_s, dtype=float)) * 1e3
    if e.size == 0:
        return {"n": 0, "p50_ms": float("nan"), "p95_ms": float("nan"), "max_ms": float("nan")}
    return {"n": int(e.size), "p50_ms": float(np.percentile(e, 50)),
            "p95_ms": float(np.percentile(e, 95)), "max_ms": float(e.max())}


def kind_service(kind: EventKind) -> str:
    """Learner service a teaching event is re-issued as."""
    return {EventKind.TEACH: "teach_class", EventKind.CLASSIFY: "classify",
            EventKind.FORGET: "forget_class", EventKind.RENAME: "rename_class"}[EventKind(kind)]


