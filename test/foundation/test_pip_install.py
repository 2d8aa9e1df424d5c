"""`pip install .` gives users without ROS the core, features, evaluation and working bag tools."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
import numpy as np
import cbcl_pr_ros
assert cbcl_pr_ros.__file__.startswith(sys.argv[1]), cbcl_pr_ros.__file__
import cbcl_pr_ros.core, cbcl_pr_ros.features, cbcl_pr_ros.evaluation, cbcl_pr_ros.bags.offline_eval
import cbcl_pr_ros.settings.params, cbcl_pr_ros.service.controller
ros = sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rosidl_runtime_py', 'sensor_msgs'))
assert not ros, f'ROS modules imported by the ROS-free layers: {ros}'
from cbcl_pr_ros.settings.params import default_config_path
from cbcl_pr_ros.bags import find_msg_dir
print(default_config_path()); print(find_msg_dir())
from cbcl_pr_ros.core import CBCLPRLearner
rng = np.random.default_rng(0)
learner = CBCLPRLearner(backbone='test', feature_dim=8)
learner.teach_increment({'a': rng.normal(0, 1, (6, 8)), 'b': rng.normal(6, 1, (6, 8))})
print(learner.predict(rng.normal(6, 1, (1, 8)))[0].label)
"""


@pytest.mark.slow
def test_pip_install_gives_working_bag_tools(tmp_path: Path, checkout_copy: Path) -> None:
    """Install a copy of the checkout into a scratch prefix (dependencies from this venv), then use
    it as a user would, from a directory outside any checkout and with no ROS environment."""
    prefix = tmp_path / "prefix"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--prefix", str(prefix), "-c", str(ROOT / "requirements" / "constraints.txt"), str(checkout_copy)],
        capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-2000:]
    site = Path(sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)}))
    share = prefix / "share" / "cbcl_pr_ros"
    assert (site / "cbcl_pr_ros" / "core" / "learner.py").is_file()
    # the teaching page's files ship in the package (no CDN, no build step)
    assert all((site / "cbcl_pr_ros" / "teaching_page" / "static" / f).is_file()
               for f in ("index.html", "page.js", "page.css"))
    assert (share / "config" / "cbcl_pr.yaml").is_file() and (share / "msg" / "TeachingEvent.msg").is_file()
    # and so do the learned proposals' weights and their training log (object_proposals: learned)
    assert all((site / "cbcl_pr_ros" / "perception" / "weights" / f).is_file()
               for f in ("segmenter.safetensors", "segmenter_train_log.json"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH", "CBCL_PR_ROS_MSG_DIR", "COLCON_PREFIX_PATH")}
    env["PYTHONPATH"] = str(site)
    work = tmp_path / "elsewhere"
    work.mkdir()

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), cwd=work, env=env, capture_output=True, text=True, timeout=600)

    probe = run(sys.executable, "-P", "-c", PROBE, str(site))
    assert probe.returncode == 0, probe.stderr[-3000:]
    config_path, msg_dir, label = probe.stdout.strip().splitlines()[-3:]
    assert Path(config_path) == share / "config" / "cbcl_pr.yaml" and Path(msg_dir) == share / "msg"
    assert label == "b"

    bag = work / "session"
    rec = run(str(prefix / "bin" / "cbcl-bag-record"), "--simulate", str(bag), "--categories", "mug", "duck",
              "--shots", "2", "--test-views", "1", "--image-size", "64")
    assert rec.returncode == 0, rec.stderr[-3000:]
    assert json.loads(rec.stdout.strip().splitlines()[-1])
    ev = run(str(prefix / "bin" / "cbcl-bag-eval"), str(bag), "-q", "--set", "classifier=ncm",
             "--json", str(work / "r.json"))
    assert ev.returncode == 0, ev.stderr[-3000:]
    report = json.loads((work / "r.json").read_text())
    assert [inc["n_test"] for inc in report["increments"]] == [1, 2]
    assert "overall accuracy" in ev.stdout
