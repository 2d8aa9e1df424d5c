"""The page's web application without ROS or a browser: every request check, the guards (token,
origin, size, rate), and that two pages receive the same state (issue 21)."""
from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from cbcl_pr_ros.teaching_page.app import PageConfig, PageServer, is_loopback
from cbcl_pr_ros.teaching_page.state import PageState

from .fake_robot import FakeRobot, frame


@pytest.fixture
def served():
    state, robot = PageState(), FakeRobot()
    server = PageServer(state, robot, PageConfig(port=0, action_rate_hz=2.0, action_burst=4.0))
    server.start()
    state.set_frame(frame())
    yield server, state, robot
    robot.hold.set()
    server.stop()


def _run(coro):
    return asyncio.run(coro)


async def _post(session, url, body, **kw):
    async with session.post(url, json=body, **kw) as r:
        return r.status, await r.json()


def test_bad_input_is_refused_with_a_clear_message_and_nothing_is_taught(served):
    server, state, robot = served
    url = server.url + "api/teach"
    cases = [({"label": "", "track_id": 3}, "empty name"),
             ({"label": "   ", "track_id": 3}, "empty name"),
             ({"label": "x" * 10_000, "track_id": 3}, "the most is 128"),
             ({"label": "mug\x1b[2J", "track_id": 3}, "unprintable"),
             ({"label": "mug", "track_id": 77}, "no longer in view"),
             ({"label": "mug", "track_id": -1}, "between 1 and"),
             ({"label": "mug", "track_id": "3; drop"}, "whole number"),
             ({"label": "mug"}, "click it"),
             ({"label": "mug", "track_id": 3, "box": [0, 0, 5, 5]}, "not both"),
             ({"label": "mug", "box": [300, 10, 50, 50]}, "outside the 320x240 picture"),
             ({"label": "mug", "box": [-5, 10, 50, 50]}, "outside"),
             ({"label": "mug", "box": [10, 10, 0, 50]}, "empty"),
             ({"label": "mug", "box": [1, 2, 3]}, "[x, y, width, height]"),
             (["not", "an", "object"], "JSON object")]

    async def go():
        async with aiohttp.ClientSession() as s:
            for body, why in cases:
                status, res = await _post(s, url, body)
                assert status == 400 and not res["ok"] and why in res["message"], (body, res)
                assert len(res["message"]) < 200  # a 10 kB name is never echoed back
            async with s.post(url, data=b"{not json", headers={"Content-Type": "application/json"}) as r:
                assert r.status == 400 and "not valid JSON" in (await r.json())["message"]
            async with s.post(url, data=b"x" * 20_000, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 413 and "too large" in (await r.json())["message"]
            async with s.post(url, data=b"label=mug&track_id=3",
                              headers={"Content-Type": "application/x-www-form-urlencoded"}) as r:
                assert r.status == 415
            status, res = await _post(s, url, {"label": "mug", "track_id": 3}, headers={"Origin": "http://evil.example"})
            assert status == 403
    _run(go())
    assert robot.calls == []  # nothing reached the robot
    status, res = _run(_good(server.url + "api/teach", {"label": " blue mug ", "track_id": 3}))
    assert status == 200 and res["ok"] and robot.calls == [("track", "blue mug", 3)]


async def _good(url, body):
    async with aiohttp.ClientSession() as s:
        return await _post(s, url, body)


def test_a_flood_of_clicks_is_rate_limited_and_one_teach_runs_at_a_time(served):
    server, state, robot = served
    robot.hold.clear()  # the first teach "runs" until released

    async def go():
        async with aiohttp.ClientSession() as s:
            tasks = [asyncio.create_task(_post(s, server.url + "api/teach", {"label": f"c{i}", "track_id": 3}))
                     for i in range(30)]
            await asyncio.sleep(1.0)
            robot.hold.set()
            return await asyncio.gather(*tasks)
    results = _run(go())
    codes = [c for c, _ in results]
    assert codes.count(200) == 1, codes  # exactly the teach that ran
    refused = [r["message"] for c, r in results if c == 429]
    assert len(refused) == 29 and all("too many requests" in m or "already running" in m for m in refused)
    assert len(robot.calls) == 1
    # the server is unharmed: after the bucket refills a request is answered
    import time
    time.sleep(2.5)
    status, res = _run(_good(server.url + "api/forget", {"label": robot.calls[0][1]}))
    assert status == 200 and res["ok"], res


def test_two_pages_receive_the_same_state_and_frames(served):
    server, state, robot = served

    async def page(s):
        ws = await s.ws_connect(server.url + "ws")
        got = {"state": None, "frame": None, "jpeg": None}
        return ws, got

    async def read_until(ws, got, pred, timeout=10.0):
        async def loop():
            while not pred(got):
                m = await ws.receive()
                if m.type == aiohttp.WSMsgType.TEXT:
                    d = json.loads(m.data)
                    got[d["type"]] = d
                elif m.type == aiohttp.WSMsgType.BINARY:
                    got["jpeg"] = m.data
                else:
                    raise AssertionError(f"websocket ended: {m.type}")
        await asyncio.wait_for(loop(), timeout)

    async def go():
        async with aiohttp.ClientSession() as s:
            (a, ga), (b, gb) = await page(s), await page(s)
            for ws, g in ((a, ga), (b, gb)):
                await read_until(ws, g, lambda g: g["state"] and g["jpeg"])
                assert g["jpeg"][:2] == b"\xff\xd8" and [o["id"] for o in g["frame"]["objects"]] == [3, 5]
            status, res = await _post(s, server.url + "api/teach", {"label": "mug", "track_id": 3})
            assert status == 200
            for ws, g in ((a, ga), (b, gb)):
                await read_until(ws, g, lambda g: g["state"]["last_teach"] is not None)
            assert ga["state"]["last_teach"] == gb["state"]["last_teach"]
            assert "learned new class 'mug'" in ga["state"]["last_teach"]["message"]
            await a.close()
            await b.close()
    _run(go())


def test_a_page_open_to_other_machines_needs_a_token():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    with pytest.raises(ValueError, match="access token"):
        PageConfig(host="0.0.0.0")
    with pytest.raises(ValueError, match="access token"):
        PageConfig(host="0.0.0.0", token="short")
    with pytest.raises(ValueError, match="port"):
        PageConfig(port=70000)
    state, robot = PageState(), FakeRobot()
    server = PageServer(state, robot, PageConfig(port=0, token="a-long-secret"))
    server.start()
    state.set_frame(frame())
    try:
        async def go():
            async with aiohttp.ClientSession() as s:
                status, res = await _post(s, server.url + "api/teach", {"label": "mug", "track_id": 3})
                assert status == 401 and "token" in res["message"]
                status, _ = await _post(s, server.url + "api/teach", {"label": "mug", "track_id": 3},
                                        headers={"X-Access-Token": "wrong-secret"})
                assert status == 401
                with pytest.raises(aiohttp.WSServerHandshakeError):
                    await s.ws_connect(server.url + "ws")
                ws = await s.ws_connect(server.url + "ws?token=a-long-secret")
                await ws.close()
                status, res = await _post(s, server.url + "api/teach", {"label": "mug", "track_id": 3},
                                          headers={"X-Access-Token": "a-long-secret"})
                assert status == 200 and res["ok"]
                async with s.get(server.url) as r:  # the page itself holds no data and needs no token
                    assert r.status == 200 and "Teach the robot" in await r.text()
                    assert "default-src 'self'" in r.headers["Content-Security-Policy"]
        _run(go())
    finally:
        server.stop()
    assert robot.calls == [("track", "mug", 3)]


def test_robot_faults_become_messages_and_the_server_keeps_serving(served):
    server, state, robot = served

    def broken(label, track_id):
        raise RuntimeError("service exploded")
    robot.teach_track = broken
    status, res = _run(_good(server.url + "api/teach", {"label": "mug", "track_id": 3}))
    assert status == 200 and not res["ok"] and "could not teach" in res["message"]
    status, res = _run(_good(server.url + "api/rename", {"old": "a", "new": "a"}))
    assert status == 400 and "same as the old" in res["message"]


class _LearnerRobot(FakeRobot):
    """The page's teach and rename answered by a real learner controller (vectors made up per name)."""

    def __init__(self) -> None:
        import numpy as np

        from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
        from cbcl_pr_ros.service.controller import LearnerController
        super().__init__()
        self.np = np
        self.c = LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0), "synthetic", d), "synthetic", 4)

    def teach_track(self, label, track_id):
        from cbcl_pr_ros.teaching_page.client import Outcome
        out = self.c.teach(label, self.np.random.default_rng(len(self.c.classes)).normal(1.0, 0.1, (4, 4)))
        return Outcome(out.success, out.message)

    def rename(self, old, new):
        from cbcl_pr_ros.teaching_page.client import Outcome
        out = self.c.rename(old, new)
        return Outcome(out.success, out.message)


def test_the_page_shows_why_a_look_alike_name_is_refused():
    state, robot = PageState(), _LearnerRobot()
    server = PageServer(state, robot, PageConfig(port=0, action_rate_hz=50.0, action_burst=50.0))
    server.start()
    state.set_frame(frame())
    try:
        said = [_run(_good(server.url + "api/teach", {"label": name, "track_id": 3}))[1]
                for name in ("caf\u00e9 mug", "cafe\u0301 mug", "Caf\u00e9 Mug", "\u0301\ufe0f")]
        assert said[0]["ok"] and said[1]["ok"] and "extended known class" in said[1]["message"]
        assert not said[2]["ok"] and "looks like the known class 'caf\u00e9 mug'" in said[2]["message"], said[2]
        assert not said[3]["ok"] and "no letter, digit or symbol" in said[3]["message"], said[3]
        assert robot.c.classes == ["caf\u00e9 mug"]
        _run(_good(server.url + "api/teach", {"label": "bowl", "track_id": 3}))
        status, res = _run(_good(server.url + "api/rename", {"old": "bowl", "new": "CAF\u00c9 MUG"}))
        assert not res["ok"] and "looks like the known class" in res["message"] and robot.c.classes[-1] == "bowl"
    finally:
        server.stop()
