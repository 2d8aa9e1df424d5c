"""The main job end to end, short: `run_demo_session` with 2 classes and few shots, as a user runs it.

Driven through its command line only (``python -m cbcl_pr_ros.nodes.demo --classes 2 --shots 3
--out DIR``) so the test holds however the demo is written inside. It reads what the demo
promises a user: exit status 0, and ``DIR/transcript.json`` with a last phase whose classification
accuracy and whose ``point_at`` answers can be checked.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]
pytest.importorskip("rclpy")
from ros_testing import domain, ros_env  # noqa: E402


def test_short_teaching_session_classifies_and_points(tmp_path):
    out = tmp_path / "demo"
    scratch = tmp_path / "tmp"  # the demo's temporary files: none may stay behind
    scratch.mkdir()
    with domain() as dom:
        run = subprocess.run([sys.executable, "-m", "cbcl_pr_ros.nodes.demo", "--classes", "2", "--shots", "3",
                              "--seed", "0", "--out", str(out)],
                             env=ros_env(dom, {"TMPDIR": str(scratch)}), cwd=tmp_path, capture_output=True,
                             text=True, timeout=900)
    log = run.stdout[-4000:] + run.stderr[-4000:]
    assert run.returncode == 0, log
    transcript = json.loads((out / "transcript.json").read_text())
    last = transcript["phases"][-1]
    # 2 classes, 3 views each: the simulated objects are easy; one miss is allowed for a shared machine
    assert last["accuracy"] >= 0.5, log
    points = last["point"]
    assert points and all(p["success"] for p in points), points
    assert sum(bool(p.get("right_object")) for p in points) >= len(points) - 1, points
    assert (out / "scene.png").is_file()
    # its scratch memory went with it (each run left a cbcl_demo_* folder with a memory file in /tmp)
    assert not list(scratch.glob("cbcl_demo_*")), list(scratch.iterdir())
    for bad in ("Traceback", "context is invalid", "never retrieved"):
        assert bad not in log, log
