"""The learner node's fleet mode on ROS: ClassUpdate messages to and from plain class updates.

Thin adapter (docs/nodes.md "Fleet mode"): the publisher (made at configure) and the subscription
(made at activate, gone at deactivate) of ``fleet_topic`` are reliable and transient-local with a
history of ``fleet_history_depth``, so a robot that joins late receives the last updates of every
member. A received message becomes a plain :class:`~cbcl_pr_ros.service.fleet.ClassUpdate` for the
session's :class:`~cbcl_pr_ros.service.fleet.FleetMember`, which decides everything; its answer is
logged in one line (refusals by the allow-list or the rate limit at most once a second, so a flood
cannot flood the log). While active, a timer of ``fleet_digest_period`` publishes the digest that
lets a robot that missed an update ask for it again, and one of ``fleet_save_period`` writes the
peers' changes kept in RAM (``LearnerSession.flush_fleet``).
"""
from __future__ import annotations

from typing import Any, Callable

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from cbcl_pr_ros.msg import ClassUpdate as ClassUpdateMsg
from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.service.fleet import ClassUpdate, FleetSettings, Received

__all__ = ["class_update_from_msg", "class_update_msg", "class_update_received", "fleet_line", "fleet_qos",
           "fleet_timers", "log_received", "FIELDS_BYTES"]

#: what a ClassUpdate holds besides its class statistics, at most: names and 64 contribution ids take a
#: few KiB; a message larger than the statistics' cap plus this is no fleet member's
FIELDS_BYTES = 64 * 1024


def fleet_qos(depth: int) -> QoSProfile:
    """Reliable, transient-local, keep last ``depth``: late joiners get the recent updates."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=int(depth), reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


def class_update_msg(u: ClassUpdate, stamp: Any) -> ClassUpdateMsg:
    """The message of one outgoing class update, stamped ``stamp`` (the node clock's now)."""
    msg = ClassUpdateMsg(fleet=u.fleet, robot=u.robot, sequence=u.sequence, op=u.op, class_name=u.class_name,
                         new_name=u.new_name, contribution_ids=list(u.contribution_ids))
    msg.stamp = stamp
    msg.class_memory = u.class_memory
    return msg


def class_update_from_msg(msg: ClassUpdateMsg) -> ClassUpdate:
    """A received message as a plain class update (the fleet member checks every field)."""
    return ClassUpdate(msg.fleet, msg.robot, int(msg.sequence), int(msg.op), msg.class_name, msg.new_name,
                       tuple(msg.contribution_ids), bytes(msg.class_memory))


def class_update_received(msg: ClassUpdateMsg | bytes, max_update_bytes: int, logger: Any) -> ClassUpdate | None:
    """The plain update of a message the (raw) subscription delivered, or None after one throttled
    warning when its serialized size is over ``max_update_bytes`` + :data:`FIELDS_BYTES`: refused
    before rclpy builds it, so a peer's million ids or gigabyte payload costs a length check."""
    if isinstance(msg, (bytes, bytearray)):
        if len(msg) > int(max_update_bytes) + FIELDS_BYTES:
            logger.warning(f"fleet update ignored: a message of {len(msg)} bytes; one holds at most "
                           f"fleet_max_update_bytes ({int(max_update_bytes)}) of statistics and "
                           f"{FIELDS_BYTES} of names and ids", throttle_duration_sec=1.0)
            return None
        from rclpy.serialization import deserialize_message

        msg = deserialize_message(bytes(msg), ClassUpdateMsg)
    return class_update_from_msg(msg)


def fleet_timers(node: Any, settings: FleetSettings, digest: Callable[[], Any], save: Callable[[], Any],
                 group: Any) -> tuple[Any, Any]:
    """The node's fleet timers on its clock, in the fleet's callback group: the digest every
    ``fleet_digest_period`` and the save of peers' changes every ``fleet_save_period`` (None where 0)."""
    def every(period: float, call: Callable[[], Any], what: str) -> Any:
        return node.create_timer(period, guard_callback(node, call, what), callback_group=group) if period > 0 else None
    return every(settings.digest_s, digest, "fleet digest"), every(settings.save_s, save, "fleet save")


def fleet_line(settings: FleetSettings, topic: str) -> str:
    """The line logged when fleet mode starts."""
    return (f"fleet mode: robot '{settings.robot}' in fleet '{settings.fleet}' on '{topic}' "
            f"(merging {', '.join(sorted(settings.allow)) or 'every robot'})")


def log_received(logger: Any, res: Received) -> None:
    """One line for a received update: applied (info), refused by a flood limit (warning, at most once
    a second) or refused otherwise (warning); nothing when the member has nothing to say."""
    if not res.message:
        return
    if res.applied:
        logger.info(res.message)
    elif res.flood:
        logger.warning(res.message, throttle_duration_sec=1.0)
    else:
        logger.warning(res.message)
