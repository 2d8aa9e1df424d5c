"""The learner node's fleet mode on ROS: ClassUpdate messages in and out of a ROS-free FleetMember.

Thin adapter (docs/nodes.md "Fleet mode"): the publisher (made at configure) and the subscription
(made at activate, gone at deactivate) of ``fleet_topic`` are reliable and transient-local with a
history of ``fleet_history_depth``, so a robot that joins late receives the last updates of every
member.  A received message is turned into a plain :class:`~cbcl_pr_ros.service.fleet.ClassUpdate`
and handed to :class:`~cbcl_pr_ros.service.fleet.FleetMember`, which decides everything; its answer
is logged in one line (refusals by the allow-list or the rate limit at most once a second, so a flood
cannot flood the log).  While active, a timer of ``fleet_digest_period`` publishes the digest that
lets a robot that missed an update ask for it again.
"""
from __future__ import annotations

from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from cbcl_pr_ros.msg import ClassUpdate as ClassUpdateMsg
from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.service.fleet import ClassUpdate, FleetMember, FleetSettings

__all__ = ["FleetLink", "fleet_qos", "make_fleet_link"]


def fleet_qos(depth: int) -> QoSProfile:
    """Reliable, transient-local, keep last ``depth``: late joiners get the recent updates."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=int(depth), reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


def make_fleet_link(node: Any, controller: Any, params: dict[str, Any]) -> "FleetLink | None":
    """The node's fleet link, or None when fleet mode is off; ValueError on bad fleet parameters."""
    settings = FleetSettings.from_params(params)
    if settings is None:
        return None
    return FleetLink(node, controller, settings, params["fleet_topic"], int(params["fleet_history_depth"]))


class FleetLink:
    """Publisher + subscription of one learner node in its fleet, around a :class:`FleetMember`."""

    def __init__(self, node: Any, controller: Any, settings: FleetSettings, topic: str, depth: int) -> None:
        self.node = node
        self.topic, self.depth = topic, depth
        self.settings = settings
        self.group = MutuallyExclusiveCallbackGroup()
        self.pub = node.create_publisher(ClassUpdateMsg, topic, fleet_qos(depth))
        self.sub: Any = None
        self.timer: Any = None
        self.member = FleetMember(controller, settings, self._publish,
                                  clock=lambda: node.get_clock().now().nanoseconds * 1e-9)
        previous = controller.on_change

        def on_change() -> None:
            if previous is not None:
                previous()
            self.member.on_change()

        controller.on_change = on_change
        node.get_logger().info(f"fleet mode: robot '{settings.robot}' in fleet '{settings.fleet}' on "
                               f"'{self.pub.topic_name}' (merging {', '.join(sorted(settings.allow)) or 'every robot'})")

    def start(self) -> None:
        """Listen to the fleet and publish every class held now."""
        if self.sub is None:
            self.sub = self.node.create_subscription(
                ClassUpdateMsg, self.topic, guard_callback(self.node, self._on_update, "class update"),
                fleet_qos(self.depth), callback_group=self.group)
        if self.timer is None and self.settings.digest_s > 0:
            self.timer = self.node.create_timer(self.settings.digest_s, guard_callback(
                self.node, self.member.tick, "fleet digest"), callback_group=self.group)
        sent = self.member.publish_all()
        self.node.get_logger().info(f"fleet: published {sent} class updates")

    def stop(self) -> None:
        """Stop listening (deactivate); classes taught meanwhile are published at the next start."""
        if self.sub is not None:
            self.node.destroy_subscription(self.sub)
            self.sub = None
        if self.timer is not None:
            self.node.destroy_timer(self.timer)
            self.timer = None

    def close(self) -> None:
        self.stop()
        if self.pub is not None:
            self.node.destroy_publisher(self.pub)
            self.pub = None

    def _publish(self, u: ClassUpdate) -> None:
        pub = self.pub
        if pub is None:
            return
        msg = ClassUpdateMsg(fleet=u.fleet, robot=u.robot, sequence=u.sequence, op=u.op, class_name=u.class_name,
                             new_name=u.new_name, contribution_ids=list(u.contribution_ids))
        msg.stamp = self.node.get_clock().now().to_msg()
        msg.class_memory = u.class_memory
        pub.publish(msg)

    def _on_update(self, msg: ClassUpdateMsg) -> None:
        update = ClassUpdate(msg.fleet, msg.robot, int(msg.sequence), int(msg.op), msg.class_name, msg.new_name,
                             tuple(msg.contribution_ids), bytes(msg.class_memory))
        res = self.member.receive(update)
        if not res.message:
            return
        if res.applied:
            self.node.get_logger().info(res.message)
        elif res.flood:
            self.node.get_logger().warning(res.message, throttle_duration_sec=1.0)
        else:
            self.node.get_logger().warning(res.message)
