"""Read teaching-session bags back, checking them on the way.

Everything wrong with a bag (missing, not a bag, truncated, corrupt messages, topics or types
that are not there) becomes a :class:`BagFormatError` naming the bag and the topic. Truncation is
detected by comparing the messages actually read with the counts in metadata.yaml, so a bag cut
short is never mistaken for a shorter session.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from rosbags.interfaces import Connection
from rosbags.rosbag2 import Reader, ReaderError

from ..stamps import stamp_to_ns
from .errors import BagFormatError
from .mcap_chunks import check_mcap_chunks
from .records import FORMAT_VERSION, MODE_FRAME, BagImage, TeachingEventRecord
from .types import DEFAULT_EVENTS_TOPIC, EVENT_TYPE, IMAGE_TYPE, make_typestore, normalize_topic
from cbcl_pr_ros.plurals import counted, noun

__all__ = [
    "BagSummary",
    "RawMessage",
    "TeachingSession",
    "TopicSummary",
    "bag_info",
    "check_bag",
    "iter_raw",
    "read_raw",
    "read_session",
]
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicSummary:
    msgtype: str
    count: int
    type_hash: str


@dataclass(frozen=True)
class BagSummary:
    """What metadata.yaml says about a bag."""

    path: Path
    storage: str
    version: int
    start_ns: int
    duration_ns: int
    message_count: int
    topics: dict[str, TopicSummary]
    custom_data: dict[str, str]
    ros_distro: str | None


@dataclass(frozen=True)
class RawMessage:
    """One serialized message as stored (CDR bytes), for replay."""

    topic: str
    msgtype: str
    log_time_ns: int
    data: bytes


@dataclass
class TeachingSession:
    """A bag's teaching events and the camera frames they refer to (keyed by header stamp)."""

    path: Path
    camera_topic: str
    events_topic: str
    events: list[TeachingEventRecord]
    frames: dict[int, BagImage] = field(repr=False)
    info: BagSummary = field(repr=False)
    format_version: int = FORMAT_VERSION  # of the events (1: before mode/track/rois/view_seed)
    event_log_times_ns: tuple[int, ...] = ()  # when each event was logged, in order
    raw_frames: dict[int, bytes] = field(default_factory=dict, repr=False)  # CDR of used frames (kept on request)
    raw: list[RawMessage] = field(default_factory=list, repr=False)  # messages of the kept topics, log-time order

    def frame(self, stamp_ns: int) -> BagImage:
        try:
            return self.frames[int(stamp_ns)]
        except KeyError:
            raise BagFormatError(
                self.path,
                f"a teaching event refers to a frame stamped {stamp_ns} ns that is not in the bag",
                self.camera_topic,
            ) from None

    def frames_of(self, event: TeachingEventRecord) -> list[BagImage]:
        return [self.frame(s) for s in event.frame_stamps_ns]


def _open(path: str | Path) -> Reader:
    path = Path(path)
    if not path.exists():
        raise BagFormatError(path, "no such bag (directory with metadata.yaml expected)")
    if path.is_file():
        raise BagFormatError(path, "expected the bag directory (holding metadata.yaml), got a file")
    _check_chunks(path)
    try:
        reader = Reader(path)
        reader.open()
    except (ReaderError, FileNotFoundError, OSError, KeyError, ValueError, TypeError) as exc:
        raise BagFormatError(path, f"not a readable rosbag2 bag (missing, truncated or corrupt file): {exc}") from None
    except Exception as exc:  # storage plugins raise their own low-level errors
        raise BagFormatError(path, f"not a readable rosbag2 bag (truncated or corrupt file; {type(exc).__name__}: {exc})") from None
    return reader


#: files of a bag folder looked at for MCAP chunks (a bag has one per split)
MAX_BAG_FILES = 4096


def _check_chunks(path: Path) -> None:
    """Every MCAP file of the bag folder with its chunks bounded (:mod:`.mcap_chunks`), before rosbags
    decompresses any; BagFormatError naming the file otherwise."""
    try:
        files = sorted(p for p in path.iterdir() if p.suffix == ".mcap" and p.is_file())
    except OSError as exc:
        raise BagFormatError(path, f"cannot list the bag folder ({type(exc).__name__})") from None
    if len(files) > MAX_BAG_FILES:
        raise BagFormatError(path, f"{len(files)} MCAP files in the bag folder; at most {MAX_BAG_FILES} are read")
    for file in files:
        try:
            check_mcap_chunks(file)
        except (OSError, ValueError) as exc:
            raise BagFormatError(path, f"{file.name}: {exc}") from None


def _summary(path: Path, reader: Reader) -> BagSummary:
    topics: dict[str, TopicSummary] = {}
    for conn in reader.connections:
        prev = topics.get(conn.topic)
        count = conn.msgcount + (prev.count if prev else 0)
        topics[conn.topic] = TopicSummary(conn.msgtype, count, conn.digest)
    try:
        meta = yaml.safe_load((path / "metadata.yaml").read_text(encoding="utf8"))
        meta = meta["rosbag2_bagfile_information"]
        custom = meta.get("custom_data") or {}
        if not isinstance(custom, dict):  # the writer stores strings under string keys
            raise TypeError(f"custom_data must be a mapping, got {type(custom).__name__}")
        return BagSummary(
            path=path,
            storage=str(meta.get("storage_identifier", "")),
            version=int(meta.get("version", 0)),
            start_ns=int(meta.get("starting_time", {}).get("nanoseconds_since_epoch", 0)),
            duration_ns=int(meta.get("duration", {}).get("nanoseconds", 0)),
            message_count=reader.message_count,
            topics=topics,
            custom_data={str(k): str(v) for k, v in custom.items()},
            ros_distro=reader.ros_distro,
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise BagFormatError(path, f"unreadable metadata.yaml ({str(exc)[:200]})") from None


def bag_info(path: str | Path) -> BagSummary:
    """Metadata of a bag (topics, types, counts, duration) without reading its messages."""
    reader = _open(path)
    try:
        return _summary(Path(path), reader)
    finally:
        reader.close()


def _read(
    path: Path, reader: Reader, conns: list[Connection]
) -> Iterator[tuple[Connection, int, bytes]]:
    """Messages of ``conns`` in log-time order; raises BagFormatError when the storage fails or
    holds fewer messages than metadata.yaml announces (a truncated bag)."""
    seen = {c.id: 0 for c in conns}
    current: Connection | None = None
    try:
        for conn, log_time, data in reader.messages(connections=conns):
            current = conn
            seen[conn.id] += 1
            yield conn, log_time, bytes(data)
    except BagFormatError:
        raise
    except Exception as exc:
        topic = current.topic if current is not None else None
        raise BagFormatError(
            path, f"storage error after {sum(seen.values())} messages ({type(exc).__name__}: {exc}); "
            "the bag is truncated or corrupt", topic
        ) from None
    for conn in conns:
        if seen[conn.id] != conn.msgcount:
            raise BagFormatError(
                path,
                f"metadata announces {conn.msgcount} messages but {seen[conn.id]} could be read; "
                "the bag is truncated or corrupt",
                conn.topic,
            )


def check_bag(path: str | Path, topics: Iterable[str] | None = None) -> BagSummary:
    """Read every message of ``topics`` (all by default) once, so a truncated bag is refused
    before anything is replayed from it."""
    reader = _open(path)
    try:
        conns = _select(Path(path), reader, topics)
        for _ in _read(Path(path), reader, conns):
            pass
        return _summary(Path(path), reader)
    finally:
        reader.close()


def _select(path: Path, reader: Reader, topics: Iterable[str] | None) -> list[Connection]:
    if topics is None:
        return list(reader.connections)
    wanted = [normalize_topic(t) for t in topics]
    have = {c.topic for c in reader.connections}
    for topic in wanted:
        if topic not in have:
            raise BagFormatError(path, f"topic not in bag (it has: {', '.join(sorted(have)) or 'none'})", topic)
    return [c for c in reader.connections if c.topic in wanted]


def read_raw(path: str | Path) -> tuple[BagSummary, list[RawMessage]]:
    """What metadata.yaml says and every message of the bag (checked: a truncated bag is refused),
    the bag opened once."""
    reader = _open(path)
    try:
        info = _summary(Path(path), reader)
        raw = [RawMessage(c.topic, c.msgtype, t, d) for c, t, d in _read(Path(path), reader, list(reader.connections))]
        return info, raw
    finally:
        reader.close()


def iter_raw(path: str | Path, topics: Iterable[str] | None = None) -> Iterator[RawMessage]:
    """Serialized messages in log-time order (what replay publishes)."""
    reader = _open(path)
    try:
        conns = _select(Path(path), reader, topics)
        for conn, log_time, data in _read(Path(path), reader, conns):
            yield RawMessage(conn.topic, conn.msgtype, log_time, data)
    finally:
        reader.close()


def _deserialize(path: Path, store, conn: Connection, data: bytes):
    try:
        return store.deserialize_cdr(data, conn.msgtype)
    except Exception as exc:
        raise BagFormatError(
            path, f"cannot decode a {conn.msgtype} message ({type(exc).__name__}: {exc})", conn.topic
        ) from None


def _check_type(path: Path, store, conn: Connection, expected: str) -> None:
    if conn.msgtype != expected:
        raise BagFormatError(path, f"holds {conn.msgtype!r}, expected {expected!r}", conn.topic)
    want = store.hash_rihs01(expected)
    if conn.digest and conn.digest != want:
        raise BagFormatError(
            path,
            f"{expected} was recorded with another definition (type hash {conn.digest}, "
            f"this package's is {want})",
            conn.topic,
        )


def _event_format(path: Path, conns: list[Connection]):
    """(format version, typestore that decodes it) of the events' connections: format 2 (this
    package's TeachingEvent) or format 1 (recorded before the object fields existed); any other definition is refused."""
    store = make_typestore()
    old = make_typestore(event_format=1)
    if conns and all(c.msgtype == EVENT_TYPE and c.digest == old.hash_rihs01(EVENT_TYPE) for c in conns):
        return 1, old
    for conn in conns:
        _check_type(path, store, conn, EVENT_TYPE)
    return FORMAT_VERSION, store


def _choose_camera(path: Path, reader: Reader, info: BagSummary, camera_topic: str | None) -> list[Connection]:
    """The camera topic's connections (the bag's one image topic when ``camera_topic`` is None)."""
    if camera_topic is None:
        image_topics = sorted({c.topic for c in reader.connections if c.msgtype == IMAGE_TYPE})
        if len(image_topics) != 1:
            raise BagFormatError(
                path,
                "cannot choose the camera topic: "
                + (f"several image topics {image_topics}; pass camera_topic" if image_topics
                   else f"no {IMAGE_TYPE} topic in the bag"),
            )
        camera_topic = image_topics[0]
    camera_topic = normalize_topic(camera_topic)
    cam_conns = [c for c in reader.connections if c.topic == camera_topic]
    if not cam_conns:
        raise BagFormatError(
            path, f"camera topic not in bag (topics present: {', '.join(sorted(info.topics))})", camera_topic,
        )
    store = make_typestore()
    for conn in cam_conns:
        _check_type(path, store, conn, IMAGE_TYPE)
    return cam_conns


def _event(path: Path, conn: Connection, msg, version: int, index: int) -> TeachingEventRecord:
    """A decoded TeachingEvent as a record; format 1 events read as whole-frame teaches."""
    extra = {} if version == 1 else {
        "mode": int(msg.mode), "track_id": int(msg.track_id), "view_seed": int(msg.view_seed),
        "rois": tuple((int(r.x_offset), int(r.y_offset), int(r.width), int(r.height)) for r in msg.rois)}
    try:
        return TeachingEventRecord(
            stamp_ns=stamp_to_ns(msg.header.stamp), kind=int(msg.kind), label=msg.label,
            new_label=msg.new_label, frame_stamps_ns=tuple(stamp_to_ns(s) for s in msg.frame_stamps),
            predicted_label=msg.predicted_label, confidence=float(msg.confidence), known=bool(msg.known),
            success=bool(msg.success), frame_id=msg.header.frame_id, **({"mode": MODE_FRAME} | extra))
    except ValueError as exc:
        raise BagFormatError(path, f"invalid teaching event #{index}: {exc}", conn.topic) from None


def _bag_image(path: Path, conn: Connection, log_time: int, msg) -> BagImage:
    img = BagImage(
        topic=conn.topic, log_time_ns=int(log_time), stamp_ns=stamp_to_ns(msg.header.stamp),
        frame_id=msg.header.frame_id, encoding=msg.encoding, height=int(msg.height), width=int(msg.width),
        step=int(msg.step), is_bigendian=bool(msg.is_bigendian), data=msg.data.tobytes(),
    )
    if img.height * img.step != len(img.data):
        raise BagFormatError(
            path, f"frame stamped {img.stamp_ns} ns has {len(img.data)} data bytes, "
            f"expected height*step = {img.height * img.step}", conn.topic,
        )
    return img


@dataclass
class _Frames:
    """Camera frames gathered while the bag is read once."""

    needed: set[int]
    keep_all: bool
    keep_raw: bool
    images: dict[int, BagImage] = field(default_factory=dict)
    raw: dict[int, bytes] = field(default_factory=dict)

    def add(self, path: Path, conn: Connection, log_time: int, msg, data: bytes) -> None:
        img = _bag_image(path, conn, log_time, msg)
        stamp = img.stamp_ns
        if not self.keep_all and stamp not in self.needed:
            return
        old = self.images.get(stamp)
        if old is not None and old.data != img.data:
            if stamp in self.needed:
                raise BagFormatError(path, f"two different frames share the stamp {stamp} ns that an event uses",
                                     conn.topic)
            return
        self.images.setdefault(stamp, img)
        if self.keep_raw and stamp in self.needed:
            self.raw.setdefault(stamp, data)


def read_session(
    path: str | Path,
    camera_topic: str | None = None,
    events_topic: str = DEFAULT_EVENTS_TOPIC,
    frames: str = "referenced",
    *,
    keep: Iterable[str] | str | None = None,
) -> TeachingSession:
    """Teaching events and camera frames of a bag, the bag opened once.

    Parameters
    ----------
    camera_topic : the ``sensor_msgs/msg/Image`` topic the events' frames come from; may be
        omitted when the bag holds exactly one image topic.
    frames : ``"referenced"`` keeps only frames some event refers to (memory stays small for long
        recordings); ``"all"`` keeps every frame of the camera topic.
    keep : topics whose raw messages go into ``session.raw`` (what a replay publishes; ``"all"``:
        every topic but the events). When given, every message of the bag is read (a truncated bag
        is refused whole) and the used frames' CDR bytes are kept in ``session.raw_frames``.
    """
    if frames not in ("referenced", "all"):
        raise ValueError(f"frames must be 'referenced' or 'all', got {frames!r}")
    path = Path(path)
    reader = _open(path)
    try:
        info = _summary(path, reader)
        events_topic = normalize_topic(events_topic)
        ev_conns = [c for c in reader.connections if c.topic == events_topic]
        if not ev_conns:
            raise BagFormatError(
                path, f"no teaching events (topics present: {', '.join(sorted(info.topics)) or 'none'})",
                events_topic,
            )
        version, ev_store = _event_format(path, ev_conns)
        cam_conns = _choose_camera(path, reader, info, camera_topic)
        events, log_times = [], []
        for conn, log_time, data in _read(path, reader, ev_conns):
            events.append(_event(path, conn, _deserialize(path, ev_store, conn, data), version, len(events)))
            log_times.append(int(log_time))
        kept = (None if keep is None else set(info.topics) - {events_topic} if keep == "all"
                else {normalize_topic(t) for t in keep})
        got = _Frames({s for ev in events for s in ev.frame_stamps_ns}, frames == "all", kept is not None)
        raw = _read_frames(path, reader, cam_conns, ev_conns, kept, got)
        missing = sorted(got.needed - got.images.keys())
        if missing:
            raise BagFormatError(
                path, f"{counted(len(missing), 'frame')} used by teaching events {noun(len(missing), 'is', 'are')} missing (first stamp {missing[0]} ns)",
                cam_conns[0].topic,
            )
        return TeachingSession(path, cam_conns[0].topic, events_topic, events, got.images, info, version,
                               tuple(log_times), got.raw, raw)
    finally:
        reader.close()


def _read_frames(path: Path, reader: Reader, cam_conns: list[Connection], ev_conns: list[Connection],
                 kept: set[str] | None, got: _Frames) -> list[RawMessage]:
    """Decode the camera frames into ``got``; with ``kept``, read every other topic too (in the same
    pass) and return the raw messages of the kept topics."""
    store = make_typestore()
    cam_ids = {c.id for c in cam_conns}
    ev_ids = {c.id for c in ev_conns}
    conns = cam_conns if kept is None else [c for c in reader.connections if c.id not in ev_ids]
    raw: list[RawMessage] = []
    for conn, log_time, data in _read(path, reader, conns):
        if kept is not None and conn.topic in kept:
            raw.append(RawMessage(conn.topic, conn.msgtype, log_time, data))
        if conn.id in cam_ids:
            got.add(path, conn, log_time, _deserialize(path, store, conn, data), data)
    return raw
