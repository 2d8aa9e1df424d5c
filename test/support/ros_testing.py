"""The one set of rclpy test helpers: isolated ROS domains, node processes, a spinning client.

Every ROS test (test/nodes, test/robot, test/bags, test/foundation) takes its domain id from
:func:`fresh_domain`, so concurrent test runs on one machine (several checkouts, CI jobs) never
share a graph: a domain is held through an exclusive ``flock`` on a file under the temp directory
until it is released or the process ends, and every other run skips a held one.

Importable as ``ros_testing`` in every test (pytest.ini: ``pythonpath = test/support``).
"""
from __future__ import annotations

import contextlib
import copy
import fcntl
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["REPO", "CONFIG", "fresh_domain", "release_domain", "domain", "ros_env", "installed_executable",
           "Proc", "start_node", "Client", "wait_until", "isolated_context"]

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "cbcl_pr.yaml"
# Fast DDS maps a domain to UDP ports; ids up to 232 are valid. 0 (the default) stays free for users.
_DOMAINS = range(1, 233)
_LOCK_DIR = Path(tempfile.gettempdir()) / "cbcl_pr_ros_test_domains"
_held: dict[int, int] = {}
_held_lock = threading.Lock()


def fresh_domain() -> int:
    """A ROS domain id no other process on this machine holds; held until released or exit."""
    _LOCK_DIR.mkdir(exist_ok=True)
    ids = list(_DOMAINS)
    random.Random(os.getpid() ^ time.time_ns()).shuffle(ids)
    with _held_lock:
        for d in ids:
            if d in _held:
                continue
            fd = os.open(_LOCK_DIR / f"{d}.lock", os.O_CREAT | os.O_RDWR, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            _held[d] = fd
            return d
    raise RuntimeError(f"every ROS domain id in {_DOMAINS} is held by another test process")


def release_domain(domain_id: int) -> None:
    """Give a domain from :func:`fresh_domain` back (no-op for one not held here)."""
    with _held_lock:
        fd = _held.pop(domain_id, None)
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def domain() -> Iterator[int]:
    """A held domain id for the ``with`` body."""
    d = fresh_domain()
    try:
        yield d
    finally:
        release_domain(d)


def ros_env(domain_id: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process on ``domain_id``, discovery limited to this host."""
    env = dict(os.environ)
    env.update({"ROS_DOMAIN_ID": str(domain_id), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
                "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
    env.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(REPO / "config" / "fastdds_profile.xml"))
    env.update(extra or {})
    return env


@contextlib.contextmanager
def isolated_context(domain_id: int, args: list[str] | None = None) -> Iterator[Any]:
    """An rclpy context of its own on ``domain_id`` (shut down at the end)."""
    import rclpy

    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    context = rclpy.Context()
    rclpy.init(args=args, context=context, domain_id=domain_id)
    try:
        yield context
    finally:
        context.try_shutdown()


def installed_executable(name: str) -> Path:
    """The executable as colcon installed it (lib/cbcl_pr_ros/<name>)."""
    import cbcl_pr_ros

    pkg = Path(cbcl_pr_ros.__file__).absolute()  # not resolve(): symlink-install
    for parent in pkg.parents:
        cand = parent / "lib" / "cbcl_pr_ros" / name
        if cand.exists():
            return cand
    cand = REPO / "install" / "cbcl_pr_ros" / "lib" / "cbcl_pr_ros" / name
    if cand.exists():
        return cand
    raise FileNotFoundError(f"{name} is not installed (run scripts/setup)")


class Proc:
    """A child process whose output goes to a log file; stopped with SIGINT, then killed."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path, cwd: Path | None = None) -> None:
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.popen = subprocess.Popen(
            args, env=env, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float) -> None:
        """Until ``needle`` appears in the output; AssertionError (with the output) otherwise."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.output():
                return
            if self.popen.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{needle!r} not seen in {self.log_path}:\n{self.output()[-3000:]}")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGINT, wait (generous: a loaded CI box can take tens of seconds to exit torch); kill if it does not end. Returns the exit code."""
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


def start_node(executable: str, domain_id: int, log_dir: Path, params: dict[str, Any] | None = None,
               extra: list[str] | None = None, tag: str = "") -> Proc:
    """Start an installed executable with config/cbcl_pr.yaml plus ``params`` for the perception nodes.

    The overrides go in a second params file under ``/**/<node>`` keys: a ``-p`` argument would lose
    against the node-specific entries of the config file.
    """
    import yaml

    args = [sys.executable, str(installed_executable(executable))] + (extra or [])
    ros = ["--ros-args", "--params-file", str(CONFIG)]
    if params:
        over = log_dir / f"{executable}{tag}.params.yaml"
        # a copy per node: yaml writes a shared nested dict (qos_overrides) as an alias, which rcl refuses
        over.write_text(yaml.safe_dump({f"/**/{n}": {"ros__parameters": copy.deepcopy(dict(params))}
                                        for n in ("learner", "feature_extractor")}))
        ros += ["--params-file", str(over)]
    if "--ros-args" in args:
        i = args.index("--ros-args")
        args = args[:i] + ros + args[i + 1:]
    else:
        args += ros
    return Proc(args, ros_env(domain_id), log_dir / f"{executable}{tag}.log")


class Client:
    """An rclpy node in its own context and domain, spun in a background thread."""

    def __init__(self, domain_id: int, name: str = "test_client") -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._clients: dict[tuple[Any, str], Any] = {}
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            while self.context.ok():
                self.executor.spin_once(timeout_sec=0.05)
        except (ExternalShutdownException, Exception):  # shutdown while spinning
            pass

    def request(self, client: Any, request: Any, timeout: float = 60.0) -> Any:
        """One request on an existing ``client``; TimeoutError if the service is absent or silent."""
        from cbcl_pr_ros.nodes.service_call import call_service

        return call_service(client, request, timeout, ready_timeout_s=timeout)

    def call(self, srv_type: Any, name: str, request: Any, timeout: float = 60.0) -> Any:
        """One request to service ``name`` through a client made for it (the documented client QoS)."""
        from cbcl_pr_ros.nodes.qos import service_qos

        # one client per service, kept: a new client waits for discovery to settle (service_call)
        key = (srv_type, name)
        if key not in self._clients:
            self._clients[key] = self.node.create_client(srv_type, name, qos_profile=service_qos())
        return self.request(self._clients[key], request, timeout)

    def wait_for_service(self, srv_type: Any, name: str, timeout: float, proc: Proc | None = None) -> bool:
        """True once the service is there; False at the timeout or as soon as ``proc`` has exited."""
        client = self.node.create_client(srv_type, name)
        try:
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                if client.wait_for_service(timeout_sec=1.0):
                    return True
                if proc is not None and proc.popen.poll() is not None:
                    return False
            return False
        finally:
            self.node.destroy_client(client)

    def collect(self, msg_type: Any, topic: str, qos: Any = 10) -> list:
        got: list = []
        self.node.create_subscription(msg_type, topic, got.append, qos)
        return got

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(2.0)


def wait_until(pred: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
