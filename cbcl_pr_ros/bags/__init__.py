"""bags layer of cbcl_pr_ros: teaching sessions as rosbag2 data, without ROS.

Writing (:class:`TeachingBagWriter`), reading and checking (:func:`read_session`,
:func:`iter_raw`, :func:`bag_info`), and offline evaluation (:mod:`.offline_eval`) use the
pure-Python ``rosbags`` library; the rclpy recorder and replay nodes live in ``cbcl_pr_ros.nodes``.
The offline evaluation runs the learner's service layer (core, scipy, scikit-learn): it loads on
first use, so that recording and replaying stay light.
"""
from typing import Any

from .errors import BagFormatError
from .reader import BagSummary, RawMessage, TeachingSession, bag_info, check_bag, iter_raw, read_raw, read_session
from .records import BagImage, EventKind, TeachingEventRecord
from .types import EVENT_TYPE, IMAGE_TYPE, find_msg_dir, make_typestore
from .writer import DEFAULT_EVENTS_TOPIC, STORAGES, TeachingBagWriter, default_qos, normalize_topic

__all__ = [
    "DEFAULT_EVENTS_TOPIC",
    "EVENT_TYPE",
    "IMAGE_TYPE",
    "STORAGES",
    "BagFormatError",
    "BagImage",
    "BagSummary",
    "EventKind",
    "RawMessage",
    "TeachingBagWriter",
    "TeachingEventRecord",
    "TeachingSession",
    "bag_info",
    "bag_to_class_features",
    "bag_to_class_images",
    "evaluate_bag",
    "check_bag",
    "default_qos",
    "find_msg_dir",
    "iter_raw",
    "make_typestore",
    "normalize_topic",
    "read_raw",
    "read_session",
]
_OFFLINE = ("bag_to_class_features", "bag_to_class_images", "evaluate_bag")


def __getattr__(name: str) -> Any:
    if name in _OFFLINE:  # local: the learner's service layer loads only for an offline evaluation
        from . import offline_eval

        return getattr(offline_eval, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
