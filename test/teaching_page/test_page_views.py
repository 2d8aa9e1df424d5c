"""What the page shows a person while things are slow or missing: late detections stay choosable and
are marked late (never "no object"), the camera wait names its topic and the Image topics that exist,
and a teach answer names the object it used so the page can mark it."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.teaching_page.state import TRACK_KEEP_S, DetectedBox, Frame, PageState

from .fake_robot import frame

MUG = DetectedBox(5, "mug", True, 0.9, 200, 80, 280, 170)


def _plain(detections: str, objects=()) -> Frame:
    f = frame(())
    return Frame(f.jpeg, f.width, f.height, 2.0, tuple(objects), 1, 0, detections, 3.0)


def test_a_track_seen_recently_stays_choosable_when_the_newest_frame_lacks_it():
    state = PageState()
    state.set_frame(frame(), now=100.0)
    assert state.track_ids(now=100.0) == {3, 5}
    state.set_frame(_plain("none"), now=101.0)  # detections late: a plain picture
    assert state.track_ids(now=101.0) == {3, 5}
    assert state.track_ids(now=100.0 + TRACK_KEEP_S + 0.1) == set()  # long gone: refused again
    state.set_frame(_plain("late", [MUG]), now=100.0 + TRACK_KEEP_S + 1)
    assert state.track_ids(now=100.0 + TRACK_KEEP_S + 1) == {5}  # the late frame's objects count


def test_a_fresh_frame_without_the_track_says_it_left():
    state = PageState()
    state.set_frame(frame(), now=0.0)
    state.set_frame(frame(objects=((9, "", False, 0.1, 10, 10, 60, 60),)), now=1.0)
    assert state.track_ids(now=1.0) == {9}


def test_late_frames_do_not_renew_a_track():
    state = PageState()
    state.set_frame(frame(), now=0.0)
    state.set_frame(_plain("late", [MUG]), now=5.0)
    state.set_frame(_plain("none"), now=TRACK_KEEP_S + 1)
    assert state.track_ids(now=TRACK_KEEP_S + 1) == set()


def test_frame_meta_says_how_its_objects_came():
    meta = _plain("late", [MUG]).meta()
    assert meta["detections"] == "late" and meta["detections_age_s"] == 3.0 and meta["objects"][0]["id"] == 5
    with pytest.raises(ValueError):
        PageState().set_frame(_plain("stale"))


def test_teach_answer_with_the_object_it_used_reaches_every_page():
    state = PageState()
    state.record_teach("mug", True, "learned new class 'mug' ...; the object at (1, 2)-(30, 40), track 7", 7,
                       (1, 2, 30, 40))
    teach = state.snapshot()[1]["last_teach"]
    assert teach["track_id"] == 7 and teach["box"] == [1, 2, 30, 40] and "track 7" in teach["message"]
    state.record_teach("mug", False, "no object lies mostly inside the box")
    assert state.snapshot()[1]["last_teach"]["track_id"] == -1


def test_camera_state_is_in_the_snapshot():
    state = PageState()
    state.set_camera({"topic": "/robot1/image", "waiting": True, "hint": "No camera picture on '/robot1/image'."})
    cam = state.snapshot()[1]["camera"]
    assert cam["waiting"] and cam["topic"] == "/robot1/image" and "/robot1/image" in cam["hint"]


# ------------------------------------------------------------------ the node (no spinning: its callbacks)
rclpy = pytest.importorskip("rclpy")


@pytest.fixture
def page_node():
    from cbcl_pr_ros.nodes.teaching_page import TeachingPageNode

    context = rclpy.Context()
    rclpy.init(args=["page", "--ros-args", "-r", "image:=/cam/rgb", "-p", "plain_after_s:=0.5"], context=context)
    node = TeachingPageNode(start_server=False, context=context)
    try:
        yield node
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def _image(stamp_s: int):
    from cbcl_pr_ros.nodes.conversions import rgb_to_image_msg

    msg = rgb_to_image_msg(np.zeros((48, 64, 3), np.uint8))
    msg.header.stamp.sec = stamp_s
    return msg


def _detections(stamp_s: int):
    from cbcl_pr_ros.msg import DetectedObject, Detections

    msg = Detections()
    msg.header.stamp.sec = stamp_s
    msg.objects = [DetectedObject(id=5, label="mug", known=True, confidence=0.9, x0=10, y0=10, x1=30, y1=30)]
    return msg


def test_node_keeps_the_newest_objects_marked_late_while_detections_are_late(page_node, monkeypatch):
    import cbcl_pr_ros.nodes.teaching_page as tp

    clock = [1000.0]
    monkeypatch.setattr(tp.time, "monotonic", lambda: clock[0])
    page_node.min_period = 0.0
    page_node._started = clock[0]
    page_node._on_image(_image(1))  # no detections yet: the picture, the first ones on their way
    assert page_node.state.frame().detections == "waiting"
    page_node._on_detections(_detections(1))
    assert page_node.state.frame().detections == "fresh" and page_node.state.frame().objects[0].id == 5
    clock[0] += 3.0  # detections late under load: the next pictures keep the mug, marked late
    page_node._on_image(_image(2))
    f = page_node.state.frame()
    assert f.detections == "late" and [o.id for o in f.objects] == [5] and f.detections_age_s == pytest.approx(3.0)
    assert 5 in page_node.state.track_ids()
    clock[0] += tp.LATE_FOR_S + 1  # none for long: "none", no stale boxes (nor at a start without any)
    page_node._on_image(_image(3))
    assert page_node.state.frame().detections == "none" and page_node.state.frame().objects == ()
    page_node._last_detections = None  # never any, long after the start: "none" too
    clock[0] += 1.0
    page_node._on_image(_image(4))
    assert page_node.state.frame().detections == "none"


def test_node_names_its_camera_topic_and_the_image_topics_when_no_picture_comes(page_node, monkeypatch):
    import cbcl_pr_ros.nodes.teaching_page as tp

    assert page_node.camera_topic == "/cam/rgb"
    cam = page_node.state.snapshot()[1]["camera"]
    assert cam == {"topic": "/cam/rgb", "waiting": True, "hint": ""}
    monkeypatch.setattr(page_node, "get_topic_names_and_types",
                        lambda: [("/camera/color/image_raw", ["sensor_msgs/msg/Image"]),
                                 ("/camera/depth/image_raw", ["sensor_msgs/msg/Image"])])
    monkeypatch.setattr(page_node, "count_publishers", lambda t: 0 if t == "/cam/rgb" else 1)
    page_node._started -= tp.CAMERA_SILENT_S + 1
    page_node._watch_camera()
    hint = page_node.state.snapshot()[1]["camera"]["hint"]
    assert "'/cam/rgb'" in hint and "/camera/depth/image_raw" in hint
    assert "teaching_page_node --ros-args -r image:=/camera/color/image_raw" in hint
    assert "camera_topic:=/camera/color/image_raw" in hint
    page_node._on_image(_image(1))
    assert page_node.state.snapshot()[1]["camera"]["waiting"] is False


# ------------------------------------------------------------------ the web side: scene buttons, shutdown
class SceneRobot:
    """The fake robot with the arm's look and the simulated world's objects."""

    def __init__(self) -> None:
        from .fake_robot import FakeRobot

        self.base = FakeRobot()
        self.calls: list[str] = []

    def __getattr__(self, name):
        return getattr(self.base, name)

    def look_at_table(self):
        from cbcl_pr_ros.teaching_page.client import Outcome

        self.calls.append("look")
        return Outcome(True, "right hand camera looks at [0.7, 0.0, -0.18] (table)")

    def place_objects(self):
        from cbcl_pr_ros.teaching_page.client import Outcome

        self.calls.append("place")
        return Outcome(True, "put on the table: mug, duck, lemon")


@pytest.fixture
def scene_server():
    from cbcl_pr_ros.teaching_page.app import PageConfig, PageServer

    state, robot = PageState(), SceneRobot()
    server = PageServer(state, robot, PageConfig(port=0))
    server.start()
    state.set_frame(frame())
    yield server, state, robot
    server.stop()


def test_scene_buttons_call_the_robot_and_every_page_hears_the_answer(scene_server):
    import asyncio

    import aiohttp

    server, state, robot = scene_server

    async def go():
        async with aiohttp.ClientSession() as s:
            out = []
            for path, body in (("place", {}), ("look", {}), ("look", [1]), ("place", "x")):
                async with s.post(f"{server.url}api/{path}", json=body) as r:
                    out.append((r.status, (await r.json())["message"]))
            return out

    out = asyncio.run(go())
    assert out[0] == (200, "put on the table: mug, duck, lemon") and out[1][0] == 200
    assert out[2][0] == out[3][0] == 400 and "JSON object" in out[2][1]
    assert robot.calls == ["place", "look"]  # the bad requests reached nothing
    assert state.snapshot()[1]["notice"]["action"] == "look"


def test_stopping_the_server_closes_an_open_page_as_going_away():
    """Ctrl-C must not wait for a page's websocket to end by itself (it never does)."""
    import asyncio

    import aiohttp

    from cbcl_pr_ros.teaching_page.app import PageConfig, PageServer

    state = PageState()
    server = PageServer(state, SceneRobot(), PageConfig(port=0))
    server.start()
    got: dict = {}

    async def hold():
        async with aiohttp.ClientSession() as s, s.ws_connect(f"{server.url}ws") as ws:
            await ws.receive()  # the first state
            threading.Thread(target=server.stop, daemon=True).start()
            while True:
                msg = await ws.receive()
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING):
                    got["code"] = ws.close_code
                    return

    import threading

    asyncio.run(asyncio.wait_for(hold(), 60))
    assert got["code"] == aiohttp.WSCloseCode.GOING_AWAY


def test_a_teach_answer_carries_the_object_from_the_learner_to_the_page(page_node):
    """TeachOutcome -> TeachClass response (taught_track_id, taught_roi) -> the page's Outcome."""
    from cbcl_pr_ros.nodes.conversions import fill_teach_response
    from cbcl_pr_ros.service.controller import TeachOutcome
    from cbcl_pr_ros.srv import TeachClass

    out = TeachOutcome(True, "learned new class 'mug' ...; the object at (10, 20)-(50, 80), track 4", 3, 1,
                       taught_track_id=4, taught_box=(10, 20, 50, 80))
    res = fill_teach_response(TeachClass.Response(), out)
    assert res.taught_track_id == 4 and (res.taught_roi.x_offset, res.taught_roi.y_offset,
                                         res.taught_roi.width, res.taught_roi.height) == (10, 20, 40, 60)
    page = page_node._answer(res)
    assert page.ok and page.track_id == 4 and page.box == (10, 20, 50, 80)
    none = page_node._answer(fill_teach_response(TeachClass.Response(), TeachOutcome(False, "no object")))
    assert none.track_id == -1 and none.box is None


def test_the_page_knows_when_the_camera_moved_away_from_the_table(page_node):
    """Whoever moves the arm (Point at from the page, a point_at service call), the page sees the hand
    camera's pose leave where it looked at the table, says so, and knows when it is back."""
    from geometry_msgs.msg import PoseStamped

    def pose(x: float) -> PoseStamped:
        msg = PoseStamped()
        msg.pose.position.x, msg.pose.position.z = x, 0.3
        return msg

    view = lambda: page_node.state.snapshot()[1]["view"].get("at")  # noqa: E731
    page_node._on_camera_pose(pose(0.6))  # the first pose: the table view
    page_node._on_camera_pose(pose(0.61))
    assert view() is None
    page_node._on_camera_pose(pose(0.75))
    assert view() == "moved"
    page_node._on_camera_pose(pose(float("nan")))  # a broken pose changes nothing
    assert view() == "moved"
    page_node._on_camera_pose(pose(0.6))
    assert view() == "table"


def test_put_objects_on_the_table_says_what_it_put_and_why_it_stopped(page_node, monkeypatch):
    from types import SimpleNamespace

    answers = iter([SimpleNamespace(success=True, message="placed"),
                    SimpleNamespace(success=False, message="nothing placed: the world holds 20 objects, the most")])
    asked = []

    def call(client, request, timeout, what):
        asked.append(request.category)
        return next(answers)

    monkeypatch.setattr(page_node, "_call", call)
    out = page_node.place_objects()
    assert out.ok and out.message.startswith(f"put on the table: {asked[0]}") and "20 objects" in out.message
    assert len(asked) == 2 and asked[0] != asked[1]  # stopped at the first refusal, different categories
    monkeypatch.setattr(page_node, "_call", lambda *a: SimpleNamespace(success=False, message="no world"))
    out = page_node.place_objects()
    assert not out.ok and out.message == "nothing put on the table: no world"


def test_the_page_is_sent_each_name_as_shown_with_one_rule_for_a_guess():
    """The server writes "mug" / "mug?" (below UNSURE) / "" (unknown) for the page, so the page, the
    debug image and RViz share one threshold; the page's script keeps no threshold of its own."""
    from pathlib import Path

    from cbcl_pr_ros.teaching_page import state as page_state
    from cbcl_pr_ros.teaching_page.state import UNSURE

    assert MUG.as_dict()["shown"] == "mug"
    assert DetectedBox(5, "mug", True, UNSURE - 0.01, 0, 0, 1, 1).as_dict()["shown"] == "mug?"
    assert DetectedBox(5, "mug", False, 0.45, 0, 0, 1, 1).as_dict()["shown"] == ""
    script = (Path(page_state.__file__).parent / "static" / "page.js").read_text(encoding="utf-8")
    assert "o.shown" in script and "UNSURE =" not in script and "0.6" not in script
