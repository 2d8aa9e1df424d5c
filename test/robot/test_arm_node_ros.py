"""The arm node over real rclpy, in child processes: PointAt answers, refusals, and the Baxter backend
against a message package of Baxter's exact JointCommand definition (built here with colcon)."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from cbcl_pr_ros.robot import baxter

from .conftest import REPO, NodeProcess, fresh_domain, ros_env, wait_until

FIXTURE = REPO / "test" / "fixtures" / "baxter_core_msgs"
REACHABLE = (0.7, -0.25, -0.12)


def _arm_params(tmp_path: Path, **params) -> Path:
    base = {"object_poses": [f"mug:{REACHABLE[0]},{REACHABLE[1]},{REACHABLE[2]}", "far:2.0,0.0,0.0"]}
    path = tmp_path / "arm.params.yaml"
    path.write_text(yaml.safe_dump({"/**/arm": {"ros__parameters": {**base, **params}}}))
    return path


def _start_arm(tmp_path: Path, domain: int, params: Path, env_extra: dict | None = None,
               prelude: str = "") -> NodeProcess:
    cmd = f"exec {sys.executable} -P -m cbcl_pr_ros.nodes.arm --ros-args --params-file {params}"
    return NodeProcess(["bash", "-c", f"{prelude}{cmd}"], ros_env(domain, env_extra), tmp_path / "arm.log")


def test_point_at_service_refuses_unknown_and_unreachable_and_points_at_known(tmp_path, ros_client):
    from sensor_msgs.msg import JointState

    from cbcl_pr_ros.srv import PointAt

    dom = fresh_domain()
    proc = _start_arm(tmp_path, dom, _arm_params(tmp_path, backend="sim"))
    try:
        c = ros_client(dom)
        commands: list[JointState] = []
        c.node.create_subscription(JointState, "joint_command", commands.append, 10)
        cli = c.node.create_client(PointAt, "point_at")
        assert wait_until(lambda: c.node.count_publishers("joint_command") > 0, 60), proc.output()

        for label, why in (("spaceship", "spaceship"), ("far", "reach"), ("", "empty label")):
            res = c.request(cli, PointAt.Request(label=label), timeout=60)
            assert not res.success and why in res.message, (label, res.message)
            assert list(res.joint_positions) == []
        time.sleep(0.5)
        assert commands == [], "a refused request must not move the arm"

        res = c.request(cli, PointAt.Request(label="mug"), timeout=60)
        assert res.success, res.message
        assert res.pointing_error_m < 0.03
        assert [res.target.point.x, res.target.point.y, res.target.point.z] == pytest.approx(REACHABLE)
        assert wait_until(lambda: len(commands) == 1, 10), proc.output()
        cmd = commands[0]
        assert list(cmd.name) == baxter.arm_joint_names("right") == list(res.joint_names)
        assert list(cmd.position) == pytest.approx(list(res.joint_positions))
        for n, v in zip(cmd.name, cmd.position):
            lo, hi = baxter.JOINT_LIMITS[n]
            assert lo - 1e-6 <= v <= hi + 1e-6, n
    finally:
        proc.stop()


def _fixture_hash() -> str:
    h = hashlib.sha256()
    for p in sorted(FIXTURE.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(FIXTURE)).encode() + b"\0" + p.read_bytes())
    h.update(sys.executable.encode())
    return h.hexdigest()[:16]


def _build_fixture() -> Path:
    """colcon-build the fixture package once per content hash; returns its install dir.

    The package is copied out of the checkout first: CMake refuses exported paths inside a package's
    source directory, and the venv (whose headers rosidl exports) lives in the checkout.
    """
    if shutil.which("colcon") is None:
        pytest.skip("colcon is not on PATH (source scripts/env.sh)")
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"cbcl-baxter-fixture-{_fixture_hash()}"
    root.mkdir(parents=True, exist_ok=True)
    install = root / "install"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / ".complete").exists():
            return install
        for d in ("src", "build", "install", "log"):
            shutil.rmtree(root / d, ignore_errors=True)
        shutil.copytree(FIXTURE, root / "src" / "baxter_core_msgs")
        res = subprocess.run(
            ["colcon", "--log-base", str(root / "log"), "build", "--base-paths", str(root / "src"),
             "--build-base", str(root / "build"), "--install-base", str(install),
             "--event-handlers", "console_direct-", "status-", "summary-"],
            cwd=root, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, f"colcon build of the fixture failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        (root / ".complete").write_text("ok\n")
    return install


@pytest.mark.slow
def test_baxter_backend_streams_position_commands_with_baxter_message(tmp_path):
    install = _build_fixture()
    dom = fresh_domain()
    prelude = f"source {install}/local_setup.bash && "
    proc = _start_arm(tmp_path, dom, _arm_params(tmp_path, backend="baxter", rate_hz=20.0, hold_s=3.0),
                      prelude=prelude)
    try:
        listen = subprocess.run(
            ["bash", "-c", f"{prelude}exec {sys.executable} -P {REPO / 'test' / 'robot' / '_baxter_listener.py'} mug 2.0"],
            env=ros_env(dom), capture_output=True, text=True, timeout=180)
        assert listen.returncode == 0, listen.stderr[-3000:] + proc.output()
        out = json.loads(listen.stdout.strip().splitlines()[-1])
    finally:
        proc.stop()
    assert out["constants"] == [baxter.POSITION_MODE, baxter.VELOCITY_MODE, baxter.TORQUE_MODE,
                                baxter.RAW_POSITION_MODE] == [1, 2, 3, 4]
    assert out["success"], out.get("message", out) + proc.output()
    msgs = out["messages"]
    assert len(msgs) >= 10, f"{len(msgs)} JointCommands in 2 s\n{proc.output()}"
    names = ["right_s0", "right_s1", "right_e0", "right_e1", "right_w0", "right_w1", "right_w2"]
    for m in msgs:
        assert m["mode"] == 1
        assert m["names"] == names
        assert m["command"] == pytest.approx(out["joint_positions"])
    t = np.array([m["t"] for m in msgs])
    rate = (len(t) - 1) / (t[-1] - t[0])
    # The rate and the largest gap are figures of the machine's load, not pass marks (no timing
    # assertions in tests); the stream's period comes from rate_hz, checked without ROS.
    print(f"Baxter JointCommand: {len(msgs)} messages in {t[-1] - t[0]:.2f} s, {rate:.1f} Hz, "
          f"largest gap {np.max(np.diff(t)):.3f} s (Baxter drops out after 0.2 s)")


def test_baxter_backend_without_message_package_fails_clearly(tmp_path, monkeypatch):
    from cbcl_pr_ros.robot.backends import load_baxter_joint_command

    monkeypatch.setitem(sys.modules, "baxter_core_msgs", None)
    monkeypatch.setitem(sys.modules, "baxter_core_msgs.msg", None)
    with pytest.raises(RuntimeError, match="baxter_core_msgs"):
        load_baxter_joint_command()
