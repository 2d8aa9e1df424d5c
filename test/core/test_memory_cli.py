"""Issue 24, outcome 4: ``cbcl-memory`` info / merge / diff / export-class on memory files, no ROS."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from cbcl_pr_ros.cli.memory import main
from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig, persistence

D = 16


def _saved(tmp_path, name, robot, classes, rng, backbone="bb"):
    lrn = CBCLPRLearner(LearnerConfig(seed=0), backbone, D)
    lrn.set_robot_name(robot)
    lrn.teach_increment({c: np.abs(rng.normal(i + 1, 0.3, (6, D))) for c, i in classes.items()})
    return lrn, lrn.save(tmp_path / name)


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(5)
    a, pa = _saved(tmp_path, "a.safetensors", "robot1", {"mug": 0, "cup": 3}, rng)
    b, pb = _saved(tmp_path, "b.safetensors", "robot2", {"mug": 0, "box": 6}, rng)
    return a, pa, b, pb


def test_help_exits_0():
    out = subprocess.run([sys.executable, "-P", "-m", "cbcl_pr_ros.cli.memory", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "export-class" in out.stdout and "merge" in out.stdout


def test_info_lists_classes_with_provenance(files, capsys):
    _, pa, _, _ = files
    assert main(["info", str(pa)]) == 0
    out = capsys.readouterr().out
    assert "mug" in out and "cup" in out and "robot1" in out and "backbone bb" in out


def test_info_of_one_class_says_one_class(tmp_path, capsys):
    _, path = _saved(tmp_path, "one.safetensors", "robot1", {"mug": 0}, np.random.default_rng(1))
    assert main(["info", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the table may wrap
    assert "1 class," in out and "1 classes" not in out


def test_merge_pools_writes_a_loadable_file_and_never_overwrites(files, tmp_path, capsys):
    a, pa, b, pb = files
    out = tmp_path / "c.safetensors"
    assert main(["merge", str(pa), str(pb), "-o", str(out)]) == 0
    merged = CBCLPRLearner.load(out)
    assert merged.classes_ == ("mug", "cup", "box")
    assert merged.memory["mug"].n_samples == a.memory["mug"].n_samples + b.memory["mug"].n_samples
    assert {c.robot for c in merged.provenance_["mug"]} == {"robot1", "robot2"}
    text = capsys.readouterr().out
    assert "1 added, 1 pooled" in text
    before = out.read_bytes()
    assert main(["merge", str(pa), str(pb), "-o", str(out)]) == 1
    assert "exists" in capsys.readouterr().err and out.read_bytes() == before


def test_merge_refuses_another_backbone_and_a_corrupt_file(files, tmp_path, capsys):
    _, pa, _, _ = files
    _, other = _saved(tmp_path, "o.safetensors", "r9", {"mug": 0}, np.random.default_rng(1), backbone="resnet")
    out = tmp_path / "c.safetensors"
    assert main(["merge", str(pa), str(other), "-o", str(out)]) == 1
    assert "backbones" in capsys.readouterr().err and not out.exists()
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(pa.read_bytes()[:-10])
    assert main(["merge", str(pa), str(bad), "-o", str(out)]) == 1
    assert not out.exists()


def test_diff_and_export_class(files, tmp_path, capsys):
    a, pa, _, pb = files
    assert main(["diff", str(pa), str(pb)]) == 0
    out = capsys.readouterr().out
    assert "a only" in out and "b only" in out and "would pool" in out
    mug = tmp_path / "mug.safetensors"
    assert main(["export-class", str(pa), "mug", "-o", str(mug)]) == 0
    state = persistence.load_state(mug)
    assert state.memory.classes == ("mug",) and state.provenance == {"mug": a.provenance_["mug"]}
    assert main(["export-class", str(pa), "teapot", "-o", str(tmp_path / "t.safetensors")]) == 1
    assert "no class" in capsys.readouterr().err
    # merging an exported class back into its origin adds nothing
    same = tmp_path / "same.safetensors"
    assert main(["merge", str(pa), str(mug), "-o", str(same)]) == 0
    assert "1 already known" in capsys.readouterr().out


def test_diff_of_large_memories_sums_up_and_lists_only_the_classes_that_differ(tmp_path, capsys):
    """At a thousand classes diff printed a row per class, nearly all "same", and no count: now a summary
    line and the classes that differ; --all lists every class."""
    rng = np.random.default_rng(4)
    a, pa = _saved(tmp_path, "a.safetensors", "robot1", {f"object_{i:02d}": i % 7 for i in range(30)}, rng)
    b = CBCLPRLearner.load(pa)
    b.forget("object_00")
    b.teach_increment({"object_01": np.abs(rng.normal(2, 0.3, (6, D))), "teapot": np.abs(rng.normal(9, 0.3, (6, D)))})
    pb = b.save(tmp_path / "b.safetensors")
    assert main(["diff", str(pa), str(pb)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the table may wrap
    assert "31 classes: 1 only in a, 1 only in b, 1 changed, 28 the same" in out
    assert "the table lists the 3 that differ (--all: every class)" in out
    assert "object_00" in out and "object_01" in out and "teapot" in out and "object_05" not in out
    assert main(["diff", str(pa), str(pb), "--all"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "31 classes: 1 only in a, 1 only in b, 1 changed, 28 the same" in out and "object_05" in out
    assert "--all" not in out
    assert main(["diff", str(pa), str(pa)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "30 classes: 0 only in a, 0 only in b, 0 changed, 30 the same; nothing differs" in out
    assert "object_05" not in out


def test_export_of_a_name_a_large_memory_lacks_names_the_nearest_not_all(tmp_path, capsys):
    """A mistyped name in a memory of a thousand classes answered with every class name (13 kB on one
    line); now the count, the nearest names and where the whole list is."""
    rng = np.random.default_rng(3)
    _, path = _saved(tmp_path, "many.safetensors", "robot1", {f"object_{i:02d}": i % 7 for i in range(30)}, rng)
    assert main(["export-class", str(path), "objcet_07", "-o", str(tmp_path / "t.safetensors")]) == 1
    err = capsys.readouterr().err
    assert "no class 'objcet_07'" in err and "30 classes" in err and "object_07" in err
    assert "object_29" not in err and "cbcl-memory info" in err and len(err) < 400
    assert not (tmp_path / "t.safetensors").exists()


def _crafted(tmp_path, name: str, lrn, **edit):
    """``lrn``'s memory with fields edited past what load accepts (written without any check)."""
    import dataclasses

    path = tmp_path / name
    path.write_bytes(persistence.state_to_bytes(dataclasses.replace(lrn.to_state(), **edit)))
    return path


def test_merge_then_info_a_crafted_file_at_the_limits_stays_loadable(files, tmp_path, capsys):
    a, pa, b, _ = files
    assert a.temperature_weight_ > 0
    crafted = _crafted(tmp_path, "crafted.safetensors", b, increments=persistence.MAX_COUNTER,
                       learner_state={"distance_prior": 1.0, "temperature": 2.0, "temperature_weight": 1e12})
    assert main(["info", str(crafted)]) == 0  # within every range: load accepts it
    out = tmp_path / "c.safetensors"
    assert main(["merge", str(pa), str(crafted), "-o", str(out)]) == 0
    assert main(["info", str(out)]) == 0, capsys.readouterr().err  # its own output loads
    merged = persistence.load_state(out)
    assert merged.learner_state["temperature_weight"] <= 1e12 and merged.increments <= persistence.MAX_COUNTER


def test_repair_clamps_what_load_refuses_and_says_what(files, tmp_path, capsys):
    a, _, _, _ = files
    bad = _crafted(tmp_path, "memory.safetensors.unreadable-1", a, increments=2**63 - 1,
                   learner_state={"distance_prior": 1.0, "temperature": 2.0, "temperature_weight": 1e12 + 20})
    assert main(["info", str(bad)]) == 1  # refused, but shown as repair would write it
    said = capsys.readouterr()
    assert "increments" in said.err and "would change" in said.out and "mug" in said.out
    fixed = tmp_path / "memory.safetensors"
    assert main(["repair", str(bad), "-o", str(fixed)]) == 0
    said = capsys.readouterr().out
    assert "temperature_weight" in said and "increments" in said and "clamped" in said
    state = persistence.load_state(fixed)
    assert state.memory.classes == a.classes_ and state.learner_state["temperature_weight"] == 1e12
    assert state.increments == persistence.MAX_COUNTER
    for cls in a.classes_:  # the classes' statistics are not touched
        assert np.array_equal(state.memory[cls].means, a.memory[cls].means)
    assert main(["repair", str(bad), "-o", str(fixed)]) == 1 and "exists" in capsys.readouterr().err
    torn = tmp_path / "torn.safetensors"
    torn.write_bytes(bad.read_bytes()[:-10])
    assert main(["repair", str(torn), "-o", str(tmp_path / "t.safetensors")]) == 1
    assert not (tmp_path / "t.safetensors").exists()


def test_control_characters_from_a_file_are_escaped_in_every_print(tmp_path, capsys):
    rng = np.random.default_rng(2)
    lrn, _ = _saved(tmp_path, "x.safetensors", "robot1", {"mug": 0}, rng, backbone="bb\x1b]0;owned\x07\x1b[2J")
    path = tmp_path / "x.safetensors"
    crafted = _crafted(tmp_path, "y.safetensors", lrn, config={**lrn.config.to_dict(), "transform": "\x1b[31mred"})
    for argv in (["info", str(path)], ["diff", str(path), str(crafted)], ["info", str(crafted)],
                 ["export-class", str(path), "mug", "-o", str(tmp_path / "m.safetensors")],
                 ["merge", str(path), str(crafted), "-o", str(tmp_path / "z.safetensors")]):
        main(argv)
        got = capsys.readouterr()
        assert "\x1b" not in got.out + got.err and "\x07" not in got.out + got.err, argv
    main(["info", str(path)])
    assert "\\x1b" in capsys.readouterr().out
