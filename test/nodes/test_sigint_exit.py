"""Ctrl-C ends every node cleanly: exit code 0, no traceback, nothing left waiting. Under ``ros2 launch``
a node that did not end within the SIGINT grace period was sent SIGTERM ("failed to terminate",
"exit code -15"): the page node with an open page and a teach in flight, and the simulated world.

The exit times are measured by bench/bench_node_exit.py (JSON), not asserted here; the wait below is
only a guard against a hang.
"""
from __future__ import annotations

import json
import socket
import sys
import threading
import time
import urllib.request

import pytest
from ros_testing import Proc, fresh_domain, installed_executable, release_domain, ros_env

pytestmark = [pytest.mark.ros, pytest.mark.slow]

HANG_GUARD_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(exe: str, tmp_path, dom: int, ros_args: list[str]) -> Proc:
    return Proc([sys.executable, str(installed_executable(exe)), "--ros-args", *ros_args], ros_env(dom),
                tmp_path / f"{exe}.log")


def _stop_and_check(proc: Proc) -> None:
    rc = proc.stop(timeout=HANG_GUARD_S)
    out = proc.output()
    assert rc == 0, f"exit code {rc}:\n{out[-3000:]}"
    for bad in ("Traceback", "terminate called", "exception was never retrieved", "Exception in thread"):
        assert bad not in out, out[-3000:]


def _open_page_and_teach(port: int) -> list[threading.Thread]:
    """What a person's browser holds when Ctrl-C comes: a websocket and an action waiting for the learner
    (a rename: no learner runs here, so it waits for one)."""
    from aiohttp import ClientSession  # the page's own library gives the client too
    import asyncio

    ready = threading.Event()

    def websocket() -> None:
        async def hold() -> None:
            async with ClientSession() as s, s.ws_connect(f"http://127.0.0.1:{port}/ws") as ws:
                ready.set()
                async for _ in ws:
                    pass
        try:
            asyncio.run(hold())
        except Exception:  # noqa: BLE001 - the server going away ends it
            pass

    def rename() -> None:
        body = json.dumps({"old": "mug", "new": "cup"}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/rename", body,
                                     {"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=HANG_GUARD_S).read()
        except Exception:  # noqa: BLE001
            pass

    threads = [threading.Thread(target=websocket, daemon=True), threading.Thread(target=rename, daemon=True)]
    threads[0].start()
    ready.wait(30)
    threads[1].start()
    return threads


def test_page_node_exits_cleanly_with_an_open_page(tmp_path):
    dom = fresh_domain()
    try:
        port = _free_port()
        proc = _start("teaching_page_node", tmp_path, dom, ["-p", f"port:={port}"])
        proc.wait_for("teaching page on", 120)
        _open_page_and_teach(port)
        time.sleep(1.0)
        _stop_and_check(proc)
    finally:
        release_domain(dom)


def test_sim_world_exits_cleanly(tmp_path):
    dom = fresh_domain()
    try:
        proc = _start("sim_world_node", tmp_path, dom, ["-p", "rate_hz:=10.0"])
        proc.wait_for("simulated world ready", 240)
        time.sleep(2.0)  # rendering
        _stop_and_check(proc)
    finally:
        release_domain(dom)
