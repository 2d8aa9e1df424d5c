"""A stand-in for the simulated world's node as ``SimWorldNode.publish_frame`` reads it: camera
publishers that record what they send (with or without a subscriber) and a world that renders one
small blank frame, so the tests of the frame's order and of frames rendered for nobody share one."""
from __future__ import annotations

import threading
import types
from typing import Callable

import numpy as np


class Recorder:
    """A camera publisher: records ``(name, msg)`` in ``sent``; ``listeners`` subscribers."""

    def __init__(self, name: str, sent: list, listeners: int = 1) -> None:
        self.name, self.sent, self.listeners = name, sent, listeners

    def publish(self, msg) -> None:
        self.sent.append((self.name, msg))

    def get_subscription_count(self) -> int:
        return self.listeners


def blank_frame():
    """A 6x4 frame of the simulated camera: black, the table 0.5 m away, no objects."""
    from cbcl_pr_ros.robot.world import Frame

    h, w = 4, 6
    return Frame(rgb=np.zeros((h, w, 3), np.uint8), depth=np.full((h, w), 0.5, np.float32),
                 segmentation=np.full((h, w), -1, np.int32), K=np.eye(3), camera_position=np.zeros(3),
                 camera_quaternion=np.array([0.0, 0.0, 0.0, 1.0]), object_names=(), stamp=0.0)


def world_stand_in(sent: list, publish_depth: bool = True, listeners: int = 1,
                   render: Callable[[], object] | None = None) -> types.SimpleNamespace:
    """The state ``publish_frame`` reads: the four camera publishers (each with ``listeners``
    subscribers), a clock at 7.000000005 s and a world whose ``render`` is given or :func:`blank_frame`."""
    from builtin_interfaces.msg import Time

    frame = None if render is not None else blank_frame()
    clock = types.SimpleNamespace(now=lambda: types.SimpleNamespace(to_msg=lambda: Time(sec=7, nanosec=5)))
    return types.SimpleNamespace(
        paused=False, camera_frame_id="camera", world_lock=threading.Lock(), get_clock=lambda: clock,
        world=types.SimpleNamespace(render=render or (lambda: frame)), publish_depth=publish_depth,
        frames_published=0,
        **{attr: Recorder(name, sent, listeners) for attr, name in (
            ("image_pub", "image"), ("info_pub", "camera_info"), ("depth_pub", "depth"), ("pose_pub", "camera_pose"))})
