"""`pip install .` gives users without ROS the core, features, evaluation and tools."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
import numpy as np
import cbcl_pr_ros
assert cbcl_pr_ros.__file__.startswith(sys.argv[1]), cbcl_pr_ros.__file__
import cbcl_pr_ros.core, cbcl_pr_ros.features, cbcl_pr_ros.evaluation, cbcl_pr_ros.bags.offline_eval
import cbcl_pr_ros.service.params, cbcl_pr_ros.service.controller
ros = sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rosidl_runtime_py', 'sensor_msgs'))
assert not ros, f'ROS modules imported by the ROS-free layers: {ros}'
from cbcl_pr_ros.core import CBCLPRLearner
rng = np.random.default_rng(0)
learner = CBCLPRLearner(backbone='test', feature_dim=8)
learner.teach_increment({'a': rng.normal(0, 1, (6, 8)), 'b': rng.normal(6, 1, (6, 8))})
print(learner.predict(rng.normal(6, 1, (1, 8)))[0].label)
"""


@pytest.mark.slow
def test_pip_install_of_the_ros_free_part(tmp_path: Path, checkout_copy: Path) -> None:
    target = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), "-c", str(ROOT / "requirements" / "constraints.txt"), str(checkout_copy)],
        capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-2000:]
    assert (target / "cbcl_pr_ros" / "core" / "learner.py").is_file()
    assert (target / "share" / "cbcl_pr_ros" / "config" / "cbcl_pr.yaml").is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH")}
    env["PYTHONPATH"] = str(target)
    probe = subprocess.run([sys.executable, "-P", "-c", PROBE, str(target)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.strip().splitlines()[-1] == "b"
