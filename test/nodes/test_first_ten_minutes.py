"""A newcomer's usual slips when starting the nodes and the tools: each gets one plain line that names
what was wrong and what is allowed, instead of silence or a traceback."""
from __future__ import annotations

import pytest

from cbcl_pr_ros.settings.param_names import unknown_parameter_note, unknown_parameters


def test_a_misspelt_start_parameter_is_named_with_the_nearest_real_one():
    declared = {"max_clusters", "classifier"}.__contains__
    given = ["max_clustres", "max_clusters", "use_sim_time", "qos_overrides./image.subscription.depth",
             "threads", "port", "cluster_budget", "zzz"]
    # a name of another node of the package (threads: extractor; port: page), an earlier name and ROS's own
    # names are not reported: one YAML or one teaching_session -p reaches every node
    assert unknown_parameters(given, declared) == ["max_clustres", "zzz"]
    note = unknown_parameter_note("max_clustres", "learner", ["max_clusters", "classifier"])
    assert "'max_clustres'" in note and "did you mean max_clusters?" in note and "learner_node --help" in note
    assert "did you mean" not in unknown_parameter_note("zzz", "learner", ["max_clusters", "classifier"])


@pytest.mark.ros
def test_a_node_started_with_a_misspelt_parameter_says_so():
    rclpy = pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter
    from ros_testing import domain, isolated_context

    from cbcl_pr_ros.nodes.ros_params import declare_parameters, declare_read_only
    from cbcl_pr_ros.settings.params import EXTRACTOR, LEARNER
    from cbcl_pr_ros.settings.robot_params import ARM_PARAMS

    def start(ctx, name: str, given: dict, declare, specs) -> tuple[object, list[str]]:
        """A node started with ``given`` as -p values, and the warnings it logged while declaring."""
        given_values = [Parameter(k, value=v) for k, v in given.items()]
        node = rclpy.create_node(name, context=ctx, parameter_overrides=given_values)
        warned: list[str] = []
        node.get_logger().warning = warned.append  # type: ignore[method-assign]
        declare(node, specs)
        if name != "learner":  # the learner is read after the call
            node.destroy_node()
        return node, warned

    with domain() as dom, isolated_context(dom) as ctx:
        node, warned = start(ctx, "learner", {"max_clustres": 10, "max_clusters": 5}, declare_parameters, LEARNER)
        assert node.get_parameter("max_clusters").value == 5
        assert len(warned) == 1 and "'max_clustres'" in warned[0] and "max_clusters?" in warned[0], warned
        node.destroy_node()

        _, warned = start(ctx, "arm", {"backnd": "sim", "max_clusters": 5}, declare_read_only, ARM_PARAMS)
        assert len(warned) == 1 and "'backnd'" in warned[0] and "backend?" in warned[0] \
            and "arm_node --help" in warned[0], warned

        # one teaching_session -p reaches every node of its one context: named once, by the first node
        _, warned = start(ctx, "feature_extractor", {"max_clustres": 10, "threds": 2}, declare_parameters, EXTRACTOR)
        assert len(warned) == 1 and "'threds'" in warned[0] and "threads?" in warned[0] \
            and "feature_extractor_node --help" in warned[0], warned

    # a node of another process (its own context) names it again, with the learner's parameter as the hint
    with domain() as dom, isolated_context(dom) as ctx:
        _, warned = start(ctx, "feature_extractor", {"max_clustres": 10}, declare_parameters, EXTRACTOR)
        assert len(warned) == 1 and "max_clusters?" in warned[0] and "feature_extractor_node --help" in warned[0]


@pytest.mark.ros
@pytest.mark.parametrize("ros_args, words", [
    # what bash makes of the documented `-p camera_pose_topic:=''`
    (["-p", "camera_pose_topic:="], ["'-p camera_pose_topic:='", "-p \"camera_pose_topic:=''\""]),
    (["--params-file", "/no/such/params.yaml"], ["no parameters file '/no/such/params.yaml'"]),
    (["-r", "image"], ["'-r image'", "-r FROM:=TO"]),
])
def test_ros_arguments_rcl_cannot_read_end_the_start_with_one_line(ros_args, words, capsys):
    pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.spin import own_args, run_nodes

    argv = ["learner_node", "--ros-args", *ros_args]
    built = []
    assert run_nodes(lambda: built.append(1) or [], threads=1, args=argv) == 2
    err = capsys.readouterr().err
    assert not built and "Traceback" not in err and all(w in err for w in words), err
    assert ".c:" not in err  # rcl's source positions mean nothing to a user
    with pytest.raises(SystemExit) as stop:  # teaching_session and the bag tools read their own options first
        own_args(["teaching_session", "--nodes", "learner", "--ros-args", *ros_args], "teaching_session")
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("teaching_session: error: ") and all(w in err for w in words), err
    assert own_args(["x", "--nodes", "learner", "--ros-args", "-p", "a:=1"], "x") == ["x", "--nodes", "learner"]


@pytest.mark.ros
def test_rcl_says_nothing_above_the_one_line(capfd):
    """rcl's init logged "[ERROR] [rcl]: Failed to parse global arguments" (from C, past Python's
    stderr) above the line that says what to type: the arguments are now read before rcl's init."""
    pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.spin import run_nodes

    argv = ["learner_node", "--ros-args", "-p", "camera_pose_topic:="]  # the documented slip, unquoted
    assert run_nodes(lambda: [], threads=1, args=argv) == 2
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the ROS argument '-p camera_pose_topic:='"), err


@pytest.mark.ros
def test_a_params_file_that_is_not_yaml_is_named_as_such(tmp_path):
    pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.spin import ros_args_problem

    bad = tmp_path / "p.yaml"
    bad.write_text("learner:\n  ros__parameters:\n    max_clusters: [1\n")
    text = (f"failed to initialize rcl: Couldn't parse params file: '--params-file {bad}'. Error: Error parsing a "
            "event near line 3, at /project/src/parse.c:776, at /project/src/rcl/arguments.c:415")
    assert ros_args_problem(text) == (f"the ROS argument '--params-file {bad}' cannot be used: '{bad}' is not a "
                                      "parameters YAML file (Error parsing a event near line 3)")
    assert ros_args_problem("failed to create node") is None


def test_offline_evaluation_refuses_a_misspelt_set_instead_of_evaluating_the_default(capsys):
    from cbcl_pr_ros.bags.offline_eval import learner_params
    from cbcl_pr_ros.cli.bag_eval import main

    with pytest.raises(ValueError) as err:
        learner_params(overrides={"classifer": "ncm"})
    assert "'classifer'" in str(err.value) and "did you mean classifier?" in str(err.value)
    assert learner_params(overrides={"classifier": "ncm"})["classifier"] == "ncm"
    assert learner_params(overrides={"cluster_budget": 20})["max_clusters"] == 20  # an earlier name still works
    assert learner_params(overrides={"linear_sgd": {"rehearsal": "full"}})["linear_sgd.rehearsal"] == "full"
    assert learner_params(overrides={"runtime": "torch"})["runtime"] == "torch"  # the extractor's, used too
    # the command says so before it reads the bag
    assert main(["/no/such/bag", "--set", "classifer=ncm"]) == 2
    assert "classifer" in capsys.readouterr().err


def test_launch_arguments_are_checked_for_the_file_named_on_the_command_line_only():
    from cbcl_pr_ros.settings.launch_args import unknown_launch_arguments

    declared = ["camera_topic", "namespace", "with_page"]
    by_path = ["ros2", "launch", "/ws/install/share/cbcl_pr_ros/launch/teaching_session.launch.py",
               "camera_topc:=/cam", "with_page:=true", "zzz:=1", "--debug"]
    reason = unknown_launch_arguments(by_path, "/elsewhere/teaching_session.launch.py", declared)
    assert reason is not None and "'camera_topc' (did you mean camera_topic?)" in reason and "'zzz'" in reason
    assert "with_page'" not in reason and "camera_topic, namespace, with_page" in reason
    assert unknown_launch_arguments(by_path[:3] + ["namespace:=r1"], "teaching_session.launch.py", declared) is None
    # an included file sees its parent's arguments: not checked
    assert unknown_launch_arguments(by_path, "perception.launch.py", declared) is None


@pytest.mark.ros
def test_a_plain_p_wins_over_the_shipped_yaml_as_the_command_line_should(tmp_path):
    """rcl applies a params file's ``/**/learner`` section after a plain ``-p`` when the file also has
    a ``/**`` section (config/cbcl_pr.yaml has both): ``learner_node --ros-args --params-file
    config/cbcl_pr.yaml -p max_clusters:=5`` ran with max_clusters 0, without a word."""
    rclpy = pytest.importorskip("rclpy")
    from cbcl_pr_ros.nodes.spin import command_line_parameters, with_command_line_parameters_last
    from cbcl_pr_ros.settings.params import default_config_path

    def started_with(args: list[str]) -> dict:
        ctx = rclpy.Context()
        rclpy.init(args=args, context=ctx)
        try:
            node = rclpy.create_node("learner", context=ctx, start_parameter_services=False)
            got = {k: v.value for k, v in node._parameter_overrides.items()}
            node.destroy_node()
            return got
        finally:
            ctx.shutdown()

    argv = ["learner_node", "--ros-args", "--params-file", default_config_path(), "-p", "max_clusters:=5",
            "-p", "memory_path:=''", "--param", "linear_sgd.exemplars_per_class:=12", "-p", "learner:seed:=4"]
    assert started_with(argv)["max_clusters"] == 0  # what rcl alone does
    got = started_with(with_command_line_parameters_last(argv, str(tmp_path)))
    assert (got["max_clusters"], got["memory_path"], got["linear_sgd.exemplars_per_class"], got["seed"]) == (5, "", 12, 4)
    assert got["classifier"] == "blended"  # the rest of the file still applies
    # ROS arguments only: a program's own "-p" and arguments after "--" are not parameters
    assert command_line_parameters(["x", "-p", "a:=1", "--ros-args", "-p", "b:=2", "--", "-p", "c:=3"]) == {"b": 2}
    assert with_command_line_parameters_last(["x", "--ros-args", "-r", "a:=b"], str(tmp_path)) == \
        ["x", "--ros-args", "-r", "a:=b"]


def test_a_misspelt_ros_args_flag_is_left_out_of_the_corrected_command(capsys):
    from cbcl_pr_ros.nodes.cli_help import exit_on_help

    for typo in ("--ros-arg", "-ros-args", "--rosargs"):
        with pytest.raises(SystemExit) as stop:
            exit_on_help(["learner_node", typo, "-p", "max_clusters:=5"], "learner_node", None)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert err.rstrip().endswith("run: learner_node --ros-args -p max_clusters:=5"), err


@pytest.mark.ros
def test_ros2_param_set_of_a_misspelt_name_answers_with_the_name_and_the_nearest_one():
    """rclpy answered ``ros2 param set /learner max_clustres 5`` with "Invalid access to undeclared
    parameter(s): []"; the answer of the parameter service now names it."""
    rclpy = pytest.importorskip("rclpy")
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    from ros_testing import domain, isolated_context

    from cbcl_pr_ros.nodes.ros_params import declare_parameters
    from cbcl_pr_ros.settings.params import LEARNER

    with domain() as dom, isolated_context(dom) as ctx:
        node = rclpy.create_node("learner", context=ctx)
        declare_parameters(node, LEARNER)
        service = node._parameter_service  # what `ros2 param set` reaches
        request = SetParameters.Request(parameters=[Parameter("max_clustres", value=5).to_parameter_msg()])
        result = service._set_parameters_callback(request, SetParameters.Response()).results[0]
        assert not result.successful
        assert "'max_clustres'" in result.reason and "did you mean max_clusters?" in result.reason, result.reason
        assert "ros2 param list /learner" in result.reason
        request = SetParameters.Request(parameters=[Parameter("teach_timeout_s", value=20.0).to_parameter_msg()])
        assert service._set_parameters_callback(request, SetParameters.Response()).results[0].successful
        node.destroy_node()
