"""Small things a new user met: the exception the docs name is the one raised."""
from __future__ import annotations

import pytest

pytest.importorskip("rclpy")


class _Absent:
    srv_name = "/teach_class"

    def wait_for_service(self, timeout_sec: float) -> bool:
        return False


def test_a_missing_learner_raises_learner_unavailable_by_that_name():
    from cbcl_pr_ros.nodes.learner_client import LearnerClient, LearnerUnavailable
    from cbcl_pr_ros.nodes.service_call import ServiceUnavailable

    with pytest.raises(LearnerUnavailable) as exc:
        LearnerClient._call(None, _Absent(), object(), 0.1)  # noqa: SLF001 - the one place calls go through
    assert type(exc.value).__name__ == "LearnerUnavailable" and isinstance(exc.value, ServiceUnavailable)
    assert "/teach_class" in str(exc.value)


def test_bag_eval_prints_its_table_without_a_page_of_info_lines_first(tmp_path):
    import subprocess
    import sys

    from cbcl_pr_ros.cli import record

    bag = tmp_path / "s"
    assert record.main(["--simulate", str(bag), "--categories", "mug", "duck", "--shots", "1",
                        "--test-views", "1", "--image-size", "64", "--storage", "sqlite3"]) == 0
    res = subprocess.run([sys.executable, "-P", "-m", "cbcl_pr_ros.cli.bag_eval", str(bag), "--set",
                          "classifier=ncm"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "INFO" not in res.stderr and "overall accuracy" in res.stdout
    assert res.stdout.splitlines()[1].split()[:2] == ["inc", "taught"]  # the table comes second
    verbose = subprocess.run([sys.executable, "-P", "-m", "cbcl_pr_ros.cli.bag_eval", str(bag), "-v", "--set",
                              "classifier=ncm"], capture_output=True, text=True, timeout=600)
    assert "INFO" in verbose.stderr


def _replay_tools(given: dict) -> list:
    """replay.launch.py's replay actions, evaluated with stand-ins for launch (not in the venv)."""
    import sys
    import types
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    made: list = []

    def kind(name):
        def make(*args, **kwargs):
            made.append((name, args, kwargs))
            return (name, args, kwargs)
        return make

    class Config:
        def __init__(self, name):
            self.name = name

        def perform(self, _ctx):
            return given[self.name]

    mods = {"launch": {"LaunchDescription": kind("LaunchDescription")},
            "launch.actions": {n: kind(n) for n in ("DeclareLaunchArgument", "IncludeLaunchDescription",
                                                    "OpaqueFunction", "RegisterEventHandler", "Shutdown")},
            "launch.conditions": {"IfCondition": kind("IfCondition")},
            "launch.event_handlers": {"OnProcessExit": kind("OnProcessExit")},
            "launch.launch_description_sources": {"PythonLaunchDescriptionSource": kind("Source")},
            "launch.substitutions": {"LaunchConfiguration": Config},
            "launch_ros": {}, "launch_ros.actions": {"Node": kind("Node")},
            "ament_index_python": {}, "ament_index_python.packages": {"get_package_share_directory": lambda p: str(repo)}}
    saved = {n: sys.modules.get(n) for n in mods}
    try:
        for n, attrs in mods.items():
            m = types.ModuleType(n)
            m.__dict__.update(attrs)
            sys.modules[n] = m
        module = types.ModuleType("replay_launch")
        path = repo / "launch" / "replay.launch.py"
        exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102
        return module._tools(None)  # noqa: SLF001
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m


BASE = {"bag": "/tmp/b", "events_out": "teaching_events", "namespace": "", "fast": "false", "rate": "1.0",
        "report": "", "record_to": "", "camera_topic": "/camera/image_raw", "keep_taught": "false",
        "exit_after_replay": "true"}


def test_replay_launch_ends_with_the_replay_and_keeps_nothing_taught_unless_told():
    actions = _replay_tools(BASE)
    replay = next(a for a in actions if a[0] == "Node")
    assert "--keep-taught" not in replay[2]["arguments"]
    handler = next(a for a in actions if a[0] == "RegisterEventHandler")
    on_exit = handler[1][0]
    assert on_exit[0] == "OnProcessExit" and on_exit[2]["target_action"] is replay
    assert on_exit[2]["on_exit"][0][0] == "Shutdown"
    kept = _replay_tools({**BASE, "exit_after_replay": "false", "keep_taught": "true"})
    assert not any(a[0] == "RegisterEventHandler" for a in kept)
    assert "--keep-taught" in next(a for a in kept if a[0] == "Node")[2]["arguments"]
