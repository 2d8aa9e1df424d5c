"""A person without a picture is told where the node waits, which Image topics exist and what to type;
ROS arguments put before ``--ros-args`` (where rcl ignores them) are refused with the corrected command."""
from __future__ import annotations

import pytest

from cbcl_pr_ros.nodes.camera_hint import MAX_LISTED, camera_hint, image_topics, likely_colour_topic
from cbcl_pr_ros.nodes.cli_help import exit_on_help, misplaced_ros_args

GRAPH = [("/camera/camera/color/image_raw", ["sensor_msgs/msg/Image"]),
         ("/camera/camera/aligned_depth_to_color/image_raw", ["sensor_msgs/msg/Image"]),
         ("/camera/camera/color/camera_info", ["sensor_msgs/msg/CameraInfo"]),
         ("/image", ["sensor_msgs/msg/Image"]),
         ("/rosout", ["rcl_interfaces/msg/Log"])]


def test_image_topics_are_the_image_typed_ones_without_the_own():
    assert image_topics(GRAPH, exclude="/image") == ["/camera/camera/aligned_depth_to_color/image_raw",
                                                      "/camera/camera/color/image_raw"]


def test_hint_names_the_waited_topic_the_existing_ones_and_the_remap_in_both_syntaxes():
    topics = image_topics(GRAPH, exclude="/image")
    hint = camera_hint("/image", topics)
    assert "'/image'" in hint
    for t in topics:
        assert t in hint
    # the colour picture is suggested, not the depth image sorted before it
    assert "camera_topic:=/camera/camera/color/image_raw" in hint
    assert "teaching_page_node --ros-args -r image:=/camera/camera/color/image_raw" in hint
    assert "teaching_session --camera-topic /camera/camera/color/image_raw" in hint


def test_hint_without_any_image_topic_says_so():
    hint = camera_hint("/robot1/image", [])
    assert "'/robot1/image'" in hint and "No sensor_msgs/Image topic" in hint and ":=" not in hint


def test_hint_lists_a_bounded_number_of_topics():
    topics = [f"/cam{i}/image" for i in range(50)]
    hint = camera_hint("/image", topics)
    assert "/cam7/image" in hint and f"+{50 - MAX_LISTED} more" in hint and "/cam30/image," not in hint
    assert len(hint) < 1000


def test_only_depth_or_debug_topics_are_listed_but_not_suggested():
    assert likely_colour_topic(["/a/depth/image_raw", "/a/infra1/image_rect"]) is None
    hint = camera_hint("/image", ["/robot1/debug_image", "/robot1/depth"])
    assert "/robot1/debug_image, /robot1/depth" in hint and "none looks like a colour camera" in hint
    assert "image:=/robot1" not in hint and "camera_topic:=<topic>" in hint


def test_only_published_image_topics_are_listed():
    graph = [("/cam/rgb", ["sensor_msgs/msg/Image"]), ("/robot1/depth", ["sensor_msgs/msg/Image"])]
    assert image_topics(graph, published={"/cam/rgb": 1, "/robot1/depth": 0}.get) == ["/cam/rgb"]


@pytest.mark.parametrize("argv, stray", [
    (["teaching_page_node", "-r", "__ns:=/robot1"], ["-r"]),
    (["teaching_page_node", "-p", "port:=8090", "--ros-args", "-r", "__ns:=/robot1"], ["-p"]),
    (["teaching_page_node", "--remap", "image:=/cam"], ["--remap"]),
    (["teaching_page_node", "--ros-args", "-r", "__ns:=/robot1", "-p", "port:=8090"], []),
    (["teaching_page_node"], []),
])
def test_misplaced_ros_args(argv, stray):
    assert misplaced_ros_args(argv) == stray


def test_node_refuses_ros_args_before_ros_args_with_the_corrected_command(capsys):
    with pytest.raises(SystemExit) as exc:
        exit_on_help(["teaching_page_node", "-r", "__ns:=/robot1"], "teaching_page_node", "doc")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "run: teaching_page_node --ros-args -r __ns:=/robot1" in err
    exit_on_help(["teaching_page_node", "--ros-args", "-r", "__ns:=/robot1"], "teaching_page_node", "doc")


def test_extractor_no_frame_hint_lists_the_image_topics_instead_of_the_remap_in_use():
    from cbcl_pr_ros.nodes.feature_extractor import no_frame_hint

    hint = no_frame_hint("/camera/image_raw", 5, "best_effort", "sensor_msgs/Image", [],
                         ["/camera/color/image_raw", "/camera/depth/image_rect_raw"])
    assert "Nobody publishes" in hint and "/camera/depth/image_rect_raw" in hint
    assert "feature_extractor_node --ros-args -r image:=/camera/color/image_raw" in hint
    assert "camera_topic:=/camera/color/image_raw" in hint


def test_node_help_is_written_for_users():
    """--help keeps what a person starting the node needs (summary, topics, examples) and drops the
    module's developer notes and Sphinx markup."""
    from cbcl_pr_ros.nodes import learner, teaching_page
    from cbcl_pr_ros.nodes.cli_help import usage

    text = usage("learner_node", learner.__doc__)
    assert "Topics:" in text and "Learner node" in text
    assert ":class:" not in text and ":mod:" not in text and "``" not in text
    assert "MultiThreadedExecutor" not in text and "commit lock" not in text  # developer notes
    page = usage("teaching_page_node", teaching_page.__doc__)
    assert "teaching_page_node --ros-args -p port:=8090 -r __ns:=/robot1" in page and "Examples:" in page


def test_a_teach_or_classify_failure_names_the_camera_the_extractor_reads():
    """The learner's '/features' means nothing to a person: the answer names the extractor feeding it
    and the camera topic that extractor reads (or that nobody feeds it), from the ROS graph."""
    rclpy = pytest.importorskip("rclpy")
    import time

    from sensor_msgs.msg import CameraInfo, Image

    from cbcl_pr_ros.msg import FeatureVector
    from cbcl_pr_ros.nodes.camera_hint import upstream_text
    from ros_testing import fresh_domain, isolated_context, release_domain

    dom = fresh_domain()
    try:
        with isolated_context(dom) as ctx:
            learner = rclpy.create_node("learner", namespace="/robot1", context=ctx)
            extractor = rclpy.create_node("feature_extractor", namespace="/robot1", context=ctx)

            def upstream(topic: str) -> str:  # what the learner node asks of the graph for the session
                return upstream_text(topic, learner.get_publishers_info_by_topic(topic),
                                     learner.get_subscriber_names_and_types_by_node)

            assert "nobody publishes on '/robot1/features'" in upstream("/robot1/features")
            extractor.create_publisher(FeatureVector, "features", 1)
            extractor.create_subscription(Image, "/camera/depth/image_raw", lambda m: None, 1)
            extractor.create_subscription(Image, "/camera/color/image_raw", lambda m: None, 1)
            extractor.create_subscription(CameraInfo, "/camera/color/camera_info", lambda m: None, 1)
            deadline = time.monotonic() + 20
            text = ""
            while time.monotonic() < deadline and "reads the camera" not in text:
                time.sleep(0.2)
                text = upstream("/robot1/features")
            assert "/robot1/feature_extractor, which reads the camera on '/camera/color/image_raw'" in text
            learner.destroy_node()
            extractor.destroy_node()
    finally:
        release_domain(dom)
