"""The sim demo's launch file and YAML files agree with the nodes and executables they name."""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LAUNCH = REPO / "launch" / "sim_teaching_demo.launch.py"


def test_launch_file_compiles_and_names_existing_executables():
    src = LAUNCH.read_text()
    tree = ast.parse(src, str(LAUNCH))
    compile(tree, str(LAUNCH), "exec")
    names = [kw.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
             for kw in node.keywords if kw.arg == "executable" and isinstance(kw.value, ast.Constant)]
    assert sorted(names) == ["arm_node", "feature_extractor_node", "learner_node", "sim_world_node"]
    for n in names:
        assert (REPO / "bin" / n).is_file(), f"launch names executable {n!r} missing from bin/"
    for cfg in ("cbcl_pr.yaml", "sim_world.yaml", "arm.yaml"):
        assert cfg in src and (REPO / "config" / cfg).is_file()


@pytest.mark.parametrize("module,yaml_name,node", [("sim_world", "sim_world.yaml", "sim_world"),
                                                    ("arm", "arm.yaml", "arm")])
def test_config_yaml_holds_every_parameter_with_the_declared_type(module, yaml_name, node):
    import importlib

    params = importlib.import_module(f"cbcl_pr_ros.nodes.{module}")._PARAMS
    doc = yaml.safe_load((REPO / "config" / yaml_name).read_text())
    assert list(doc) == [f"/**/{node}"]
    values = doc[f"/**/{node}"]["ros__parameters"]
    assert set(values) == set(params), f"{yaml_name} vs the node's parameters"
    for name, (default, _) in params.items():
        assert type(values[name]) is type(default), f"{name}: {values[name]!r} vs default {default!r}"


def test_demo_overrides_are_per_node(tmp_path):
    from cbcl_pr_ros.nodes.demo import demo_ros_args

    opts = argparse.Namespace(rate_hz=3.0, seed=7)
    args = demo_ros_args(opts, str(tmp_path / "memory.cbclpr"))
    files = [args[i + 1] for i, a in enumerate(args) if a == "--params-file"]
    assert [Path(f).name for f in files] == ["cbcl_pr.yaml", "sim_world.yaml", "arm.yaml",
                                             "demo_overrides.params.yaml"]
    assert "-p" not in args
    over = yaml.safe_load(Path(files[-1]).read_text())
    assert over["/**/sim_world"]["ros__parameters"]["seed"] == 7
    assert over["/**/sim_world"]["ros__parameters"]["rate_hz"] == 3.0
    assert over["/**/learner"]["ros__parameters"]["memory_path"] == str(tmp_path / "memory.cbclpr")
    assert "/**" not in over and "/**/arm" not in over  # nothing global, the arm keeps its own rate_hz
