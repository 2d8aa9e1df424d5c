"""Helpers for the robot layer's ROS tests: an isolated ROS environment, node processes, a client."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

REPO = Path(__file__).resolve().parents[2]


def ros_env(domain_id: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"ROS_DOMAIN_ID": str(domain_id), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
                "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
    env.update(extra or {})
    return env


def domain_id(offset: int = 0) -> int:
    """A domain per test process and test (derived from the pid: concurrent runs do not collide)."""
    return 1 + (os.getpid() * 7 + offset) % 200


class NodeProcess:
    """A node in a child process, its output in a log file; stopped with SIGINT, then killed."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.popen = subprocess.Popen(args, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        if not self._log.closed:
            self._log.close()
        return self.popen.returncode


class RosClient:
    """An rclpy node in its own context and domain, spun in a background thread."""

    def __init__(self, domain: int, name: str = "robot_test_client") -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        self.context = Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            self.executor.spin()
        except (ExternalShutdownException, Exception):  # shutdown while spinning
            pass

    def call(self, client: Any, request: Any, timeout: float = 30.0) -> Any:
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f"service {client.srv_name} not available after {timeout} s")
        fut = client.call_async(request)
        t0 = time.monotonic()
        while not fut.done():
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"no answer from {client.srv_name} after {timeout} s")
            time.sleep(0.01)
        return fut.result()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(5)


def wait_until(cond: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return True
        time.sleep(step)
    return cond()


@pytest.fixture
def ros_client(request):
    clients: list[RosClient] = []

    def make(domain: int) -> RosClient:
        c = RosClient(domain)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()
