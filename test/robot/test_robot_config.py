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
    assert sorted(names) == ["arm_node", "feature_extractor_node", "learner_node", "sim_world_node", "teaching_page_node"]
    for n in names:
        assert (REPO / "bin" / n).is_file(), f"launch names executable {n!r} missing from bin/"
    for cfg in ("cbcl_pr.yaml", "sim_world.yaml", "arm.yaml", "teaching_page.yaml"):
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


@pytest.mark.parametrize("yaml_name,table", [("sim_world.yaml", "SIM_WORLD_PARAMS"), ("arm.yaml", "ARM_PARAMS")])
def test_shipped_yaml_passes_the_range_check(yaml_name, table):
    from cbcl_pr_ros.settings import robot_params

    values = next(iter(yaml.safe_load((REPO / "config" / yaml_name).read_text()).values()))["ros__parameters"]
    robot_params.check_parameters(getattr(robot_params, table), values.__getitem__)


@pytest.mark.parametrize("table,name,bad,needle", [
    ("ARM_PARAMS", "rate_hz", 3.0, "rate_hz must be >="),          # Baxter drops a stream below 5 Hz
    ("ARM_PARAMS", "backend", "gazebo", "backend must be one of"),
    ("ARM_PARAMS", "min_confidence", float("nan"), "min_confidence must be finite"),
    ("ARM_PARAMS", "object_poses", [1, 2], "list of strings"),
    ("SIM_WORLD_PARAMS", "width", 0, "width must be >="),
    ("SIM_WORLD_PARAMS", "rate_hz", "fast", "rate_hz must be a number from"),
    ("SIM_WORLD_PARAMS", "camera_frame_id", " ", "camera_frame_id must not be empty"),
    ("SIM_WORLD_PARAMS", "camera_frame_id", "c" * 300, "the most is 256"),  # every learner would refuse its frames
])
def test_out_of_range_parameters_are_named_in_the_error(table, name, bad, needle):
    from cbcl_pr_ros.settings import robot_params

    specs = getattr(robot_params, table)
    values = {s.name: s.default for s in specs} | {name: bad}
    with pytest.raises(ValueError, match="invalid parameters") as err:
        robot_params.check_parameters(specs, values.__getitem__)
    assert needle in str(err.value)


def test_arm_parameters_are_read_only_and_checked_at_start():
    """A set at run time would change nothing (the arm reads them once): it is refused instead."""
    rclpy = pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter
    from ros_testing import domain

    from cbcl_pr_ros.nodes.arm import ArmNode

    ctx = rclpy.Context()
    with domain() as domain_id:
        rclpy.init(context=ctx, domain_id=domain_id)
        try:
            with pytest.raises(ValueError, match="rate_hz"):
                ArmNode(context=ctx, node_name="arm_bad", parameter_overrides=[Parameter("rate_hz", value=2.0)])
            node = ArmNode(context=ctx, node_name="arm_ok")
            result = node.set_parameters([Parameter("min_confidence", value=0.5)])[0]
            assert not result.successful and "read-only" in result.reason
            assert node.get_parameter("min_confidence").value == 0.0
            node.destroy_node()
        finally:
            rclpy.shutdown(context=ctx)
