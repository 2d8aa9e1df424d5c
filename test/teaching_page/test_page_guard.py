"""What a web page can and cannot do to the teaching page: DNS rebinding (a foreign Host with its own
matching Origin) is refused on every route, an https or null Origin is another site, malformed
numbers and deep nesting are 400s without a traceback, idle and half-sent connections are closed,
and one client's flood does not cost another client's clicks."""
from __future__ import annotations

import asyncio
import logging
import socket

import aiohttp
import pytest

from cbcl_pr_ros.teaching_page.app import PageConfig, PageServer
from cbcl_pr_ros.teaching_page.guard import CLIENT_COOKIE, ClientBuckets, HostRule, origin_matches
from cbcl_pr_ros.teaching_page.state import PageState

from .fake_robot import FakeRobot, frame


def _serve(**kw):
    state, robot = PageState(), FakeRobot()
    server = PageServer(state, robot, PageConfig(port=0, **kw))
    server.start()
    state.set_frame(frame())
    robot.classes = ["mug", "cup"]
    return server, state, robot


@pytest.fixture
def served():
    server, state, robot = _serve(host_names=["robot1.local"])
    yield server, state, robot
    server.stop()


def _run(coro):
    return asyncio.run(coro)


ACTIONS = [("api/teach", {"label": "mug", "track_id": 3}), ("api/rename", {"old": "mug", "new": "jug"}),
           ("api/forget", {"label": "mug"}), ("api/point", {"label": "mug"})]


async def _status(s, method, url, **kw):
    async with s.request(method, url, **kw) as r:
        return r.status, await r.read()


def test_a_rebinding_site_gets_nothing(served):
    """Host evil.example:PORT with the matching Origin (what a rebound browser sends): state, picture,
    page, files, websocket and every action are refused and nothing reaches the robot."""
    server, _state, robot = served
    evil = f"evil.example:{server.port}"
    headers = {"Host": evil, "Origin": f"http://{evil}"}

    async def go():
        async with aiohttp.ClientSession() as s:
            for path in ("api/state", "api/frame.jpg", "", "static/page.js"):
                status, body = await _status(s, "GET", server.url + path, headers=headers)
                assert status == 403 and b"does not answer to the name 'evil.example'" in body, (path, body)
            for path, body in ACTIONS:
                status, res = await _status(s, "POST", server.url + path, json=body, headers=headers)
                assert status == 403, (path, res)
            with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
                await s.ws_connect(server.url + "ws", headers=headers)
            assert exc.value.status == 403
            # the same requests by the page's own names are served
            for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "robot1.local", "ROBOT1.local:9000"):
                status, _ = await _status(s, "GET", server.url + "api/state", headers={"Host": host})
                assert status == 200, host
            status, _ = await _status(s, "GET", server.url + "api/frame.jpg")
            assert status == 200
            ws = await s.ws_connect(server.url + "ws", headers={"Origin": f"http://127.0.0.1:{server.port}"})
            await ws.close()
    _run(go())
    assert robot.calls == []


def test_an_origin_must_match_scheme_name_and_port(served):
    server, _state, robot = served
    me = f"127.0.0.1:{server.port}"

    async def go():
        async with aiohttp.ClientSession() as s:
            for origin in (f"https://{me}", "null", f"http://127.0.0.1:{server.port + 1}", f"http://localhost:{server.port}",
                           f"http://{me}/path", "http://evil.example"):
                for path, body in ACTIONS:
                    status, _ = await _status(s, "POST", server.url + path, json=body, headers={"Origin": origin})
                    assert status == 403, (origin, path)
                with pytest.raises(aiohttp.WSServerHandshakeError):
                    await s.ws_connect(server.url + "ws", headers={"Origin": origin})
            for path in ("api/state", "api/frame.jpg"):  # a cross-site read is refused too, and no CORS is offered
                async with s.get(server.url + path, headers={"Origin": "http://evil.example"}) as r:
                    assert r.status == 403 and "Access-Control-Allow-Origin" not in r.headers
            status, _ = await _status(s, "POST", server.url + "api/forget", json={"label": "cup"},
                                      headers={"Origin": f"http://{me}"})
            assert status == 200
    _run(go())
    assert robot.calls == [("forget", "cup")]


def test_with_a_token_the_state_and_the_picture_need_it_too():
    server, _state, robot = _serve(token="a-long-secret")
    try:
        async def go():
            async with aiohttp.ClientSession() as s:
                for path in ("api/state", "api/frame.jpg"):
                    assert (await _status(s, "GET", server.url + path))[0] == 401
                    assert (await _status(s, "GET", server.url + path + "?token=a-long-secret"))[0] == 200
        _run(go())
    finally:
        server.stop()


def test_host_and_origin_rules_by_themselves():
    rule = HostRule("127.0.0.1", ["Robot1.local"])
    for ok in ("127.0.0.1:8080", "localhost", "[::1]:8080", "robot1.local:8080", "10.0.0.7"):
        assert rule.refusal(ok) == "", ok
    for bad in ("evil.example:8080", "127.0.0.1.evil.example", "localhost.", "", None, "a@127.0.0.1",
                "127.0.0.1:99999", "127.0.0.1:x", "robot1.local/x"):
        assert rule.refusal(bad) != "", bad
    with pytest.raises(ValueError, match="plain host name"):
        HostRule("127.0.0.1", ["http://robot1.local"])
    with pytest.raises(ValueError, match="plain host name"):
        PageConfig(host_names=["robot1.local:8080"])
    assert origin_matches("http://127.0.0.1:8080", "127.0.0.1:8080")
    assert origin_matches("http://robot1.local", "robot1.local:80")
    assert not origin_matches("https://127.0.0.1:8080", "127.0.0.1:8080")
    assert not origin_matches("http://127.0.0.1:8081", "127.0.0.1:8080")
    assert not origin_matches("null", "127.0.0.1:8080")


@pytest.mark.parametrize("body", [
    pytest.param(b'{"label": "mug", "track_id": 1e400}', id="track_id-1e400"),
    pytest.param(b'{"label": "mug", "track_id": -1e400}', id="track_id-minus-1e400"),
    pytest.param(b'{"label": "mug", "track_id": NaN}', id="track_id-NaN"),
    pytest.param(b'{"label": "mug", "box": [1e400, 0, 5, 5]}', id="box-1e400"),
    pytest.param(b'{"label": "mug", "track_id": ' + b"9" * 4000 + b"}", id="track_id-4000-digits"),
    pytest.param(b'{"label": "mug", "box": [0, 0, ' + b"9" * 4000 + b", 5]}", id="box-4000-digits"),
    pytest.param(b'{"label": "mug", "track_id": ' + b"9" * 6000 + b"}", id="track_id-6000-digits"),
    pytest.param(b"[" * 8000, id="nesting-8000"),
    pytest.param(b'{"label": ' + b"[" * 8000 + b"}", id="label-nesting-8000"),
])
def test_malformed_numbers_and_deep_nesting_are_400_without_a_traceback(served, body, caplog):
    server, _state, robot = served

    async def go():
        async with aiohttp.ClientSession() as s:
            async with s.post(server.url + "api/teach", data=body,
                              headers={"Content-Type": "application/json"}) as r:
                return r.status, await r.text()
    with caplog.at_level(logging.DEBUG):
        status, text = _run(go())
    assert status == 400, text
    assert len(text) < 300 and "Traceback" not in text
    assert "whole number" in text or "not valid JSON" in text, text
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    assert robot.calls == []


def _closed_by_server(sock: socket.socket) -> bool:
    """Read until the server closes (True) or 30 s pass without it (False)."""
    sock.settimeout(30.0)
    try:
        while sock.recv(4096):
            pass
        return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def test_idle_and_half_sent_connections_are_closed():
    server, _state, robot = _serve(idle_timeout_s=0.5, read_timeout_s=0.5)
    try:
        idle = socket.create_connection(("127.0.0.1", server.port))
        half = socket.create_connection(("127.0.0.1", server.port))
        half.sendall(b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends its headers
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.sendall(b"POST /api/forget HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"label\":")  # never sends the rest of its body
        for sock in (idle, half, slow):
            with sock:
                assert _closed_by_server(sock)
        with socket.create_connection(("127.0.0.1", server.port)) as kept:  # a whole request is answered
            kept.sendall(b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            kept.settimeout(30.0)
            assert kept.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        server.stop()
    assert robot.calls == []


def _get(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        sock.settimeout(30.0)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_no_static_path_reaches_outside_the_page_files_and_a_long_name_is_a_plain_404(served, caplog):
    """Encoded dots, backslashes, NUL and absolute paths get 404; a 5,000-character file name used to
    answer 500 "internal error (OSError)" with a warning in the log per request (the file system refuses
    the name): now a plain 404, nothing logged."""
    server, _state, robot = served
    assert _get(server.port, "/static/page.js").startswith(b"HTTP/1.1 200")
    caplog.set_level(logging.WARNING)
    for path in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py", "/static/..%5capp.py",
                 "/static//etc/passwd", "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/static/page.js%00.png",
                 "/../../etc/passwd", "/static/" + "a" * 5000, "/static/" + "%2e" * 2000):
        answer = _get(server.port, path)
        assert answer.startswith(b"HTTP/1.1 404"), (path[:60], answer[:200])
        assert b"def " not in answer and b"root:" not in answer
    assert not [r for r in caplog.records if "page request" in r.getMessage()]
    assert robot.calls == []


def test_one_clients_flood_does_not_cost_another_clients_clicks():
    """Two pages, each loaded once (each gets its own client id), and a script without one: a flood of
    forgets from the second page and from the script is cut to their own buckets, and the first
    page's click right after is still served (the refill is slow here, so no timing matters)."""
    server, _state, robot = _serve(action_rate_hz=0.05, action_burst=4.0)
    robot.classes = [f"c{i}" for i in range(40)] + ["mug"]

    async def go():
        jar = lambda: aiohttp.CookieJar(unsafe=True)  # noqa: E731  (127.0.0.1 is an IP: allow its cookies)
        async with aiohttp.ClientSession(cookie_jar=jar()) as user, \
                aiohttp.ClientSession(cookie_jar=jar()) as flooder, aiohttp.ClientSession() as script:
            for s in (user, flooder):
                async with s.get(server.url) as r:
                    assert r.status == 200 and CLIENT_COOKIE in r.cookies
            assert {c.value for c in user.cookie_jar} != {c.value for c in flooder.cookie_jar}
            flood = await asyncio.gather(*[_status(flooder, "POST", server.url + "api/forget", json={"label": f"c{i}"})
                                           for i in range(30)])
            scripted = await asyncio.gather(*[_status(script, "POST", server.url + "api/forget",
                                                      json={"label": f"c{i}"}) for i in range(30, 40)])
            mine = await _status(user, "POST", server.url + "api/forget", json={"label": "mug"})
            return [c for c, _ in flood], [c for c, _ in scripted], mine[0]
    try:
        flood, scripted, mine = _run(go())
    finally:
        server.stop()
    assert flood.count(429) >= 24 and scripted.count(429) >= 4  # each flood cut to its own bucket (burst 4)
    assert mine == 200 and ("forget", "mug") in robot.calls


def test_client_ids_are_handed_out_at_a_bounded_rate_and_kept_bounded():
    buckets = ClientBuckets(burst=2.0, max_clients=5)
    ids = [buckets.new_id(0.0) for _ in range(20)]
    minted = [i for i in ids if i is not None]
    assert len(minted) == 8 and len(set(minted)) == 8  # a burst of 8, not one per page load
    assert not buckets.known(minted[0]) and all(buckets.known(i) for i in minted[3:])  # the 5 newest kept
    assert [buckets.allow(minted[-1], "127.0.0.1", 0.0, 1.0) for _ in range(3)] == [True, True, False]
    assert buckets.allow(minted[-2], "127.0.0.1", 0.0, 1.0)  # another id: its own bucket
    assert [buckets.allow(None, "127.0.0.1", 0.0, 1.0) for _ in range(3)] == [True, True, False]
    assert buckets.allow("forged", "127.0.0.1", 0.0, 1.0) is False  # an unknown id shares the address's


def _raw(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head)
        sock.settimeout(30.0)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_header_bytes_that_are_not_text_get_a_plain_refusal_and_no_traceback(caplog):
    """A token header of bytes that are not UTF-8 used to end in aiohttp's "500 Internal Server Error"
    with a traceback logged per request (the token's encode raised in the guard), and so did a
    websocket handshake whose key is not ASCII: now 401 and 400, nothing logged."""
    server, _state, robot = _serve(token="secret-token")
    caplog.set_level(logging.DEBUG)
    try:
        head = b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Access-Token: \xff\xfe\r\nConnection: close\r\n\r\n"
        answer = _raw(server.port, head)
        assert answer.startswith(b"HTTP/1.1 401") and b"access token" in answer, answer[:200]
        ws = (b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Access-Token: secret-token\r\nConnection: Upgrade\r\n"
              b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: \xff\xff\xff\r\n\r\n")
        answer = _raw(server.port, ws)
        assert answer.startswith(b"HTTP/1.1 400") and b"not a websocket handshake" in answer, answer[:200]
        good = b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Access-Token: secret-token\r\nConnection: close\r\n\r\n"
        assert _raw(server.port, good).startswith(b"HTTP/1.1 200")
    finally:
        server.stop()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], \
        [r.getMessage() for r in caplog.records]
    assert robot.calls == []


def test_a_client_that_hangs_up_mid_body_leaves_no_log_line(caplog):
    """A POST whose client closed before its body ended was logged as "page request ... failed:
    ConnectionResetError" at warning level, one line per request: any local script could write the
    log at its own connection rate. It is the client's doing: nothing is logged, nothing reaches the
    robot, and the page goes on answering."""
    server, _state, robot = _serve()
    caplog.set_level(logging.DEBUG)
    try:
        for _ in range(10):
            with socket.create_connection(("127.0.0.1", server.port)) as sock:
                sock.sendall(b"POST /api/forget HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 100\r\n\r\n{\"label\":")
        good = b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        assert _raw(server.port, good).startswith(b"HTTP/1.1 200")  # the page still answers
    finally:
        server.stop()
    assert not [r for r in caplog.records if r.name.startswith(("cbcl_pr_ros", "aiohttp"))
                and r.levelno >= logging.WARNING], [r.getMessage() for r in caplog.records]
    assert robot.calls == []
