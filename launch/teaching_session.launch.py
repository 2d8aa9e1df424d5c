"""A teaching session: camera -> feature_extractor -> learner, optionally the arm and the simulated world.

    ros2 launch cbcl_pr_ros teaching_session.launch.py camera_topic:=/camera/image_raw
    ros2 launch cbcl_pr_ros teaching_session.launch.py camera_topic:=... depth_topic:=... camera_info_topic:=...
    ros2 launch cbcl_pr_ros teaching_session.launch.py namespace:=robot1 with_arm:=true [arm_config:=my_arm.yaml]
    ros2 launch cbcl_pr_ros teaching_session.launch.py autostart:=false   # lifecycle manager drives them
    ros2 launch cbcl_pr_ros teaching_session.launch.py with_page:=true    # + the teaching page, http://127.0.0.1:8080

Each node reads its own YAML: the extractor and the learner ``config`` (config/cbcl_pr.yaml), the arm
``arm_config`` (config/arm.yaml).

Where `ros2 launch` is not installed (ROS 2 from PyPI wheels), `teaching_session` starts the same
nodes with the same YAML in one process.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from cbcl_pr_ros.settings.launch_args import checked


def generate_launch_description():
    share = get_package_share_directory("cbcl_pr_ros")
    default_config = os.path.join(share, "config", "cbcl_pr.yaml")
    camera_topic = LaunchConfiguration("camera_topic")
    namespace = LaunchConfiguration("namespace")
    config = LaunchConfiguration("config")
    arm_config = LaunchConfiguration("arm_config")
    perception = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", "perception.launch.py")),
        launch_arguments={"camera_topic": camera_topic, "depth_topic": LaunchConfiguration("depth_topic"),
                          "camera_info_topic": LaunchConfiguration("camera_info_topic"), "namespace": namespace,
                          "config": config, "autostart": LaunchConfiguration("autostart")}.items(),
    )
    # a misspelt argument stops the launch with one line instead of being ignored (settings/launch_args.py)
    return LaunchDescription(checked(__file__, [
        DeclareLaunchArgument("camera_topic", default_value="/camera/image_raw",
                              description="camera topic (sensor_msgs/Image) the nodes read"),
        DeclareLaunchArgument("depth_topic", default_value="depth",
                              description="depth aligned to the camera image (16UC1 mm or 32FC1 m)"),
        DeclareLaunchArgument("camera_info_topic", default_value="camera_info",
                              description="CameraInfo of the camera image"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the nodes"),
        DeclareLaunchArgument("config", default_value=default_config,
                              description="parameters YAML (see config/cbcl_pr.yaml)"),
        DeclareLaunchArgument("arm_config", default_value=os.path.join(share, "config", "arm.yaml"),
                              description="arm node parameters (backend, side, tolerances)"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="extractor and learner configure and activate themselves; "
                                          "false: unconfigured, for a lifecycle manager"),
        DeclareLaunchArgument("with_arm", default_value="false",
                              description="also start the arm node (points at predicted objects)"),
        DeclareLaunchArgument("with_page", default_value="false",
                              description="also serve the teaching page (docs/teaching_page.md)"),
        DeclareLaunchArgument("page_config", default_value=os.path.join(share, "config", "teaching_page.yaml"),
                              description="teaching page parameters (address, port, token)"),
        perception,
        # the page shows the picture the extractor reads: its ``image`` follows camera_topic too
        Node(package="cbcl_pr_ros", executable="teaching_page_node", name="teaching_page", namespace=namespace,
             parameters=[LaunchConfiguration("page_config")], remappings=[("image", camera_topic)],
             output="screen", condition=IfCondition(LaunchConfiguration("with_page"))),
        Node(package="cbcl_pr_ros", executable="arm_node", name="arm", namespace=namespace,
             parameters=[arm_config], output="screen", condition=IfCondition(LaunchConfiguration("with_arm"))),
    ], OpaqueFunction))
