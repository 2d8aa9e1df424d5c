"""Quality-of-service profiles of the nodes, chosen in one place.

Cameras publish with sensor-data QoS (best effort, keep last). A subscriber asking for RELIABLE
never matches a best-effort publisher, which is the "I get no output" problem most reported for
perception nodes; ``qos_overrides.<topic>.subscription.reliability`` lets a user match a reliable
camera (a bag replay, a simulator) and :func:`describe_qos` gives the words for the hint logged when nothing arrives.

These are the DEFAULTS of each topic. The extractor and the learner create every publisher and
subscription with rclpy's QoS overriding options (:func:`cbcl_pr_ros.nodes.lifecycle.overridable`),
so ``qos_overrides.<topic>.publisher|subscription.<history|depth|reliability>`` parameters given at
start win over them (docs/nodes.md "QoS choices and transport"). Services have no such overriding.
"""
from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
)

__all__ = [
    "RELIABILITY_CHOICES",
    "image_qos",
    "feature_qos",
    "result_qos",
    "status_qos",
    "service_qos",
    "describe_qos",
]

RELIABILITY_CHOICES = ("best_effort", "reliable")


def _reliability(name: str) -> ReliabilityPolicy:
    if name not in RELIABILITY_CHOICES:
        raise ValueError(f"reliability must be one of {RELIABILITY_CHOICES}, got {name!r}")
    return ReliabilityPolicy.BEST_EFFORT if name == "best_effort" else ReliabilityPolicy.RELIABLE


def image_qos(reliability: str = "best_effort", depth: int = 2) -> QoSProfile:
    """Camera subscription: keep only the newest frames so none queue up behind a slow consumer."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=_reliability(reliability),
        durability=DurabilityPolicy.VOLATILE,
    )


def feature_qos(reliability: str = "best_effort", depth: int = 5) -> QoSProfile:
    """Feature vectors follow the camera: same reliability, a little more depth (they are small).

    A best-effort subscriber matches both best-effort and reliable publishers, so the learner's
    default works with any extractor.
    """
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=_reliability(reliability),
        durability=DurabilityPolicy.VOLATILE,
    )


def result_qos(depth: int = 10) -> QoSProfile:
    """Predictions and debug images: reliable publishers, so both kinds of subscriber match."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )


def status_qos() -> QoSProfile:
    """Status is latched (transient local, depth 1): a late subscriber gets the current state at once."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=1,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )


def describe_qos(profile: QoSProfile) -> str:
    """Short human-readable form, e.g. ``best_effort/keep_last(2)/volatile``, for log lines."""
    rel = "best_effort" if profile.reliability == ReliabilityPolicy.BEST_EFFORT else "reliable"
    dur = "transient_local" if profile.durability == DurabilityPolicy.TRANSIENT_LOCAL else "volatile"
    hist = f"keep_last({profile.depth})" if profile.history == HistoryPolicy.KEEP_LAST else "keep_all"
    return f"{rel}/{hist}/{dur}"


def service_qos(depth: int = 100) -> QoSProfile:
    """Services and their clients: reliable, keep last ``depth`` (rclpy's client default: 10).

    Every client of a service reads the service's one reply topic and drops the others' replies
    as it takes them (Fast DDS and Cyclone DDS alike). A client whose executor pauses while another
    client calls often sees its own reply pushed out of its reader's keep-last history: a call the
    server answered but the caller never receives. Depth 100 rode out 0.15-0.3 s pauses at ~100-130
    replies/s where 10 lost 6-28 % of calls (docs/security.md "Lost replies"); it bounds memory.
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)
