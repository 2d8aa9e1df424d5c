"""The learner's camera pose input: a ``camera_pose`` subscription feeding a ROS-free pose history.

Each geometry_msgs/PoseStamped becomes plain numbers in a
:class:`~cbcl_pr_ros.perception.camera_pose.CameraPoses` (bounded, refuses non-finite poses, jumps
and a second publisher's poses, named by the publisher's id from the message info); the arm node
feeds its own history through :func:`add_pose_msg` too, so both follow one rule. The object
callback asks for the pose of its frame's stamp and hands it to the tracker, so tracks live in the
pose's fixed frame. Without a pose for a stamp the frame is tracked
in the camera frame, as without this input, and a throttled warning says why. The first frames of a
start often come before the first pose: nothing is said about them until the poses are really
missing (:class:`~cbcl_pr_ros.runtime.input_grace.InputGrace`: a few frames and seconds without one).

The poses and the objects share one single-threaded executor, which takes one message per
subscription per round, objects first: under load the pose of a frame's stamp was often still
waiting in the subscription when its objects were tracked (and every id of such a frame was
lost). So before saying "no pose", :meth:`pose_for` takes the poses already delivered.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from geometry_msgs.msg import PoseStamped
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.exceptions import InvalidHandle

from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.perception.camera_pose import CameraPose, CameraPoses
from cbcl_pr_ros.runtime.input_grace import InputGrace
from cbcl_pr_ros.stamps import stamp_to_ns

__all__ = ["CameraPoseInput", "add_pose_msg", "pose_source"]


def pose_source(info: Any) -> str:
    """The publisher's id from a message info (hex), or "" when the transport did not say."""
    try:
        gid = info["publisher_gid"]
        data = gid["data"] if isinstance(gid, dict) else gid
        return bytes(data).hex()[:64] if data is not None else ""
    except (KeyError, TypeError, ValueError):
        return ""


def add_pose_msg(history: CameraPoses, msg: PoseStamped, info: Any = None) -> str:
    """Offer one PoseStamped to ``history``; "" when kept, else why it was refused."""
    p, q = msg.pose.position, msg.pose.orientation
    return history.add(stamp_to_ns(msg.header.stamp), (p.x, p.y, p.z), (q.x, q.y, q.z, q.w),
                       msg.header.frame_id, pose_source(info))


class CameraPoseInput:
    """Camera poses of ``topic`` ("" = off); the node subscribes it on activate and releases it on
    deactivate (handed to those two calls, never kept)."""

    depth = 20  # poses queued per subscription; at most twice this many are taken at once by pose_for

    def __init__(self, topic: str, logger: Any, history: CameraPoses | None = None, *,
                 without: str = "its objects are tracked in the camera's own frame (positions relative to the "
                                "camera, ids may change while it moves)",
                 note_once: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.topic, self.logger = str(topic), logger
        self.without = without  # what the node does for a frame without a pose (said in the warnings)
        self.grace = InputGrace(clock=clock)  # the first frames may come before the first pose
        self.history = history or CameraPoses()
        self.sub: Any = None
        # "no pose at all" is said once (for a fixed camera it is the normal case), by one node of a session
        self.said_no_pose = not note_once
        self.callback_group = MutuallyExclusiveCallbackGroup()  # poses keep coming while a frame is classified

    def subscribe(self, node: Any) -> None:
        if self.topic and self.sub is None:
            self.sub = node.create_subscription(
                PoseStamped, self.topic, guard_callback(node, self._on_pose_with_info, "camera pose"),
                self.depth, callback_group=self.callback_group)

    def release(self, node: Any) -> None:
        """Let the topic go and forget the poses (a later activate starts afresh)."""
        if self.sub is not None:
            node.destroy_subscription(self.sub)
            self.sub = None
        self.history.clear()
        self.grace.reset()

    def _on_pose_with_info(self, msg: PoseStamped, info: Any) -> None:  # two arguments: rclpy passes the info
        self._on_pose(msg, info)

    def _on_pose(self, msg: PoseStamped, info: Any = None) -> None:
        refused = add_pose_msg(self.history, msg, info)
        if refused:
            self.logger.warning(f"{refused}; frames of that instant: {self.without}",
                                           throttle_duration_sec=10.0)

    def take_waiting(self) -> int:
        """Take the poses delivered to the subscription but not yet to its callback; how many."""
        sub, taken = self.sub, 0
        if sub is None:
            return 0
        try:
            with sub.handle:
                while taken < 2 * self.depth:
                    got = sub.handle.take_message(sub.msg_type, sub.raw)
                    if got is None:
                        break
                    taken += 1
                    self._on_pose(got[0], got[1] if len(got) > 1 else None)
        except InvalidHandle:  # released meanwhile
            pass
        return taken

    def pose_for(self, stamp: Any) -> CameraPose | None:
        """The camera pose at an image stamp, or None (off, or none for that stamp: warned, throttled, once
        the poses are missing rather than not here yet)."""
        if not self.topic:
            return None
        pose = self.history.pose_at(stamp_to_ns(stamp))
        if pose is None and self.take_waiting():
            pose = self.history.pose_at(stamp_to_ns(stamp))
        if pose is not None:
            self.grace.arrived()
            return pose
        if not self.grace.missing():
            return None  # start-up: the first frames often beat the first pose
        if self.history.received:
            gap = self.history.max_gap_ns / 1e9
            self.logger.warning(
                f"no camera pose on '{self.topic}' for a frame's time stamp: {self.without}. Poses arrive "
                f"there, but none fits this frame's stamp (before the first pose, after the last one, or in a "
                f"gap of more than {gap:g} s): publish the camera's pose on '{self.topic}' at least every "
                f"{gap:g} s, stamped with the same clock as the images.",
                throttle_duration_sec=10.0)
        elif not self.said_no_pose:
            self.said_no_pose = True
            self.logger.info(
                f"no camera pose on '{self.topic}' (yet): objects are tracked in the camera's own frame. "
                "For a camera that stays fixed this is right and nothing is lost; for a camera that moves "
                "(on an arm), publish its pose there. -p \"camera_pose_topic:=''\" (quoted; "
                "camera_pose_topic: \"\" in YAML) silences this line (said once).")
        return pose
