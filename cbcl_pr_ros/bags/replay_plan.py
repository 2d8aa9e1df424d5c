"""What a replay does, decided without ROS: the timed publications and the service calls.

The rclpy replay node only executes a :class:`ReplayPlan`; building the plan (reading and checking
the bag, timing at a rate, pairing each teaching event with its recorded frames) and summarising
what happened are pure functions, unit-tested here without a ROS graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..stamps import stamp_to_ns
from .errors import BagFormatError
from .reader import check_bag, iter_raw, read_session
from .records import EventKind, TeachingEventRecord
from .types import IMAGE_TYPE, make_typestore
from .writer import DEFAULT_EVENTS_TOPIC, normalize_topic

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
    duration_s: float


def build_plan(
    path: str | Path,
    rate: float | None = 1.0,
    topics: list[str] | None = None,
    events_topic: str = DEFAULT_EVENTS_TOPIC,
    camera_topic: str | None = None,
    with_events: bool = True,
) -> ReplayPlan:
    """Read and check the bag, then time every message at ``rate`` (2.0 = twice as fast; None =
    as fast as possible).

    ``topics`` limits the published topics (default: every topic but the events topic). Teaching
    events become service calls when ``with_events``; a bag without them is then an error.
    """
    if rate is not None and not (0.01 <= float(rate) <= 1000.0):
        raise ValueError(f"rate must be in [0.01, 1000] or None (as fast as possible), got {rate}")
    path = Path(path)
    info = check_bag(path)  # refuses a truncated bag before anything is published
    events_topic = normalize_topic(events_topic)
    if topics is None:
        wanted = [t for t in info.topics if t != events_topic]
    else:
        wanted = [normalize_topic(t) for t in topics]
        for t in wanted:
            if t not in info.topics:
                raise BagFormatError(path, f"topic not in bag (it has: {', '.join(sorted(info.topics))})", t)
    published = {t: info.topics[t].msgtype for t in wanted}
    t0 = info.start_ns
    scale = 0.0 if rate is None else 1.0 / float(rate)
    messages = [
        PlannedMessage((m.log_time_ns - t0) * 1e-9 * scale, m.topic, m.msgtype, m.data)
        for m in iter_raw(path, wanted)
    ] if wanted else []

    events: list[PlannedEvent] = []
    if with_events:
        session = read_session(path, camera_topic=camera_topic, events_topic=events_topic)
        # Frames as stored (CDR), by header stamp, so TeachClass/Classify get the recorded bytes.
        store = make_typestore()
        raw_by_stamp: dict[int, bytes] = {}
        needed = {s for ev in session.events for s in ev.frame_stamps_ns}
        for m in iter_raw(path, [session.camera_topic]):
            hdr = store.deserialize_cdr(m.data, IMAGE_TYPE).header.stamp
            stamp = stamp_to_ns(hdr)
            if stamp in needed:
                raw_by_stamp.setdefault(stamp, m.data)
        ev_times = [m.log_time_ns for m in iter_raw(path, [events_topic])]
        for ev, log_time in zip(session.events, ev_times):
            events.append(PlannedEvent((log_time - t0) * 1e-9 * scale, ev,
                                       tuple(raw_by_stamp[s] for s in ev.frame_stamps_ns)))
    return ReplayPlan(path, None if rate is None else float(rate), messages, events, published,
                      info.duration_ns * 1e-9 * scale)


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


