"""Bag format 2 (issue 23): what a teach was taught from is recorded, old bags still read, and a
replay opens its bag once."""
from __future__ import annotations

import numpy as np
import pytest
from rosbags.rosbag2 import Reader, StoragePlugin, Writer

from cbcl_pr_ros.bags import EVENT_TYPE, BagFormatError, EventKind, TeachingBagWriter, TeachingEventRecord, read_session
from cbcl_pr_ros.bags.records import FORMAT_VERSION, MODE_FRAME, MODE_OBJECT
from cbcl_pr_ros.bags.replay_plan import build_plan
from cbcl_pr_ros.bags.types import EVENT_TYPE_V1, IMAGE_TYPE, make_typestore
from cbcl_pr_ros.bags.writer import FORMAT_KEY

from .conftest import CAMERA, T0


def _by_object_bag(path, storage="mcap"):
    rgb = np.zeros((32, 40, 3), np.uint8)
    with TeachingBagWriter(path, storage) as w:
        s = [w.write_image(CAMERA, rgb + i, T0 + i * 1000, "cam") for i in range(3)]
        events = [
            TeachingEventRecord(T0 + 5000, EventKind.TEACH, "mug", frame_stamps_ns=s[:2], mode=MODE_OBJECT,
                                rois=[(1, 2, 10, 12), (3, 4, 20, 22)], view_seed=7),
            TeachingEventRecord(T0 + 6000, EventKind.TEACH, "cup", frame_stamps_ns=s[2:], track_id=12),
            TeachingEventRecord(T0 + 7000, EventKind.CLASSIFY, "mug", frame_stamps_ns=s[:1], mode=MODE_OBJECT),
        ]
        for ev in events:
            w.write_event(ev)
    return events


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_teach_sources_round_trip(tmp_path, storage):
    events = _by_object_bag(tmp_path / "bag", storage)
    session = read_session(tmp_path / "bag")
    assert session.events == events
    assert session.format_version == FORMAT_VERSION == 2
    assert session.info.custom_data[FORMAT_KEY] == "2"
    mug, cup, test = session.events
    assert (mug.mode, mug.rois, mug.view_seed, mug.track_id) == (MODE_OBJECT, ((1, 2, 10, 12), (3, 4, 20, 22)), 7, -1)
    assert (cup.mode, cup.track_id, cup.rois, cup.view_seed) == (0, 12, (), -1)
    assert test.mode == MODE_OBJECT


# The type hash format-1 bags carry (TeachingEvent before issue 23, as rosidl and rosbags computed it).
_V1_HASH = "RIHS01_5c08cf600f980c90fb95ed11f9c5a98628d715b4d39b23964b36e09ca9de850e"


def _format1_bag(path):
    """A bag as written before issue 23 (no mode/track/rois/seed; the old type hash)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)  # Kilted's types and the old TeachingEvent only
    store.register(get_types_from_msg(EVENT_TYPE_V1, EVENT_TYPE))
    t = store.types
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        cam = w.add_connection(CAMERA, IMAGE_TYPE, typestore=store)
        ev = w.add_connection("/teaching_events", EVENT_TYPE, typestore=store)
        hdr = t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=1, nanosec=0), frame_id="cam")
        img = t[IMAGE_TYPE](header=hdr, height=2, width=2, encoding="rgb8", is_bigendian=0, step=6,
                            data=np.arange(12, dtype=np.uint8))
        w.write(cam, 10**9, store.serialize_cdr(img, IMAGE_TYPE))
        for kind, label in ((0, "mug"), (1, "mug")):
            msg = t[EVENT_TYPE](header=hdr, kind=kind, label=label, new_label="", frame_stamps=[hdr.stamp],
                                predicted_label="", confidence=0.0, known=False, success=False)
            w.write(ev, 2 * 10**9, store.serialize_cdr(msg, EVENT_TYPE))
    return store.hash_rihs01(EVENT_TYPE)


def test_format1_bags_read_as_whole_frame_teaches(tmp_path):
    assert _format1_bag(tmp_path / "old") == _V1_HASH == make_typestore(event_format=1).hash_rihs01(EVENT_TYPE)
    assert make_typestore().hash_rihs01(EVENT_TYPE) != _V1_HASH  # the definition did change
    session = read_session(tmp_path / "old")
    assert session.format_version == 1
    teach, test = session.events
    assert (teach.kind, teach.label, teach.frame_stamps_ns) == (EventKind.TEACH, "mug", (10**9,))
    assert [(e.mode, e.track_id, e.rois, e.view_seed) for e in session.events] == [(MODE_FRAME, -1, (), -1)] * 2
    plan = build_plan(tmp_path / "old", rate=None)  # and replays: the frames go with the events
    assert [len(pe.frames) for pe in plan.events] == [1, 1]


@pytest.mark.parametrize("bad, match", [
    ({"mode": 3}, "mode must be"), ({"track_id": -2}, "track_id must be"),
    ({"rois": [(1, 2, 3)]}, "rois must be"), ({"rois": [(-1, 0, 3, 3)]}, "rois must be"),
])
def test_bad_teach_sources_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        TeachingEventRecord(1, EventKind.TEACH, "mug", frame_stamps_ns=[1], **bad)


def test_a_replay_opens_its_bag_once(tmp_path, monkeypatch):
    _by_object_bag(tmp_path / "bag")
    opened = []
    real_open = Reader.open
    monkeypatch.setattr(Reader, "open", lambda self: (opened.append(self.path), real_open(self))[1])
    plan = build_plan(tmp_path / "bag", rate=None)
    assert len(opened) == 1
    assert [m.topic for m in plan.messages] == [CAMERA] * 3
    assert [len(pe.frames) for pe in plan.events] == [2, 1, 1]
    assert plan.events[0].event.rois == ((1, 2, 10, 12), (3, 4, 20, 22))
    opened.clear()
    assert len(build_plan(tmp_path / "bag", rate=None, with_events=False).messages) == 3  # events are not published
    assert len(opened) == 1
    with pytest.raises(BagFormatError, match="topic not in bag"):
        build_plan(tmp_path / "bag", topics=["/nope"])
