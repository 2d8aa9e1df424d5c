"""Writing and reading teaching-session bags (no ROS graph): round trip, metadata, bad input."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import get_types_from_msg

from cbcl_pr_ros.bags import (
    EVENT_TYPE,
    IMAGE_TYPE,
    BagFormatError,
    EventKind,
    TeachingBagWriter,
    TeachingEventRecord,
    bag_info,
    check_bag,
    iter_raw,
    make_typestore,
    read_session,
)

from .conftest import CAMERA, write_synthetic


def _storage_file(path: Path) -> Path:
    files = [p for p in path.iterdir() if p.suffix in (".mcap", ".db3")]
    assert len(files) == 1, files
    return files[0]


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_round_trip_is_byte_identical(tmp_path, storage):
    images, stamps, events = write_synthetic(tmp_path / "bag", storage)
    session = read_session(tmp_path / "bag", frames="all")
    assert session.camera_topic == CAMERA
    assert sorted(session.frames) == stamps
    for stamp, img in zip(stamps, images):
        frame = session.frames[stamp]
        assert frame.data == img.tobytes()
        assert (frame.encoding, frame.height, frame.width, frame.step) == ("rgb8", 48, 64, 64 * 3)
        assert frame.frame_id == "cam"
    assert session.events == events
    info = bag_info(tmp_path / "bag")
    assert info.storage == storage
    assert info.topics[CAMERA].count == len(images)
    assert info.topics["/teaching_events"].count == len(events)


def test_referenced_frames_only(tmp_path):
    images, stamps, events = write_synthetic(tmp_path / "bag")
    session = read_session(tmp_path / "bag")  # default: only frames some event uses
    assert set(session.frames) == {s for ev in events for s in ev.frame_stamps_ns}
    teach = session.events[0]
    assert [f.data for f in session.frames_of(teach)] == [im.tobytes() for im in images[:6]]


def _hash_from_rosidl(pkg: str, name: str) -> str:
    """The RIHS01 hash rosidl generated into share/<pkg>/msg/<name>.json of the install."""
    for prefix in os.environ["AMENT_PREFIX_PATH"].split(os.pathsep):
        path = Path(prefix) / "share" / pkg / "msg" / f"{name}.json"
        if path.is_file():
            return json.loads(path.read_text())["type_hashes"][0]["hash_string"]
    raise FileNotFoundError(f"{pkg}/msg/{name}.json not installed")


def test_metadata_like_a_kilted_bag(tmp_path):
    write_synthetic(tmp_path / "bag")
    meta = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == 9
    assert meta["storage_identifier"] == "mcap"
    assert meta["relative_file_paths"] == [_storage_file(tmp_path / "bag").name]
    assert meta["message_count"] == 12 + 9
    topics = {t["topic_metadata"]["name"]: t for t in meta["topics_with_message_count"]}
    assert set(topics) == {CAMERA, "/teaching_events"}
    for t in topics.values():
        tm = t["topic_metadata"]
        assert tm["serialization_format"] == "cdr"
        (qos,) = tm["offered_qos_profiles"]  # version 9: a list of profiles, not a YAML string
        assert qos["reliability"] == "reliable" and qos["history"] == "keep_last"
        assert set(qos) >= {"depth", "durability", "deadline", "lifespan", "liveliness",
                            "liveliness_lease_duration", "avoid_ros_namespace_conventions"}
        assert tm["type_description_hash"].startswith("RIHS01_")
    # The hashes are the ones rosidl generated for the installed interfaces (what ros2 bag play checks).
    assert topics["/teaching_events"]["topic_metadata"]["type_description_hash"] == \
        _hash_from_rosidl("cbcl_pr_ros", "TeachingEvent")
    assert topics[CAMERA]["topic_metadata"]["type_description_hash"] == \
        _hash_from_rosidl("sensor_msgs", "Image")


def test_writer_refuses_bad_input_and_leaves_nothing(tmp_path):
    write_synthetic(tmp_path / "bag")
    with pytest.raises(FileExistsError):
        TeachingBagWriter(tmp_path / "bag")
    with pytest.raises(ValueError, match="storage"):
        TeachingBagWriter(tmp_path / "x", "rosbag1")
    with pytest.raises(TypeError, match="uint8"):
        with TeachingBagWriter(tmp_path / "half") as w:
            w.write_image(CAMERA, np.zeros((4, 4, 3), np.uint8), 1)
            w.write_image(CAMERA, np.zeros((4, 4, 3), np.float32), 2)
    assert not (tmp_path / "half").exists()  # aborted: no partial bag that looks complete
    with pytest.raises(ValueError, match="needs a label"):
        TeachingEventRecord(1, EventKind.TEACH, "", frame_stamps_ns=[1])
    with pytest.raises(ValueError, match="exactly one frame"):
        TeachingEventRecord(1, EventKind.CLASSIFY, "x", frame_stamps_ns=[1, 2])


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_truncated_bag_is_refused(tmp_path, storage):
    write_synthetic(tmp_path / "bag", storage, n_frames=20)
    data = _storage_file(tmp_path / "bag")
    raw = data.read_bytes()
    data.write_bytes(raw[: len(raw) * 2 // 3])
    with pytest.raises(BagFormatError) as err:
        read_session(tmp_path / "bag")
    assert str(tmp_path / "bag") in str(err.value)
    with pytest.raises(BagFormatError):
        check_bag(tmp_path / "bag")
    with pytest.raises(BagFormatError):
        list(iter_raw(tmp_path / "bag"))


def test_corrupt_and_missing_bags(tmp_path):
    with pytest.raises(BagFormatError, match="no such bag"):
        read_session(tmp_path / "nothing")
    write_synthetic(tmp_path / "bag")
    (tmp_path / "bag" / "metadata.yaml").write_text("rosbag2_bagfile_information: [1, 2")
    with pytest.raises(BagFormatError, match="not a readable rosbag2 bag"):
        bag_info(tmp_path / "bag")
    write_synthetic(tmp_path / "bag2")
    data = _storage_file(tmp_path / "bag2")
    raw = bytearray(data.read_bytes())
    raw[: 64] = b"\xff" * 64  # destroy the mcap magic and header
    data.write_bytes(bytes(raw))
    with pytest.raises(BagFormatError) as err:
        read_session(tmp_path / "bag2")
    assert "bag2" in str(err.value)


def test_missing_topics_are_named(tmp_path):
    with TeachingBagWriter(tmp_path / "frames_only") as w:
        w.write_image(CAMERA, np.zeros((4, 4, 3), np.uint8), 1)
    with pytest.raises(BagFormatError) as err:
        read_session(tmp_path / "frames_only")
    assert err.value.topic == "/teaching_events" and "frames_only" in str(err.value)
    write_synthetic(tmp_path / "bag")
    with pytest.raises(BagFormatError) as err:
        read_session(tmp_path / "bag", camera_topic="/other/camera")
    assert err.value.topic == "/other/camera"
    with pytest.raises(BagFormatError, match="topic not in bag"):
        list(iter_raw(tmp_path / "bag", ["/nope"]))


def test_event_referring_to_a_missing_frame(tmp_path):
    with TeachingBagWriter(tmp_path / "bag") as w:
        s = w.write_image(CAMERA, np.zeros((4, 4, 3), np.uint8), 10)
        w.write_event(TeachingEventRecord(20, EventKind.TEACH, "a", frame_stamps_ns=[s, 15]))
    with pytest.raises(BagFormatError, match="missing") as err:
        read_session(tmp_path / "bag")
    assert err.value.topic == CAMERA


def _write_foreign(path: Path, topic: str, typename: str, msgdef: str, fields: dict) -> None:
    store = make_typestore()
    store.register(get_types_from_msg(msgdef, typename))
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection(topic, typename, typestore=store)
        w.write(conn, 5, store.serialize_cdr(store.types[typename](**fields), typename))


def test_unknown_or_wrong_message_types(tmp_path):
    # The events topic holding some other type.
    _write_foreign(tmp_path / "wrong", "/teaching_events", "other_pkg/msg/Note", "string text\n",
                   {"text": "hi"})
    with pytest.raises(BagFormatError, match="expected 'cbcl_pr_ros/msg/TeachingEvent'") as err:
        read_session(tmp_path / "wrong")
    assert err.value.topic == "/teaching_events"
    # A TeachingEvent recorded with a different definition (another type hash).
    _write_foreign(tmp_path / "old", "/teaching_events", EVENT_TYPE.replace("TeachingEvent", "Tmp"),
                   "uint8 kind\n", {"kind": 0})
    meta = tmp_path / "old" / "metadata.yaml"
    meta.write_text(meta.read_text().replace("cbcl_pr_ros/msg/Tmp", EVENT_TYPE))
    with pytest.raises(BagFormatError, match="another definition"):
        read_session(tmp_path / "old")
    # Camera topic of an unknown type, beside valid teaching events.
    with TeachingBagWriter(tmp_path / "cam") as w:
        w.typestore.register(get_types_from_msg("uint8[] pixels\n", "vendor_msgs/msg/Frame"))
        frame_t = w.typestore.types["vendor_msgs/msg/Frame"]
        w.write_raw(CAMERA, "vendor_msgs/msg/Frame",
                    w.typestore.serialize_cdr(frame_t(pixels=np.zeros(3, np.uint8)), "vendor_msgs/msg/Frame"), 1)
        w.write_event(TeachingEventRecord(2, EventKind.TEACH, "a", frame_stamps_ns=[1]))
    with pytest.raises(BagFormatError, match=f"no {IMAGE_TYPE} topic"):
        read_session(tmp_path / "cam")
    with pytest.raises(BagFormatError, match="holds 'vendor_msgs/msg/Frame', expected 'sensor_msgs/msg/Image'") as err:
        read_session(tmp_path / "cam", camera_topic=CAMERA)
    assert err.value.topic == CAMERA


def test_simulated_session_is_reproducible(sim_bag, tmp_path):
    from cbcl_pr_ros.bags.simulate import SessionPlan, simulate_session

    again = tmp_path / sim_bag.name
    simulate_session(again, SessionPlan(("mug", "duck", "lego"), shots=3, test_views=2, image_size=96,
                                        rate_hz=10.0, seed=3))
    assert _storage_file(again).read_bytes() == _storage_file(sim_bag).read_bytes()
    s = read_session(sim_bag)
    kinds = [ev.kind for ev in s.events]
    assert kinds.count(EventKind.TEACH) == 3
    assert kinds.count(EventKind.CLASSIFY) == 2 * (1 + 2 + 3)  # every learned class after each increment
    assert all(f.rgb().shape == (96, 96, 3) for f in s.frames.values())
    # Objects are visible: a frame is not a flat background.
    assert all(f.rgb().std() > 5 for f in s.frames.values())
