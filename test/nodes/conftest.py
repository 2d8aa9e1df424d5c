"""Fixtures of the node tests: images of real photos, and the ROS helpers of ros_testing (one set
for every test directory: test/support/ros_testing.py)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ros_testing import (CONFIG, REPO, Client, Proc, domain, installed_executable, ros_env, start_node,
                         wait_until)


# ---------------------------------------------------------------------------- images
_PHOTOS = {"cat": "chelsea", "coffee": "coffee", "rocket": "rocket", "astronaut": "astronaut"}


def photo(name: str) -> np.ndarray:
    import skimage.data

    return np.ascontiguousarray(getattr(skimage.data, _PHOTOS[name])()[:, :, :3])


def views(name: str, n: int, seed: int, size: tuple[int, int] = (480, 640)) -> list[np.ndarray]:
    """n different views of a photo: random crops (60-95 % side), flips, brightness, resized to size."""
    import cv2

    rng = np.random.default_rng(seed)
    base = photo(name)
    h, w = base.shape[:2]
    out = []
    for _ in range(n):
        s = rng.uniform(0.6, 0.95)
        ch, cw = int(h * s), int(w * s)
        y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
        crop = base[y:y + ch, x:x + cw]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        crop = np.clip(crop.astype(np.float32) * rng.uniform(0.8, 1.2), 0, 255).astype(np.uint8)
        out.append(np.ascontiguousarray(cv2.resize(crop, (size[1], size[0]), interpolation=cv2.INTER_AREA)))
    return out


def image_msg(rgb: np.ndarray, stamp_ns: int = 0, frame_id: str = "camera") -> Any:
    from cbcl_pr_ros.nodes.conversions import ns_to_stamp, rgb_to_image_msg
    from std_msgs.msg import Header

    return rgb_to_image_msg(rgb, Header(stamp=ns_to_stamp(stamp_ns), frame_id=frame_id))


@pytest.fixture
def domain_id():
    """A ROS domain held by this test alone (see ros_testing.fresh_domain)."""
    with domain() as d:
        yield d


@pytest.fixture
def helpers():
    """The module's helpers as one object (tests run in importlib mode, so no sibling imports)."""
    import types

    return types.SimpleNamespace(
        start_node=start_node, Client=Client, wait_until=wait_until, views=views, photo=photo,
        image_msg=image_msg, installed_executable=installed_executable, ros_env=ros_env, Proc=Proc,
        CONFIG=CONFIG, REPO=REPO)
