"""The simulated camera sends a frame's pose before the frame: the extractor looks the pose of a
frame's stamp up as soon as its depth is in, and a pose sent after the depth was often not there yet
(the table was then found without gravity and the learner tracked in the camera frame)."""
from __future__ import annotations

import threading
import types

import numpy as np


class _Recorder:
    def __init__(self, name: str, sent: list) -> None:
        self.name, self.sent = name, sent

    def publish(self, msg) -> None:
        self.sent.append((self.name, msg))

    def get_subscription_count(self) -> int:
        return 1  # someone listens: the world renders (test_idle_cost.py: nobody listens)


def _stand_in(sent: list, publish_depth: bool) -> types.SimpleNamespace:
    from builtin_interfaces.msg import Time

    from cbcl_pr_ros.robot.world import Frame

    h, w = 4, 6
    frame = Frame(rgb=np.zeros((h, w, 3), np.uint8), depth=np.full((h, w), 0.5, np.float32),
                  segmentation=np.full((h, w), -1, np.int32), K=np.eye(3), camera_position=np.zeros(3),
                  camera_quaternion=np.array([0.0, 0.0, 0.0, 1.0]), object_names=(), stamp=0.0)
    clock = types.SimpleNamespace(now=lambda: types.SimpleNamespace(to_msg=lambda: Time(sec=7, nanosec=5)))
    return types.SimpleNamespace(
        paused=False, camera_frame_id="camera", world_lock=threading.Lock(), get_clock=lambda: clock,
        world=types.SimpleNamespace(render=lambda: frame), publish_depth=publish_depth, frames_published=0,
        image_pub=_Recorder("image", sent), info_pub=_Recorder("camera_info", sent),
        depth_pub=_Recorder("depth", sent), pose_pub=_Recorder("camera_pose", sent))


def test_a_frames_pose_goes_out_before_its_image_and_depth_with_the_same_stamp():
    from cbcl_pr_ros.nodes.sim_world import SimWorldNode

    sent: list = []
    header = SimWorldNode.publish_frame(_stand_in(sent, publish_depth=True))
    assert [name for name, _ in sent] == ["camera_pose", "image", "camera_info", "depth"]
    assert all(msg.header.stamp == header.stamp for _, msg in sent)


def test_without_depth_no_pose_is_sent():
    from cbcl_pr_ros.nodes.sim_world import SimWorldNode

    sent: list = []
    SimWorldNode.publish_frame(_stand_in(sent, publish_depth=False))
    assert [name for name, _ in sent] == ["image", "camera_info"]
