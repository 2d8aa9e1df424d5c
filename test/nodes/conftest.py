"""Helpers for the node tests: isolated ROS environments, child processes, a client node, images."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "cbcl_pr.yaml"


def installed_executable(name: str) -> Path:
    """The executable as colcon installed it (lib/cbcl_pr_ros/<name>)."""
    import cbcl_pr_ros

    pkg = Path(cbcl_pr_ros.__file__).absolute()  # not resolve(): symlink-install
    # install/cbcl_pr_ros/lib/python3.X/site-packages/cbcl_pr_ros/__init__.py -> install/cbcl_pr_ros
    for parent in pkg.parents:
        cand = parent / "lib" / "cbcl_pr_ros" / name
        if cand.exists():
            return cand
    cand = REPO / "install" / "cbcl_pr_ros" / "lib" / "cbcl_pr_ros" / name
    if cand.exists():
        return cand
    raise FileNotFoundError(f"{name} is not installed (run scripts/setup)")


def ros_env(domain_id: int) -> dict[str, str]:
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(domain_id)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(REPO / "config" / "fastdds_profile.xml"))
    env["OMP_NUM_THREADS"] = "1"
    return env


class Proc:
    """A node process whose output goes to a log file; stopped with SIGINT, then killed."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.popen = subprocess.Popen(
            args, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGINT, wait; kill if it does not end. Returns the exit code (None never)."""
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
    """Start an installed executable with config/cbcl_pr.yaml plus ``params`` for every node in it.

    The overrides go in a second params file under ``/**/<node>`` keys: a ``-p`` argument would lose
    against the node-specific entries of the config file.
    """
    import yaml

    args = [sys.executable, str(installed_executable(executable))] + (extra or [])
    ros = ["--ros-args", "--params-file", str(CONFIG)]
    if params:
        over = log_dir / f"{executable}{tag}.params.yaml"
        over.write_text(yaml.safe_dump({f"/**/{n}": {"ros__parameters": dict(params)}
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
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        self.context = Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            while self.context.ok():
                self.executor.spin_once(timeout_sec=0.05)
        except (ExternalShutdownException, Exception):
            pass

    def call(self, srv_type: Any, name: str, request: Any, timeout: float = 60.0) -> Any:
        client = self.node.create_client(srv_type, name)
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                raise TimeoutError(f"service {name} not available after {timeout} s")
            fut = client.call_async(request)
            done = threading.Event()
            fut.add_done_callback(lambda _f: done.set())
            if not done.wait(timeout):
                raise TimeoutError(f"service {name} did not answer in {timeout} s")
            return fut.result()
        finally:
            self.node.destroy_client(client)

    def wait_for_service(self, srv_type: Any, name: str, timeout: float, proc: "Proc | None" = None) -> bool:
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
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)
        self._thread.join(2.0)


def wait_until(pred: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


# ---------------------------------------------------------------------------- images
_PHOTOS = {"cat": "chelsea", "coffee": "coffee", "rocket": "rocket", "astronaut": "astronaut"}


def photo(name: str) -> np.ndarray:
    import skimage.data

    return np.ascontiguousarray(getattr(skimage.data, _PHOTOS[name])()[:, :, :3])


def views(name: str, n: int, seed: int, size: tuple[int, int] = (480, 640)) -> list[np.ndarray]:
    """n different views of a photo: random crops (60-95 % side), flips, brightness, resized to size."""
    import cv2

    rng = np.random.default_rng(seed)
    base = photo(name)
    h, w = base.shape[:2]
    out = []
    for _ in range(n):
        s = rng.uniform(0.6, 0.95)
        ch, cw = int(h * s), int(w * s)
        y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
        crop = base[y:y + ch, x:x + cw]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        crop = np.clip(crop.astype(np.float32) * rng.uniform(0.8, 1.2), 0, 255).astype(np.uint8)
        out.append(np.ascontiguousarray(cv2.resize(crop, (size[1], size[0]), interpolation=cv2.INTER_AREA)))
    return out


def image_msg(rgb: np.ndarray, stamp_ns: int = 0, frame_id: str = "camera") -> Any:
    from cbcl_pr_ros.nodes.conversions import ns_to_stamp, rgb_to_image_msg
    from std_msgs.msg import Header

    return rgb_to_image_msg(rgb, Header(stamp=ns_to_stamp(stamp_ns), frame_id=frame_id))


def fresh_domain() -> int:
    return random.Random(os.getpid() * 7919 + time.time_ns()).randint(1, 200)


@pytest.fixture
def domain_id() -> int:
    return fresh_domain()


@pytest.fixture
def helpers():
    """The module's helpers as one object (tests run in importlib mode, so no sibling imports)."""
    import types

    return types.SimpleNamespace(
        start_node=start_node, Client=Client, wait_until=wait_until, views=views, photo=photo,
        image_msg=image_msg, installed_executable=installed_executable, ros_env=ros_env, Proc=Proc,
        CONFIG=CONFIG, REPO=REPO)
