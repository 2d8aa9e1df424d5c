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
    from cbcl_pr_ros.settings.params import LEARNER
    from cbcl_pr_ros.settings.robot_params import ARM_PARAMS

    with domain() as dom, isolated_context(dom) as ctx:
        node = rclpy.create_node("learner", context=ctx, parameter_overrides=[
            Parameter("max_clustres", value=10), Parameter("max_clusters", value=5)])
        warned: list[str] = []
        node.get_logger().warning = warned.append  # type: ignore[method-assign]
        declare_parameters(node, LEARNER)
        assert node.get_parameter("max_clusters").value == 5
        assert len(warned) == 1 and "'max_clustres'" in warned[0] and "max_clusters?" in warned[0], warned
        node.destroy_node()

        arm = rclpy.create_node("arm", context=ctx, parameter_overrides=[
            Parameter("backnd", value="sim"), Parameter("max_clusters", value=5)])
        warned = []
        arm.get_logger().warning = warned.append  # type: ignore[method-assign]
        declare_read_only(arm, ARM_PARAMS)
        assert len(warned) == 1 and "'backnd'" in warned[0] and "backend?" in warned[0] \
            and "arm_node --help" in warned[0], warned
        arm.destroy_node()
