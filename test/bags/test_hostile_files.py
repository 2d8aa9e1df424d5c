"""Files and names a stranger hands the bag tools: a bag's metadata, its message type names, the
tools' defaults file and output paths. Each gives one plain error line, never a traceback, and
never runs code named by the file."""
from __future__ import annotations

import sys

import numpy as np
import pytest
import yaml

from cbcl_pr_ros.bags import BagFormatError, bag_info, read_session

from .conftest import write_synthetic


def _edit_metadata(bag, change) -> None:
    meta = bag / "metadata.yaml"
    doc = yaml.safe_load(meta.read_text())
    change(doc["rosbag2_bagfile_information"])
    meta.write_text(yaml.safe_dump(doc))


@pytest.mark.ros
def test_a_type_name_from_a_bag_or_the_graph_imports_nothing_but_an_installed_message(tmp_path, monkeypatch):
    """The replay (types from a bag's metadata) and the recorder (types a peer advertises) import
    the package a type names: ``setup/msg/X`` ran ./setup.py (the replay run as ``python -m`` puts
    the working directory first on sys.path), ``this/msg/X`` printed the Zen of Python, and
    ``.foo/msg/X`` ended the tool with a TypeError traceback."""
    pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.replay import message_class

    marker = tmp_path / "ran"
    (tmp_path / "cbcl_hostile_mod.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("cbcl_hostile_mod/msg/Image", ".foo/msg/Image", "cbcl_hostile_mod", "x" * 10_000,
                 "sensor_msgs/msg/NoSuchType", "sensor_msgs/msg/../Image", "sensor_msgs/srv/SetCameraInfo"):
        with pytest.raises(BagFormatError, match="not installed") as e:
            message_class(name, tmp_path, "/cam")
        assert len(str(e.value)) < 400
    assert not marker.exists() and "cbcl_hostile_mod" not in sys.modules
    from sensor_msgs.msg import Image

    assert message_class("sensor_msgs/msg/Image") is Image
    from cbcl_pr_ros.msg import TeachingEvent

    assert message_class("cbcl_pr_ros/msg/TeachingEvent") is TeachingEvent


@pytest.mark.parametrize("change", [
    lambda m: m.update(custom_data=[1, 2]),  # was a TypeError traceback from bag_info and read_session
    lambda m: m.update(custom_data="text"),
])
def test_metadata_that_lies_is_one_bag_error(tmp_path, change):
    write_synthetic(tmp_path / "bag", n_frames=4)
    _edit_metadata(tmp_path / "bag", change)
    for read in (bag_info, read_session):
        with pytest.raises(BagFormatError, match="metadata.yaml"):
            read(tmp_path / "bag")


def test_custom_data_reads_back_as_strings(tmp_path):
    write_synthetic(tmp_path / "bag", n_frames=4)
    _edit_metadata(tmp_path / "bag", lambda m: m["custom_data"].update(note=[1, {"a": 2}]))
    info = bag_info(tmp_path / "bag")
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in info.custom_data.items())
    assert info.custom_data["note"] == "[1, {'a': 2}]"


def _bad_configs(tmp_path):
    (tmp_path / "list.yaml").write_text("[1, 2]\n")
    (tmp_path / "types.yaml").write_text("simulate: {classes: many}\nreplay: {rate: fast}\nrecord: {type_wait_s: soon}\n")
    (tmp_path / "broken.yaml").write_text("simulate: [\n")
    (tmp_path / "adir").mkdir()
    return [tmp_path / n for n in ("missing.yaml", "list.yaml", "types.yaml", "broken.yaml", "adir")]


def test_a_bad_defaults_file_is_one_line_from_record(tmp_path, capsys):
    """--bag-config that is missing, a directory, not a mapping or holds a word for a number:
    were ValueError/AttributeError tracebacks (the defaults were read outside the tool's error net)."""
    from cbcl_pr_ros.cli.record import main

    for cfg in _bad_configs(tmp_path):
        assert main(["--simulate", str(tmp_path / "out"), "--bag-config", str(cfg)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("record --simulate: ") and "\n" not in err and "Traceback" not in err
        assert not (tmp_path / "out").exists()


@pytest.mark.ros
def test_a_bad_defaults_file_is_one_line_from_replay(tmp_path, capsys):
    pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.replay import main

    write_synthetic(tmp_path / "bag", n_frames=4)
    for cfg in _bad_configs(tmp_path):
        assert main(["replay_session", str(tmp_path / "bag"), "--bag-config", str(cfg)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("replay_session: ") and "\n" not in err and "Traceback" not in err


def test_absurd_session_sizes_are_one_line_before_any_rendering(tmp_path, capsys):
    """--shots 1000000000 rendered for hours; --shots 65 wrote a TEACH of 65 frames that every
    replay's TeachClass refuses (64 images per request)."""
    from cbcl_pr_ros.bags.simulate import SessionPlan
    from cbcl_pr_ros.cli.record import main

    for args in (["--shots", "1000000000"], ["--shots", "65"], ["--test-views", "1000000000"]):
        assert main(["--simulate", str(tmp_path / "out"), "--categories", "mug", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("record --simulate: ") and "\n" not in err
        assert not (tmp_path / "out").exists()
    assert SessionPlan(("mug",), shots=64).shots == 64


def test_a_class_count_outside_the_catalogue_is_refused():
    """--num-classes -1 rendered every class but the last, without a word."""
    from cbcl_pr_ros.robot.assets import CATALOGUE
    from cbcl_pr_ros.robot.dataset import class_subset

    for n in (-1, 0, len(CATALOGUE) + 1, 10**9):
        with pytest.raises(ValueError, match="number of classes"):
            class_subset(None, n)
    assert class_subset(None, 2) == tuple(CATALOGUE)[:2]
    assert class_subset(None, len(CATALOGUE)) == tuple(CATALOGUE)


def test_a_report_path_that_cannot_be_written_is_refused_before_the_evaluation(tmp_path, capsys, monkeypatch):
    """--json naming a directory (or a missing folder) was an IsADirectoryError traceback after the
    whole evaluation had run, and its report was lost."""
    import cbcl_pr_ros.bags.offline_eval as offline_eval
    from cbcl_pr_ros.cli.bag_eval import main

    ran = []
    monkeypatch.setattr(offline_eval, "evaluate_bag", lambda *a, **k: ran.append(1))
    write_synthetic(tmp_path / "bag", n_frames=4)
    (tmp_path / "adir").mkdir()
    for out in (tmp_path / "adir", tmp_path / "missing" / "report.json"):
        assert main([str(tmp_path / "bag"), "--json", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("cbcl-bag-eval: ") and "\n" not in err and str(out) in err
    assert ran == []


@pytest.mark.ros
def test_a_replay_report_path_that_cannot_be_written_is_refused_before_the_replay(tmp_path, capsys):
    pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.replay import main

    write_synthetic(tmp_path / "bag", n_frames=4)
    (tmp_path / "adir").mkdir()
    assert main(["replay_session", str(tmp_path / "bag"), "--report", str(tmp_path / "adir")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("replay_session: ") and "directory" in err and "\n" not in err


def test_a_bag_topic_ros_cannot_publish_is_refused_by_the_plan_and_never_written(tmp_path, capsys, monkeypatch):
    """record --simulate --camera-topic 'bad topic!!' wrote a bag, and replaying it (or any bag with
    such a topic) ended replay_session with rclpy's InvalidTopicNameException traceback."""
    from cbcl_pr_ros.bags.replay_plan import build_plan
    from cbcl_pr_ros.cli.record import main

    assert main(["--simulate", str(tmp_path / "out"), "--categories", "mug", "--shots", "1",
                 "--camera-topic", "bad topic!!"]) == 2
    assert "not a ROS topic name" in capsys.readouterr().err and not (tmp_path / "out").exists()
    import cbcl_pr_ros.bags.writer as writer
    from cbcl_pr_ros.bags import TeachingBagWriter

    monkeypatch.setattr(writer, "check_topic_name", lambda t: t)  # a bag written elsewhere
    with TeachingBagWriter(tmp_path / "bag") as w:
        w.write_image("/camera/image raw!!", np.zeros((8, 8, 3), np.uint8), 10**9, "cam")
    monkeypatch.undo()
    with pytest.raises(BagFormatError, match="not a ROS topic name"):
        build_plan(tmp_path / "bag", rate=None, with_events=False)


@pytest.mark.ros
def test_topic_names_are_checked_as_ros_checks_them():
    pytest.importorskip("rclpy")
    from rclpy.validate_full_topic_name import validate_full_topic_name

    from cbcl_pr_ros.bags.types import check_topic_name

    names = ["/a", "/a/b_c", "/_x", "/a__b", "/A1/b2", "/" + "a" * 246, "/" + "a" * 247, "/a/1b", "/a b",
             "/a//b", "/a/", "a", "/", "/ä", "/a-b", "/a.b", "/a/~", "/{x}", "/a/b" * 80]
    for name in names:
        try:
            validate_full_topic_name(name)
            ros_ok = True
        except Exception:  # noqa: BLE001 - rclpy's own exception types
            ros_ok = False
        try:
            check_topic_name(name)
            ours = True
        except ValueError:
            ours = False
        assert ours == ros_ok, name


@pytest.mark.ros
def test_the_recorder_keeps_the_camera_type_when_another_node_advertises_a_second_one():
    """resolve_types took the first type the graph lists for a topic: another node advertising
    std_msgs/String on the camera topic made the camera be recorded as String, a bag the
    evaluation refuses ('no sensor_msgs/msg/Image topic')."""
    pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.recorder import resolve_types

    class Graph:
        def get_topic_names_and_types(self):
            return [("/cam", ["std_msgs/msg/String", "sensor_msgs/msg/Image"]),
                    ("/depth", ["evil_msgs/msg/X", "sensor_msgs/msg/CompressedImage"]),
                    ("/pose", ["geometry_msgs/msg/PoseStamped"])]

    types = resolve_types(Graph(), ["/cam", "/depth", "/pose"], "/teaching_events", 0.0)
    assert types == {"/cam": "sensor_msgs/msg/Image", "/depth": "sensor_msgs/msg/CompressedImage",
                     "/pose": "geometry_msgs/msg/PoseStamped",
                     "/teaching_events": "cbcl_pr_ros/msg/TeachingEvent"}


@pytest.mark.ros
def test_a_bad_defaults_file_is_one_line_from_the_recorder(tmp_path, capsys):
    pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.recorder import main

    for cfg in _bad_configs(tmp_path):
        assert main(["record_session", str(tmp_path / "out"), "--bag-config", str(cfg)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("record_session: ") and "\n" not in err
        assert not (tmp_path / "out").exists()
