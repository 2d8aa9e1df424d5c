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

from cbcl_pr_ros.share import PACKAGE, find_share_file

__all__ = [
    "COMPRESSED_IMAGE_TYPE",
    "EVENT_TYPE",
    "IMAGE_TYPE",
    "PACKAGE",
    "find_msg_dir",
    "make_typestore",
]

IMAGE_TYPE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE_TYPE = "sensor_msgs/msg/CompressedImage"
EVENT_TYPE = f"{PACKAGE}/msg/TeachingEvent"


def find_msg_dir() -> Path:
    """Directory holding this package's ``.msg`` files.

    ``$CBCL_PR_ROS_MSG_DIR`` if set, else ``msg/`` of the installed package (ament or pip) or of the
    source tree (:func:`cbcl_pr_ros.share.find_share_file`).
    """
    override = os.environ.get("CBCL_PR_ROS_MSG_DIR")
    if override and (Path(override) / "TeachingEvent.msg").is_file():
        return Path(override)
    try:
        return find_share_file("msg", "TeachingEvent.msg").parent
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{exc} (set CBCL_PR_ROS_MSG_DIR to the package's msg/ directory)") from None


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
