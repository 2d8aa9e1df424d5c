"""Issue 21, outcome 5: every executable's ``--help`` prints usage and exits 0 without starting
anything, and the examples in cbcl-eval's help parse (they used to fail: "unrecognized arguments")."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
from ros_testing import installed_executable, ros_env

NODES = ["learner_node", "feature_extractor_node", "arm_node", "sim_world_node", "teaching_page_node",
         "teaching_session", "record_session", "replay_session", "run_demo_session"]
TOOLS = ["record", "render_dataset", "evaluate", "bag_eval"]  # cbcl-bag-record, cbcl-render-dataset, ...


def _run(args: list[str]) -> subprocess.CompletedProcess:
    # a free domain is not needed: nothing may start; a wrong start would hang, the timeout catches it
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=ros_env(0))


@pytest.mark.ros
@pytest.mark.parametrize("exe", NODES)
def test_node_help_prints_usage_and_starts_nothing(exe):
    res = _run([sys.executable, str(installed_executable(exe)), "--help"])
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-2000:]
    assert "usage:" in out
    assert not re.search(r"\[(INFO|WARN|ERROR)\]", out), out[-2000:]  # no node logged anything: none started


@pytest.mark.parametrize("tool", TOOLS)
def test_tool_help_exits_zero(tool):
    res = _run([sys.executable, "-P", "-m", f"cbcl_pr_ros.cli.{tool}", "--help"])
    assert res.returncode == 0 and "usage" in res.stdout, res.stdout + res.stderr


def test_cbcl_eval_help_examples_parse():
    from cbcl_pr_ros.cli import evaluate

    examples = [ln.split("#")[0].strip() for ln in (evaluate.__doc__ or "").splitlines()
                if ln.strip().startswith("cbcl-eval ")]
    assert len(examples) >= 4
    for ex in examples:
        args = evaluate.build_parser().parse_args(shlex.split(ex)[1:])  # SystemExit(2) on a bad example
        assert args.command
    a = evaluate.build_parser().parse_args(["fsil-table", "--seeds", "5"])
    b = evaluate.build_parser().parse_args(["--seeds", "5", "fsil-table"])
    assert a.seeds == b.seeds == 5
