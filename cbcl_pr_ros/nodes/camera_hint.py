"""What to tell a person whose node gets no camera picture: the topic it waits on, the Image topics
that exist, and the exact remap that points the node at one (launch argument and command line).

A node that only said "waiting for the camera" left the person guessing which topic it meant and
what to type; the camera driver's topics are in the ROS graph, so the hint names them. Pure text
from plain lists (no ROS), so the page, the extractor and their tests share it.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

__all__ = ["IMAGE_TYPE", "image_topics", "likely_colour_topic", "camera_hint", "other_topics_hint", "upstream_text",
           "MAX_LISTED"]

IMAGE_TYPE = "sensor_msgs/msg/Image"
MAX_LISTED = 8  # a graph with many cameras is listed in part ("+N more")
_NOT_COLOUR = ("depth", "disparity", "infra", "ir/", "confidence", "debug", "mask", "label")


def image_topics(names_and_types: Iterable[tuple[str, Sequence[str]]], *, exclude: str = "",
                 published: Callable[[str], int] | None = None) -> list[str]:
    """The sensor_msgs/Image topics of ``get_topic_names_and_types()``, sorted, without ``exclude``;
    with ``published`` (``count_publishers``) only those somebody publishes (a node's own depth
    subscription makes a topic exist too)."""
    return sorted(name for name, types in names_and_types if IMAGE_TYPE in types and name != exclude
                  and (published is None or published(name) > 0))


def likely_colour_topic(topics: Sequence[str]) -> str | None:
    """The topic most likely the colour camera (not depth, infrared, a debug picture): the first such,
    else None."""
    for name in topics:
        if not any(word in name.lower() for word in _NOT_COLOUR):
            return name
    return None


def camera_hint(waiting_on: str, topics: Sequence[str], *,
                launch_file: str = "teaching_session.launch.py with_page:=true",
                executable: str = "teaching_page_node") -> str:
    """One paragraph: which topic the node waits on, which Image topics exist, how to remap.

    ``topics`` are the Image topics with a publisher now (``waiting_on`` itself left out: a topic
    that exists but sends nothing is a different problem, named by the caller)."""
    return f"No camera picture on '{waiting_on}'. " + other_topics_hint(topics, launch_file=launch_file,
                                                                           executable=executable)


def other_topics_hint(topics: Sequence[str], *, launch_file: str = "teaching_session.launch.py",
                      executable: str = "teaching_page_node") -> str:
    """Which Image topics exist and the remap to one, in launch, one-process and node syntax."""
    if not topics:
        return ("No sensor_msgs/Image topic exists in this ROS graph: is the camera driver running, "
                "with the same ROS_DOMAIN_ID?")
    listed = ", ".join(topics[:MAX_LISTED]) + (f" (+{len(topics) - MAX_LISTED} more)"
                                                 if len(topics) > MAX_LISTED else "")
    pick = likely_colour_topic(topics)
    if pick is None:  # depth, debug pictures: name them, suggest none
        return (f"Image topics now: {listed}; none looks like a colour camera (is its driver running?). "
                f"To use one: ros2 launch cbcl_pr_ros {launch_file} camera_topic:=<topic>, "
                f"teaching_session --camera-topic <topic>, or {executable} --ros-args -r image:=<topic>.")
    return (f"Image topics now: {listed}. To use {pick}: "
            f"ros2 launch cbcl_pr_ros {launch_file} camera_topic:={pick} (with ros2 launch), "
            f"teaching_session --camera-topic {pick} (one process), or "
            f"{executable} --ros-args -r image:={pick} (the node alone).")


def upstream_text(topic: str, publishers: Sequence[Any],
                  subscriptions_of: Callable[[str, str], Sequence[tuple[str, Sequence[str]]]]) -> str:
    """Who feeds ``topic`` and from which camera, for a failure's message: the nodes publishing it
    (``publishers``: the graph's publisher infos, with ``node_name`` and ``node_namespace``) and the
    image topics each reads (``subscriptions_of(name, namespace)``: its topics and types), the camera
    a person has to check."""
    if not publishers:
        return f"nobody publishes on '{topic}': is the feature_extractor running, in this namespace?"
    parts = []
    for info in publishers[:3]:
        subs = subscriptions_of(info.node_name, info.node_namespace)
        cams = image_topics(subs) + [n for n, t in subs if "sensor_msgs/msg/CompressedImage" in t]
        cam = likely_colour_topic(cams) or (cams[0] if cams else "")
        who = f"{info.node_namespace.rstrip('/')}/{info.node_name}"
        parts.append(f"{who}, which reads the camera on '{cam}'" if cam else f"{who}, which reads no camera topic")
    return f"'{topic}' comes from {'; '.join(parts)}: is that camera publishing?"
