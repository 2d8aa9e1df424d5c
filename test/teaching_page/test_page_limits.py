"""What one client or one publisher can take of the page: open pages are capped (one more is refused
with 503 and a reason), a teach another page started is named as such, and a detections message gives
the page a bounded number of objects with bounded labels and finite confidences."""
from __future__ import annotations

import asyncio
import json
import math

import aiohttp
import pytest

import cbcl_pr_ros.teaching_page.app as page_app
from cbcl_pr_ros.teaching_page.app import PageConfig, PageServer
from cbcl_pr_ros.teaching_page.guard import CLIENT_COOKIE
from cbcl_pr_ros.teaching_page.state import Frame, PageState

from .fake_robot import FakeRobot, frame


def _serve(**kw):
    state, robot = PageState(), FakeRobot()
    server = PageServer(state, robot, PageConfig(port=0, **kw))
    server.start()
    state.set_frame(frame())
    return server, state, robot


async def _open_until_refused(s: aiohttp.ClientSession, url: str, most: int) -> tuple[list, int]:
    """Open pages one after another until one is refused (or ``most`` are open): the open ones and the
    refusal's HTTP status (0 when none was refused)."""
    opened = []
    for _ in range(most):
        try:
            opened.append(await s.ws_connect(url))
        except aiohttp.WSServerHandshakeError as exc:
            return opened, exc.status
    return opened, 0


def test_open_pages_are_capped_and_one_more_is_told_why():
    server, _state, _robot = _serve(max_pages=3)

    async def go():
        async with aiohttp.ClientSession() as s:
            pages, refused = await _open_until_refused(s, server.url + "ws", 10)
            assert len(pages) == 3 and refused == 503
            async with s.get(server.url + "ws") as r:  # what the page asks to say why
                body = await r.json()
                assert r.status == 503 and "too many pages open (3 of at most 3, max_pages)" in body["message"]
            for ws in pages:  # they still get the state
                assert json.loads((await ws.receive(timeout=10)).data)["type"] == "state"
            await pages[0].close()
            again = []
            for _ in range(100):  # the server counts the closed page out once its handler ends
                again, _ = await _open_until_refused(s, server.url + "ws", 1)
                if again:
                    break
                await asyncio.sleep(0.05)
            assert len(again) == 1
            for ws in pages[1:] + again:
                await ws.close()
    try:
        asyncio.run(go())
    finally:
        server.stop()


@pytest.mark.parametrize("bad", [0, -1, 257, True])
def test_max_pages_out_of_range_is_refused_at_start(bad):
    with pytest.raises(ValueError, match="max_pages"):
        PageConfig(max_pages=bad)


def test_a_teach_another_page_started_is_named_as_such():
    server, _state, robot = _serve(action_rate_hz=0.05, action_burst=4.0)
    robot.hold.clear()  # the first teach runs until released
    teach = server.url + "api/teach"

    async def go():
        jar = lambda: aiohttp.CookieJar(unsafe=True)  # noqa: E731  (127.0.0.1 is an IP: allow its cookies)
        async with aiohttp.ClientSession(cookie_jar=jar()) as first, aiohttp.ClientSession(cookie_jar=jar()) as other:
            for s in (first, other):
                async with s.get(server.url) as r:
                    assert r.status == 200 and CLIENT_COOKIE in r.cookies
            running = asyncio.create_task(first.post(teach, json={"label": "mug", "track_id": 3}))
            for _ in range(200):  # until the first teach holds the robot
                if server.app[page_app._HUB].teaching.locked():
                    break
                await asyncio.sleep(0.02)
            answers = []
            for s in (other, first):
                async with s.post(teach, json={"label": "cup", "track_id": 3}) as r:
                    answers.append((r.status, (await r.json())["message"]))
            robot.hold.set()
            async with await running as r:
                return answers, r.status
    try:
        (theirs, mine), first_status = asyncio.run(go())
    finally:
        robot.hold.set()
        server.stop()
    assert theirs[0] == 429 and "started by another page" in theirs[1] and "already running" in theirs[1]
    assert mine[0] == 429 and mine[1].startswith("your teach is already running")
    assert first_status == 200 and robot.calls == [("track", "mug", 3)]


def test_a_detections_message_gives_the_page_a_bounded_frame():
    from cbcl_pr_ros.msg import DetectedObject, Detections
    from cbcl_pr_ros.nodes.teaching_page import MAX_LABEL, MAX_OBJECTS, page_boxes

    msg = Detections()
    confidences = [math.nan, math.inf, -math.inf, -3.0, 7.0, 0.25]
    msg.objects = [DetectedObject(id=i + 1, label="x" * 100_000, known=True, confidence=confidences[i % 6],
                                  x0=1, y0=2, x1=30, y1=40) for i in range(MAX_OBJECTS * 5)]
    boxes = page_boxes(msg)
    assert len(boxes) == MAX_OBJECTS and [b.id for b in boxes] == list(range(1, MAX_OBJECTS + 1))
    assert all(len(b.label) == MAX_LABEL for b in boxes)
    assert [b.confidence for b in boxes[:6]] == [0.0, 0.0, 0.0, 0.0, 1.0, 0.25]
    meta = Frame(b"", 640, 480, 0.0, boxes).meta()
    assert len(json.dumps(meta, allow_nan=False)) < 40_000  # valid JSON for the browser, of bounded size


def test_the_page_node_refuses_an_oversized_detections_message_unbuilt_and_keeps_showing_the_last():
    import rclpy
    from rclpy.serialization import serialize_message

    from cbcl_pr_ros.msg import DetectedObject, Detections
    from cbcl_pr_ros.nodes.detections_msgs import MAX_FRAME_OBJECTS
    from cbcl_pr_ros.nodes.teaching_page import TeachingPageNode

    context = rclpy.Context()
    rclpy.init(args=["page"], context=context)
    node = TeachingPageNode(start_server=False, context=context)
    try:
        good = Detections(objects=[DetectedObject(id=5, label="mug", known=True, confidence=0.9, x1=9, y1=9)])
        node._on_detections(serialize_message(good))  # as the raw subscription delivers it
        assert [o.id for o in node._last_objects] == [5]
        flood = Detections(objects=[DetectedObject(id=i + 1) for i in range(MAX_FRAME_OBJECTS + 1)])
        node._on_detections(serialize_message(flood))
        assert [o.id for o in node._last_objects] == [5]  # refused whole: nothing of it taken
        huge = Detections(objects=[DetectedObject(id=6, label="x" * (2 << 20))])
        node._on_detections(serialize_message(huge))
        assert [o.id for o in node._last_objects] == [5]
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def test_a_stranger_status_with_huge_names_is_refused_and_the_last_one_stays():
    """Anyone may publish ``status``: a backbone or class names of a megabyte used to go into the page's
    state (and from there to every open page on every change). Now such a status is ignored with one
    throttled warning and the page keeps the last good one; a status of 15,000 names keeps the first 10,000."""
    import rclpy

    from cbcl_pr_ros.msg import LearnerStatus
    from cbcl_pr_ros.nodes.teaching_page import TeachingPageNode

    MAX_SHOWN_CLASSES = 10_000  # teaching_page.state.MAX_SHOWN_CLASSES
    context = rclpy.Context()
    rclpy.init(args=["page"], context=context)
    node = TeachingPageNode(start_server=False, context=context)
    said = []
    node.get_logger = lambda: type("L", (), {"warning": lambda self, t, **kw: said.append((t, kw))})()
    try:
        node._on_status(LearnerStatus(num_classes=1, backbone="efficientnet_lite0", class_names=["mug"]))
        good = node.state.snapshot()[1]["status"]
        assert good["class_names"] == ["mug"] and good["backbone"] == "efficientnet_lite0"
        for bad in (LearnerStatus(num_classes=1, backbone="b" * (1 << 20), class_names=["mug"]),
                    LearnerStatus(num_classes=2, backbone="x", class_names=["mug", "c" * (1 << 20)]),
                    LearnerStatus(num_classes=2, backbone="x", class_names=["mug", "a\nb"])):
            node._on_status(bad)
            assert node.state.snapshot()[1]["status"] == good
        assert len(said) == 3 and all(kw.get("throttle_duration_sec", 0) >= 1 for _, kw in said)
        assert all(len(t) < 300 for t, _ in said)
        node._on_status(LearnerStatus(num_classes=15000, backbone="x", class_names=[f"c{i}" for i in range(15000)]))
        assert len(node.state.snapshot()[1]["status"]["class_names"]) == MAX_SHOWN_CLASSES
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def test_the_page_holds_camera_frames_to_a_byte_budget():
    """The page keeps recent camera frames until their detections come; a stranger's frames of 64 MiB
    each used to be held 64 at a time (4 GiB). Now the frames held take at most FRAME_BYTES."""
    import rclpy
    from sensor_msgs.msg import Image

    from cbcl_pr_ros.nodes.teaching_page import FRAME_BYTES, TeachingPageNode

    context = rclpy.Context()
    rclpy.init(args=["page"], context=context)
    node = TeachingPageNode(start_server=False, context=context)
    try:
        assert node._frames.max_bytes == FRAME_BYTES <= 256 * 1024 * 1024
        img = Image(height=10, width=10, encoding="rgb8", step=30)
        img.data = bytes(300)
        node._frames.put(1, img)
        assert node._frames.bytes_held == 300
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def test_a_class_list_with_a_name_no_learner_gives_is_not_shown():
    """Whoever answers list_classes may be a stranger: a list with a megabyte or control-character name
    is ignored with one throttled warning (it used to go to every open page); a good list is shown."""
    import rclpy

    from cbcl_pr_ros.msg import ClassInfo
    from cbcl_pr_ros.nodes.teaching_page import TeachingPageNode
    from cbcl_pr_ros.srv import ListClasses

    context = rclpy.Context()
    rclpy.init(args=["page"], context=context)
    node = TeachingPageNode(start_server=False, context=context)
    said = []
    node.get_logger = lambda: type("L", (), {"warning": lambda self, t, **kw: said.append((t, kw))})()
    try:
        good = ListClasses.Response(classes=[ClassInfo(name="mug", num_clusters=2, num_examples=9)])
        node._on_class_list(good)
        shown = node.state.snapshot()[1]["classes"]
        assert shown == [{"name": "mug", "num_clusters": 2, "num_examples": 9}]
        for name in ("m" * (1 << 20), "mug\x1b[2J"):
            node._on_class_list(ListClasses.Response(classes=[ClassInfo(name="cup"), ClassInfo(name=name)]))
            assert node.state.snapshot()[1]["classes"] == shown
        assert len(said) == 2 and all(len(t) < 300 and kw.get("throttle_duration_sec", 0) >= 1 for t, kw in said)
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def test_a_household_of_over_a_thousand_classes_is_listed_whole_and_a_cut_is_said():
    """A robot with a thousand taught objects taught one more: the page kept the first 1,000 classes of
    the learner's list, so the newest (listed last) was missing from "What I know", with nothing said,
    and could not be renamed or forgotten there. Now 1,500 classes are all listed, and past the page's
    bound the state says how many the learner holds (the page shows "... and N more classes")."""
    import rclpy

    from cbcl_pr_ros.msg import ClassInfo
    from cbcl_pr_ros.nodes.teaching_page import TeachingPageNode
    from cbcl_pr_ros.srv import ListClasses
    from cbcl_pr_ros.teaching_page.state import MAX_SHOWN_CLASSES

    context = rclpy.Context()
    rclpy.init(args=["page"], context=context)
    node = TeachingPageNode(start_server=False, context=context)
    try:
        node._on_class_list(ListClasses.Response(classes=[ClassInfo(name=f"object_{i}", num_clusters=1,
                                                                    num_examples=5) for i in range(1500)]))
        state = node.state.snapshot()[1]
        assert len(state["classes"]) == 1500 and state["classes"][-1]["name"] == "object_1499"
        assert state["classes_total"] == 1500
        more = MAX_SHOWN_CLASSES + 3
        node._on_class_list(ListClasses.Response(classes=[ClassInfo(name=f"c{i}") for i in range(more)]))
        state = node.state.snapshot()[1]
        assert len(state["classes"]) == MAX_SHOWN_CLASSES and state["classes_total"] == more
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def test_a_status_that_comes_before_the_learner_lists_its_classes_is_listed_at_the_next_one():
    """A learner offers list_classes only once it can answer (after its first status, at activate): a
    page that outlived a learner's restart took that status's model version as listed, asked nobody,
    and kept showing the old classes until the memory changed again. Now the next status asks."""
    import rclpy

    from cbcl_pr_ros.msg import ClassInfo, LearnerStatus
    from cbcl_pr_ros.nodes.teaching_page import TeachingPageNode
    from cbcl_pr_ros.srv import ListClasses

    context = rclpy.Context()
    rclpy.init(args=["page"], context=context)
    node = TeachingPageNode(start_server=False, context=context)
    asked, ready = [], [False]
    done = type("Done", (), {"add_done_callback": lambda self, fn: None})()
    node.list_cli.service_is_ready = lambda: ready[0]
    node.list_cli.call_async = lambda req: (asked.append(req), done)[1]
    try:
        node._on_class_list(ListClasses.Response(classes=[ClassInfo(name="mug")]))  # the old learner's list
        restarted = LearnerStatus(num_classes=2, backbone="x", class_names=["mug", "box"], model_version=7)
        node._on_status(restarted)  # the new learner's first status: list_classes not offered yet
        assert asked == []
        ready[0] = True
        node._on_status(restarted)  # its next status (every status_period_s), same memory
        assert len(asked) == 1
        node._on_status(restarted)  # listed once
        assert len(asked) == 1
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
