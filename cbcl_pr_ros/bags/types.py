"""Message types known to the bag layer: ROS 2 Kilted's standard types plus this package's own.

The project's ``msg/*.msg`` files are parsed with rosbags' ``get_types_from_msg`` so that the type
hashes (RIHS01) and message definitions written into a bag are the same ones rosidl generates, and
a real ``ros2 bag play`` accepts the bag.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

__all__ = [
    "COMPRESSED_IMAGE_TYPE",
    "EVENT_TYPE",
    "IMAGE_TYPE",
    "PACKAGE",
    "find_msg_dir",
    "make_typestore",
]

PACKAGE = "cbcl_pr_ros"
IMAGE_TYPE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE_TYPE = "sensor_msgs/msg/CompressedImage"
EVENT_TYPE = f"{PACKAGE}/msg/TeachingEvent"


def find_msg_dir() -> Path:
    """Directory holding this package's ``.msg`` files.

    Looked up in this order: ``$CBCL_PR_ROS_MSG_DIR``; the source tree beside the Python package
    (works for a checkout and for colcon's ``--symlink-install``); ``share/cbcl_pr_ros/msg`` under
    every prefix of ``$AMENT_PREFIX_PATH`` (a normal colcon or apt install).
    """
    candidates: list[Path] = []
    if os.environ.get("CBCL_PR_ROS_MSG_DIR"):
        candidates.append(Path(os.environ["CBCL_PR_ROS_MSG_DIR"]))
    candidates.append(Path(__file__).resolve().parents[2] / "msg")
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            candidates.append(Path(prefix) / "share" / PACKAGE / "msg")
    for cand in candidates:
        if (cand / "TeachingEvent.msg").is_file():
            return cand
    raise FileNotFoundError(
        "cannot find cbcl_pr_ros/msg/TeachingEvent.msg; looked in "
        + ", ".join(str(c) for c in candidates)
        + " (set CBCL_PR_ROS_MSG_DIR to the package's msg/ directory)"
    )


@functools.lru_cache(maxsize=1)
def _project_types() -> dict:
    types: dict = {}
    for path in sorted(find_msg_dir().glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(encoding="utf8"), f"{PACKAGE}/msg/{path.stem}"))
    return types


def make_typestore() -> Typestore:
    """A fresh Kilted typestore with this package's messages registered.

    A new store per call: readers register types found in a bag's own definitions, and that must
    not leak from one bag to the next.
    """
    store = get_typestore(Stores.ROS2_KILTED)
    store.register(_project_types())
    return store
