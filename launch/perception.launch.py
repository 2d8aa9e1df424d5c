"""Perception only: camera topic -> feature_extractor -> learner (no arm, no simulated world).

    ros2 launch cbcl_pr_ros perception.launch.py camera_topic:=/camera/image_raw namespace:=robot1
    ros2 launch cbcl_pr_ros perception.launch.py camera_topic:=/cam/color depth_topic:=/cam/aligned_depth \
        camera_info_topic:=/cam/color/camera_info        # an RGB-D camera (depth_camera.launch.py: RealSense names)
    ros2 launch cbcl_pr_ros perception.launch.py autostart:=false   # for a lifecycle manager

Both nodes are lifecycle nodes; by default they configure and activate themselves (``autostart``).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from cbcl_pr_ros.settings.launch_args import checked


def generate_launch_description():
    default_config = os.path.join(get_package_share_directory("cbcl_pr_ros"), "config", "cbcl_pr.yaml")
    camera_topic = LaunchConfiguration("camera_topic")
    namespace = LaunchConfiguration("namespace")
    config = LaunchConfiguration("config")
    # after the YAML, so the launch argument wins over its autostart
    params = [config, {"autostart": LaunchConfiguration("autostart")}]
    # depth and camera_info feed the extractor's per-object path (3D positions); the defaults are the
    # nodes' own relative names, so nothing changes unless they are given
    remap = [("image", camera_topic), ("depth", LaunchConfiguration("depth_topic")),
             ("camera_info", LaunchConfiguration("camera_info_topic"))]
    # a misspelt argument stops the launch with one line instead of being ignored (settings/launch_args.py)
    return LaunchDescription(checked(__file__, [
        DeclareLaunchArgument("camera_topic", default_value="/camera/image_raw",
                              description="camera topic (sensor_msgs/Image) the nodes read"),
        DeclareLaunchArgument("depth_topic", default_value="depth",
                              description="depth aligned to the camera image (sensor_msgs/Image, 16UC1 mm "
                                          "or 32FC1 m); objects get 3D positions from it"),
        DeclareLaunchArgument("camera_info_topic", default_value="camera_info",
                              description="CameraInfo of the camera image (its intrinsics)"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the nodes"),
        DeclareLaunchArgument("config", default_value=default_config,
                              description="parameters YAML (see config/cbcl_pr.yaml)"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="the lifecycle nodes configure and activate themselves; false "
                                          "leaves them unconfigured for a lifecycle manager"),
        # sigterm_timeout: each node stops at once on SIGINT, but its Python exit (torch's module
        # teardown) took 5-7 s on a loaded 2-core machine, past launch's 5 s before SIGTERM (the extractor's too)
        Node(package="cbcl_pr_ros", executable="feature_extractor_node", name="feature_extractor",
             namespace=namespace, parameters=params, remappings=remap, output="screen",
             emulate_tty=True, sigterm_timeout="20"),
        Node(package="cbcl_pr_ros", executable="learner_node", name="learner",
             namespace=namespace, parameters=params, remappings=remap, output="screen",
             emulate_tty=True, sigterm_timeout="20"),
    ], OpaqueFunction))
