"""``record_session``: record camera topics and teaching events into a rosbag2 bag (no ros2 bag).

Subscriptions are ``raw=True``: the serialized CDR bytes are written to the bag as received, so
nothing is decoded or re-encoded on the way. A message that cannot be written (a full disk, a closed
bag) is dropped with one throttled log line (:mod:`.guard`); the recorder goes on. The log time of a message is its reception time (as
with ``ros2 bag record``). Types are taken from the ROS graph (the publishers' advertised type),
or ``sensor_msgs/msg/Image`` for a camera topic nobody publishes yet; ``teaching_events`` is
``cbcl_pr_ros/msg/TeachingEvent``. Ctrl-C (or ``--duration``) closes the bag cleanly.

Teaching events: the learner node does not publish them; the replay tool publishes the live
answers as TeachingEvents, and any teacher script may publish them on ``teaching_events``.
"""
from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from cbcl_pr_ros.bags.config import load_bag_defaults
from cbcl_pr_ros.bags.errors import BagFormatError
from cbcl_pr_ros.bags.types import COMPRESSED_IMAGE_TYPE, EVENT_TYPE, IMAGE_TYPE
from cbcl_pr_ros.bags.writer import STORAGES, TeachingBagWriter, default_qos, normalize_topic
from cbcl_pr_ros.nodes.guard import guard_callback
from cbcl_pr_ros.nodes.replay import message_class
from cbcl_pr_ros.nodes.spin import own_args, spin_until

__all__ = ["RecorderNode", "main"]
_LOG = logging.getLogger(__name__)


class RecorderNode(Node):
    """Writes every message of ``topics`` (topic -> msgtype) to ``writer`` as received."""

    def __init__(self, writer: TeachingBagWriter, topics: dict[str, str], *, reliable: bool = False,
                 depth: int = 100, node_name: str = "bag_recorder", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.writer = writer
        self.counts = {normalize_topic(t): 0 for t in topics}
        self._lock = threading.Lock()
        self._subs = []
        for topic, msgtype in topics.items():
            topic = normalize_topic(topic)
            # Events are few and must not be lost; camera frames follow the chosen reliability
            # (best effort matches every publisher, as a recorder should).
            rel = reliable or msgtype == EVENT_TYPE
            qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                             reliability=ReliabilityPolicy.RELIABLE if rel else ReliabilityPolicy.BEST_EFFORT,
                             durability=DurabilityPolicy.VOLATILE)
            writer.add_topic(topic, msgtype, [default_qos(reliable=True, depth=10 if not rel else depth)])
            self._subs.append(self.create_subscription(
                message_class(msgtype, writer.path, topic), topic,
                guard_callback(self, lambda data, t=topic, mt=msgtype: self._on_message(t, mt, data),
                               f"recording {topic}"), qos, raw=True))
        self.get_logger().info(f"recording {', '.join(f'{t} [{m}]' for t, m in topics.items())} "
                               f"to {writer.path} ({writer.storage})")

    def _on_message(self, topic: str, msgtype: str, data: bytes) -> None:
        with self._lock:
            self.writer.write_raw(topic, msgtype, data, self.get_clock().now().nanoseconds)
            self.counts[topic] += 1


def resolve_types(node: Node, topics: list[str], events_topic: str, wait_s: float) -> dict[str, str]:
    """Each topic's type from the graph (waiting up to ``wait_s``); Image for silent camera topics."""
    out: dict[str, str] = {}
    end = time.monotonic() + wait_s
    while True:
        graph = {name: types for name, types in node.get_topic_names_and_types()}
        for t in topics:
            if t in graph and graph[t]:
                # another node may advertise a second type on the camera's topic: a camera type wins,
                # else the camera topic would be recorded as a type no evaluation can read
                out[t] = next((m for m in graph[t] if m in (IMAGE_TYPE, COMPRESSED_IMAGE_TYPE)), graph[t][0])
        if len(out) == len(topics) or time.monotonic() >= end:
            break
        time.sleep(0.1)
    for t in topics:
        out.setdefault(t, IMAGE_TYPE)
    out[events_topic] = EVENT_TYPE
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--bag-config", default=None)
    d = load_bag_defaults("record", pre.parse_known_args(argv)[0].bag_config)
    ap = argparse.ArgumentParser(prog="record_session", description=__doc__.split("\n\n")[0])
    ap.add_argument("output", help="new bag directory")
    ap.add_argument("--bag-config", default=None, help="defaults file (default: config/bags.yaml)")
    ap.add_argument("--topics", nargs="+", default=list(d.get("topics", ["/camera/image_raw"])),
                    help="camera topics")
    ap.add_argument("--events-topic", default=d.get("events_topic", "/teaching_events"))
    ap.add_argument("--storage", choices=sorted(STORAGES), default=d.get("storage", "mcap"))
    ap.add_argument("--reliable", action="store_true", default=bool(d.get("reliable", False)),
                    help="subscribe to camera topics as RELIABLE")
    ap.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0 = Ctrl-C)")
    ap.add_argument("--type-wait", type=float, default=float(d.get("type_wait_s", 2.0)),
                    help="seconds to wait for the topics' publishers to learn their types")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv if argv is None else argv)
    try:
        opts = parse_args(own_args(argv, "record_session")[1:])
    except ValueError as exc:  # the defaults file (--bag-config): unreadable, or a value of the wrong type
        print(f"record_session: {exc}", file=sys.stderr)
        return 2
    try:
        topics = [normalize_topic(t) for t in opts.topics]
        events_topic = normalize_topic(opts.events_topic)
        writer = TeachingBagWriter(opts.output, opts.storage,
                                   custom_data={"cbcl_pr_ros.generator": "record_session"})
    except (ValueError, FileExistsError) as exc:
        print(f"record_session: {exc}", file=sys.stderr)
        return 2
    node = None
    try:
        with rclpy.init(args=argv), writer:
            probe = Node("bag_recorder_probe")
            types = resolve_types(probe, topics, events_topic, opts.type_wait)
            probe.destroy_node()
            node = RecorderNode(writer, types, reliable=opts.reliable)
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            stop = threading.Event()  # set after --duration (0 = until Ctrl-C or shutdown)
            timer = threading.Timer(opts.duration, stop.set) if opts.duration > 0 else None
            if timer is not None:
                timer.daemon = True
                timer.start()
            try:
                spin_until(executor, stop)
            except (KeyboardInterrupt, ExternalShutdownException):
                pass
            finally:
                if timer is not None:
                    timer.cancel()
                executor.shutdown()
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except BagFormatError as exc:  # a topic's type (as the graph names it) is not installed here
        print(f"record_session: {exc}; nothing recorded", file=sys.stderr)
        return 2
    if node is not None:
        print(f"record_session: wrote {opts.output}: "
              + ", ".join(f"{t} {n}" for t, n in node.counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
