"""The simulated camera sends a frame's pose before the frame: the extractor looks the pose of a
frame's stamp up as soon as its depth is in, and a pose sent after the depth was often not there yet
(the table was then found without gravity and the learner tracked in the camera frame)."""
from __future__ import annotations

import types

from world_stand_in import world_stand_in


def _stand_in(sent: list, publish_depth: bool) -> types.SimpleNamespace:
    """A world whose camera topics each have a subscriber: the world renders (test_idle_cost.py: nobody listens)."""
    return world_stand_in(sent, publish_depth)


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
