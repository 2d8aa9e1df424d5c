"""Memory per robot: a learner in a namespace keeps its default memory file in a folder of its own, so
``namespace:=robot1`` and the robot without a namespace never share what they learned."""
from __future__ import annotations

import os

import pytest

from cbcl_pr_ros.service.memory_files import default_memory_dir, memory_dir_for, store_from_params


def _params(**kw):
    return {"memory_path": "memory.safetensors", "memory_dir": "", "allow_absolute_paths": False,
            "max_memory_file_bytes": 1 << 20, **kw}


def test_the_default_folder_follows_the_namespace(tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    assert default_memory_dir() == default_memory_dir("/") == os.path.join(tmp_path, "cbcl_pr_ros")
    assert default_memory_dir("/robot1") == os.path.join(tmp_path, "cbcl_pr_ros", "robot1")
    assert default_memory_dir("/lab/arm_2") == os.path.join(tmp_path, "cbcl_pr_ros", "lab", "arm_2")


def test_two_robots_get_two_files_and_the_root_keeps_its_old_one(tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    root = store_from_params(_params(), "/")
    robot1 = store_from_params(_params(), "/robot1")
    assert root.default_path == os.path.join(tmp_path, "cbcl_pr_ros", "memory.safetensors")
    assert robot1.default_path == os.path.join(tmp_path, "cbcl_pr_ros", "robot1", "memory.safetensors")


def test_a_configured_folder_or_absolute_path_is_taken_as_given(tmp_path):
    assert memory_dir_for(str(tmp_path), "m.safetensors", "/robot1") == (str(tmp_path), "m.safetensors")
    assert memory_dir_for("", str(tmp_path / "m.safetensors"), "/robot1") == (str(tmp_path), "m.safetensors")


@pytest.mark.parametrize("ns", ["/../etc", "/robot 1", "/a/.."])
def test_a_namespace_that_is_no_ros_namespace_is_refused(ns):
    with pytest.raises(ValueError):
        default_memory_dir(ns)


def test_a_namespaced_learner_starting_empty_is_told_where_its_earlier_memory_is(tmp_path, monkeypatch):
    from cbcl_pr_ros.service.memory_files import earlier_memory_note

    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    assert earlier_memory_note(_params(), "/robot1") == ""  # none before either
    (tmp_path / "cbcl_pr_ros").mkdir()
    (tmp_path / "cbcl_pr_ros" / "memory.safetensors").write_bytes(b"x")
    note = earlier_memory_note(_params(), "/robot1")
    assert str(tmp_path / "cbcl_pr_ros" / "memory.safetensors") in note
    assert str(tmp_path / "cbcl_pr_ros" / "robot1" / "memory.safetensors") in note
    assert earlier_memory_note(_params(), "/") == ""  # the root learner keeps its file
    assert earlier_memory_note(_params(memory_dir=str(tmp_path)), "/robot1") == ""  # a folder of one's own
    (tmp_path / "cbcl_pr_ros" / "robot1").mkdir()
    (tmp_path / "cbcl_pr_ros" / "robot1" / "memory.safetensors").write_bytes(b"y")
    assert earlier_memory_note(_params(), "/robot1") == ""  # it has its own now
