"""Write teaching-session bags (rosbag2, mcap or sqlite3) without a ROS graph.

The simulated world, data-set scripts and the live recorder node all write through
:class:`TeachingBagWriter`, so every bag of this project has the same layout: camera topics of
``sensor_msgs/msg/Image`` plus a ``teaching_events`` topic of ``cbcl_pr_ros/msg/TeachingEvent``,
with rosbag2 version-9 metadata (offered QoS profiles and RIHS01 type hashes) that a real
``ros2 bag info``/``ros2 bag play`` on Kilted accepts.
"""
from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import numpy as np
from rosbags.interfaces import (
    Connection,
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import StoragePlugin, Writer, WriterError

from ..stamps import split_ns
from .records import FORMAT_VERSION, EventKind, TeachingEventRecord
from .types import DEFAULT_EVENTS_TOPIC, EVENT_TYPE, IMAGE_TYPE, check_topic_name, make_typestore, normalize_topic

__all__ = [
    "DEFAULT_EVENTS_TOPIC",
    "FORMAT_KEY",
    "ROSBAG2_VERSION",
    "STORAGES",
    "TeachingBagWriter",
    "default_qos",
    "normalize_topic",
]

ROSBAG2_VERSION = 9  # the metadata version Jazzy and Kilted write
STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
FORMAT_KEY = "cbcl_pr_ros.format"  # custom_data key of the bag format (records.FORMAT_VERSION)
# rosbag2 writes "infinite" durations as the largest rmw_time_t it can express.
_INFINITE = QosTime(9223372036, 854775807)
_LOG = logging.getLogger(__name__)


def default_qos(reliable: bool = True, depth: int = 10) -> Qos:
    """The QoS profile recorded as offered for a topic (what an rclpy default publisher offers)."""
    return Qos(
        QosHistory.KEEP_LAST,
        int(depth),
        QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
        QosDurability.VOLATILE,
        _INFINITE,
        _INFINITE,
        QosLiveliness.AUTOMATIC,
        _INFINITE,
        False,
    )


class TeachingBagWriter:
    """Create a new rosbag2 bag of camera frames and teaching events.

    Parameters
    ----------
    path : directory of the new bag; it must not exist.
    storage : ``"mcap"`` (default, like ``ros2 bag record`` on Kilted) or ``"sqlite3"``.
    custom_data : strings stored in metadata.yaml's ``custom_data`` (e.g. how the session was made).

    Use as a context manager; on an exception the half-written bag directory is removed, so no
    partial bag is left looking complete.

    >>> import tempfile, numpy as np
    >>> d = tempfile.mkdtemp()
    >>> with TeachingBagWriter(f"{d}/bag") as w:
    ...     s = w.write_image("/camera/image_raw", np.zeros((4, 4, 3), np.uint8), 10**9)
    ...     w.write_event(TeachingEventRecord(10**9, EventKind.TEACH, "mug", frame_stamps_ns=[s]))
    """

    def __init__(
        self,
        path: str | Path,
        storage: str = "mcap",
        *,
        custom_data: dict[str, str] | None = None,
    ) -> None:
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {sorted(STORAGES)}, got {storage!r}")
        self.path = Path(path)
        if self.path.exists():
            raise FileExistsError(f"{self.path} exists already; a bag is never overwritten")
        self.storage = storage
        self.typestore = make_typestore()
        self._writer = Writer(self.path, version=ROSBAG2_VERSION, storage_plugin=STORAGES[storage])
        for key, value in (custom_data or {}).items():
            self._writer.set_custom_data(str(key), str(value))
        self._writer.set_custom_data(FORMAT_KEY, str(FORMAT_VERSION))
        self._connections: dict[str, Connection] = {}
        self._open = False
        self.counts: dict[str, int] = {}

    # -- life cycle ---------------------------------------------------------------------------
    def open(self) -> TeachingBagWriter:
        self._writer.open()
        self._open = True
        return self

    def close(self) -> None:
        """Finish the bag: storage index/summary and metadata.yaml are written."""
        if self._open:
            self._open = False
            self._writer.close()

    def abort(self) -> None:
        """Drop the bag being written (its directory is removed)."""
        if self._open:
            self._open = False
            try:
                self._writer.abort()
            finally:
                shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> TeachingBagWriter:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # -- topics --------------------------------------------------------------------------------
    def add_topic(self, topic: str, msgtype: str, qos: Sequence[Qos] | None = None) -> Connection:
        """Declare a topic (done implicitly by the write methods); returns its connection."""
        if not self._open:
            raise RuntimeError(f"bag {self.path} is not open (use it as a context manager)")
        topic = check_topic_name(normalize_topic(topic))  # the replay publishes it again
        conn = self._connections.get(topic)
        if conn is not None:
            if conn.msgtype != msgtype:
                raise ValueError(
                    f"topic {topic} already holds {conn.msgtype}, cannot also write {msgtype}"
                )
            return conn
        if msgtype not in self.typestore.fielddefs:
            raise ValueError(f"unknown message type {msgtype!r} for topic {topic}")
        conn = self._writer.add_connection(
            topic,
            msgtype,
            typestore=self.typestore,
            offered_qos_profiles=list(qos) if qos is not None else [default_qos()],
        )
        self._connections[topic] = conn
        self.counts[topic] = 0
        return conn

    def write_raw(self, topic: str, msgtype: str, data: bytes | memoryview, log_time_ns: int) -> None:
        """Write an already serialized (CDR) message as-is: the live recorder's path."""
        conn = self.add_topic(topic, msgtype)
        if int(log_time_ns) < 0:
            raise ValueError(f"log_time_ns must be >= 0, got {log_time_ns}")
        try:
            self._writer.write(conn, int(log_time_ns), data)
        except WriterError as exc:
            raise OSError(f"cannot write to bag {self.path}: {exc}") from exc
        self.counts[conn.topic] += 1

    def write_image(
        self,
        topic: str,
        rgb: np.ndarray,
        stamp_ns: int,
        frame_id: str = "camera",
        *,
        log_time_ns: int | None = None,
        encoding: str = "rgb8",
    ) -> int:
        """Write an (h, w, 3) uint8 RGB frame (or (h, w) mono8) as ``sensor_msgs/msg/Image``.

        Returns the header stamp, which teaching events use to refer to this frame.
        """
        arr = np.asarray(rgb)
        if arr.dtype != np.uint8:
            raise TypeError(f"image must be uint8, got {arr.dtype}")
        if arr.ndim == 3 and arr.shape[2] == 3 and encoding in ("rgb8", "bgr8"):
            channels = 3
        elif arr.ndim == 2 and encoding == "mono8":
            channels = 1
        else:
            raise ValueError(
                f"image of shape {arr.shape} does not fit encoding {encoding!r} "
                "(rgb8/bgr8 need (h, w, 3), mono8 needs (h, w))"
            )
        height, width = arr.shape[:2]
        sec, nsec = split_ns(stamp_ns)
        ts = self.typestore.types
        msg = ts[IMAGE_TYPE](
            header=ts["std_msgs/msg/Header"](
                stamp=ts["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id=frame_id
            ),
            height=height,
            width=width,
            encoding=encoding,
            is_bigendian=0,
            step=width * channels,
            data=np.ascontiguousarray(arr).reshape(-1),
        )
        data = self.typestore.serialize_cdr(msg, IMAGE_TYPE)
        self.write_raw(topic, IMAGE_TYPE, data, stamp_ns if log_time_ns is None else log_time_ns)
        return int(stamp_ns)

    def write_event(
        self,
        event: TeachingEventRecord,
        topic: str = DEFAULT_EVENTS_TOPIC,
        *,
        log_time_ns: int | None = None,
    ) -> None:
        """Write one teaching event (``cbcl_pr_ros/msg/TeachingEvent``)."""
        if not isinstance(event, TeachingEventRecord):
            raise TypeError(f"expected a TeachingEventRecord, got {type(event).__name__}")
        ts = self.typestore.types
        time_t = ts["builtin_interfaces/msg/Time"]
        sec, nsec = split_ns(event.stamp_ns)
        msg = ts[EVENT_TYPE](
            header=ts["std_msgs/msg/Header"](
                stamp=time_t(sec=sec, nanosec=nsec), frame_id=event.frame_id
            ),
            kind=int(EventKind(event.kind)),
            label=event.label,
            new_label=event.new_label,
            frame_stamps=[time_t(*split_ns(s)) for s in event.frame_stamps_ns],
            predicted_label=event.predicted_label,
            confidence=float(event.confidence),
            known=bool(event.known),
            success=bool(event.success),
            mode=int(event.mode),
            track_id=int(event.track_id),
            rois=[ts["sensor_msgs/msg/RegionOfInterest"](x_offset=x, y_offset=y, width=w, height=h, do_rectify=False)
                  for x, y, w, h in event.rois],
            view_seed=int(event.view_seed),
        )
        data = self.typestore.serialize_cdr(msg, EVENT_TYPE)
        self.write_raw(topic, EVENT_TYPE, data, event.stamp_ns if log_time_ns is None else log_time_ns)

    def set_session_info(self, info: dict) -> None:
        """Store a JSON description of the session (world, seed, classes) in custom_data."""
        self._writer.set_custom_data("cbcl_pr_ros.session", json.dumps(info, sort_keys=True))
