"""A replay into running nodes teaches a temporary memory: saved before, loaded back after (also when
the replay fails), and the person is told; a learner that cannot save says what that means."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from cbcl_pr_ros.nodes.replay_memory import TemporaryMemory, backup_name


class FakeLearner:
    def __init__(self, can_save: bool = True) -> None:
        self.calls: list[tuple[str, str]] = []
        self.can_save = can_save
        self.classes = ["robot_mug"]
        self.saved: list[str] | None = None

    def call(self, name: str, req) -> SimpleNamespace:
        self.calls.append((name, req.path))
        if name == "save_memory":
            if not self.can_save:
                return SimpleNamespace(success=False, message="no memory file configured (memory_path is '')",
                                       path="")
            self.saved = list(self.classes)
            return SimpleNamespace(success=True, message="saved", path=f"/home/u/.ros/cbcl_pr_ros/{req.path}")
        self.classes = list(self.saved)
        return SimpleNamespace(success=True, message="loaded")


def _guard(learner: FakeLearner, said: list[str]) -> TemporaryMemory:
    return TemporaryMemory(learner.call, lambda name: SimpleNamespace(path=""), said.append, name="b.safetensors")


def test_the_replays_classes_are_gone_after_it_and_the_person_was_told():
    learner, said = FakeLearner(), []
    with _guard(learner, said):
        learner.classes += ["mug", "duck"]  # what the replay teaches
    assert learner.classes == ["robot_mug"]
    assert learner.calls == [("save_memory", "b.safetensors"), ("load_memory", "b.safetensors")]
    assert "temporary memory" in said[0] and "/home/u/.ros/cbcl_pr_ros/b.safetensors" in said[0]
    assert "--keep-taught" in said[0] and "back as before" in said[1]


def test_restored_also_when_the_replay_fails():
    learner, said = FakeLearner(), []
    with pytest.raises(TimeoutError), _guard(learner, said):
        learner.classes.append("mug")
        raise TimeoutError("teach_class did not answer")
    assert learner.classes == ["robot_mug"]


def test_a_learner_that_cannot_save_is_not_loaded_and_the_person_hears_why():
    learner, said = FakeLearner(can_save=False), []
    with _guard(learner, said) as guard:
        learner.classes.append("mug")
    assert learner.calls == [("save_memory", "b.safetensors")] and guard.restored is None
    assert "could not be saved" in said[0] and "stays in the learner" in said[0]


def test_a_failed_restore_says_how_to_do_it_by_hand():
    learner, said = FakeLearner(), []

    def flaky(name, req):
        if name == "load_memory":
            raise TimeoutError("load_memory did not answer")
        return learner.call(name, req)

    with TemporaryMemory(flaky, lambda name: SimpleNamespace(path=""), said.append, name="b.safetensors") as g:
        pass
    assert g.restored is False and "NOT restored" in said[-1] and "'b.safetensors'" in said[-1]


def test_backup_names_are_plain_memory_file_names():
    from cbcl_pr_ros.service.memory_files import NAME_PATTERN

    assert NAME_PATTERN.fullmatch(backup_name(0.0)) and backup_name(0.0).endswith(".safetensors")


def test_replay_session_keeps_the_memory_temporary_unless_told():
    pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.replay import parse_args

    assert parse_args(["/tmp/bag"]).keep_taught is False
    assert parse_args(["/tmp/bag", "--keep-taught"]).keep_taught is True
