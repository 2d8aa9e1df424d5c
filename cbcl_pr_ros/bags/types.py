"""Message types and topic names of the bag layer: ROS 2 Kilted's standard types plus this package's own.

The project's ``msg/*.msg`` files are parsed with rosbags' ``get_types_from_msg`` so that the type
hashes (RIHS01) and message definitions written into a bag are the same ones rosidl generates, and
a real ``ros2 bag play`` accepts the bag.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from cbcl_pr_ros.share import PACKAGE, find_share_file

__all__ = [
    "MAX_TOPIC_CHARS",
    "check_topic_name",
    "DEFAULT_EVENTS_TOPIC",
    "EVENT_TYPE_V1",
    "COMPRESSED_IMAGE_TYPE",
    "EVENT_TYPE",
    "IMAGE_TYPE",
    "PACKAGE",
    "find_msg_dir",
    "make_typestore",
    "normalize_topic",
]

IMAGE_TYPE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE_TYPE = "sensor_msgs/msg/CompressedImage"
EVENT_TYPE = f"{PACKAGE}/msg/TeachingEvent"
DEFAULT_EVENTS_TOPIC = "/teaching_events"
# TeachingEvent as bag format 1 wrote it (before format 2 added mode, track_id, rois, view_seed):
# bags recorded then carry this definition's type hash and are decoded with it.
EVENT_TYPE_V1 = """std_msgs/Header header
uint8 kind
string label
string new_label
builtin_interfaces/Time[] frame_stamps
string predicted_label
float32 confidence
bool known
bool success
"""


def normalize_topic(topic: str) -> str:
    """Fully qualified topic name as rosbag2 stores it ("camera/image" -> "/camera/image")."""
    if not isinstance(topic, str) or not topic.strip("/"):
        raise ValueError(f"invalid topic name {topic!r}")
    return "/" + topic.strip("/")


# ROS's rules for a fully qualified topic name (rmw: at most 255 - 8 characters; tokens of letters,
# digits and '_' that do not start with a digit). A bag's topics are published again by the replay.
MAX_TOPIC_CHARS = 247
_TOPIC_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_topic_name(topic: str) -> str:
    """``topic`` (fully qualified) if ROS can publish on it, else ValueError quoting at most 60
    characters of it."""
    tokens = topic[1:].split("/") if isinstance(topic, str) and topic.startswith("/") else [""]
    if len(topic) > MAX_TOPIC_CHARS or not all(_TOPIC_TOKEN.fullmatch(t) for t in tokens):
        raise ValueError(f"{str(topic)[:60]!r} is not a ROS topic name (tokens of letters, digits and '_', "
                         f"not starting with a digit, at most {MAX_TOPIC_CHARS} characters)")
    return topic


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


def make_typestore(event_format: int = 2) -> Typestore:
    """A fresh Kilted typestore with this package's messages registered; ``event_format=1`` holds
    TeachingEvent as bag format 1 defined it (to decode old bags).

    A new store per call, so that one bag's definitions never leak into the next.
    """
    store = get_typestore(Stores.ROS2_KILTED)
    types = dict(_project_types())
    if event_format == 1:
        types.update(get_types_from_msg(EVENT_TYPE_V1, EVENT_TYPE))
    elif event_format != 2:
        raise ValueError(f"unknown TeachingEvent format {event_format!r} (1 or 2)")
    store.register(types)
    return store
