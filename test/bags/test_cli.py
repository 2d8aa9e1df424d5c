"""The bag tools' command lines (ROS-free ones in-process) and the launch file's form."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from cbcl_pr_ros.bags import read_session
from cbcl_pr_ros.bags.config import load_bag_defaults
from cbcl_pr_ros.cli import bag_eval, record

REPO = Path(__file__).resolve().parents[2]


def test_simulate_then_evaluate(tmp_path, capsys):
    bag = tmp_path / "s"
    assert record.main(["--simulate", str(bag), "--categories", "mug", "duck", "--shots", "2",
                        "--test-views", "1", "--image-size", "64", "--storage", "sqlite3", "--mode", "frame"]) == 0
    s = read_session(bag)
    assert len(s.events) == 2 + 3 and s.info.storage == "sqlite3"
    assert {e.mode for e in s.events} == {2}  # --mode frame: every event names the whole frame
    capsys.readouterr()
    assert bag_eval.main([str(bag), "--info"]) == 0
    out = capsys.readouterr().out
    assert "/camera/image_raw" in out and "sensor_msgs/msg/Image" in out and "RIHS01_" in out
    assert bag_eval.main([str(bag), "-q", "--set", "classifier=ncm", "--json", str(tmp_path / "r.json")]) == 0
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["params"]["classifier"] == "ncm"
    assert [inc["n_test"] for inc in rep["increments"]] == [1, 2]
    assert "overall accuracy" in capsys.readouterr().out


def test_bad_bag_gives_one_line_and_no_report(tmp_path, capsys):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metadata.yaml").write_text("not: [a bag")
    assert bag_eval.main([str(tmp_path / "bad"), "--json", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "bad") in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()
    assert record.main(["--simulate", str(tmp_path / "x"), "--categories", "no_such_thing"]) == 2
    assert not (tmp_path / "x").exists()
    assert bag_eval.main([str(tmp_path / "bad"), "--set", "oops"]) == 2


def test_defaults_file_and_launch_file():
    assert load_bag_defaults("replay")["rate"] == 1.0
    assert load_bag_defaults("record")["storage"] == "mcap"
    with pytest.raises(ValueError, match="section"):
        load_bag_defaults("nope")
    tree = ast.parse((REPO / "launch" / "replay.launch.py").read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in names
    declared = {c.args[0].value for c in ast.walk(tree) if isinstance(c, ast.Call)
                and getattr(c.func, "id", "") == "DeclareLaunchArgument"}
    assert {"bag", "rate", "fast", "camera_topic", "start_nodes", "record_to"} <= declared
