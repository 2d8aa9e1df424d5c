"""A teaching session on your own RGB-D camera, with the topic names of a RealSense driver.

    ros2 launch realsense2_camera rs_launch.py align_depth.enable:=true     # the camera, in another terminal
    ros2 launch cbcl_pr_ros depth_camera.launch.py
    ros2 launch cbcl_pr_ros depth_camera.launch.py with_page:=true            # + the teaching page
    ros2 launch cbcl_pr_ros depth_camera.launch.py camera_topic:=/camera/color/image_raw \\
        depth_topic:=/camera/depth/image_raw camera_info_topic:=/camera/color/camera_info   # another driver

The nodes read three topics: the colour image, the depth image ALIGNED to it (same viewpoint and
pixel grid; 16UC1 millimetres or 32FC1 metres) and the colour image's CameraInfo. The defaults are
what realsense2_camera 4.x publishes with ``align_depth.enable:=true`` (namespace and name both
``camera``). Everything else is teaching_session.launch.py; docs/quickstart.md "Your own depth
camera" walks through it. Where ``ros2 launch`` is missing: ``teaching_session --camera realsense``.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

from cbcl_pr_ros.settings.launch_args import checked

# realsense2_camera 4.x, align_depth.enable:=true (kept equal to session.CAMERA_PRESETS["realsense"])
REALSENSE = {"camera_topic": "/camera/camera/color/image_raw",
             "depth_topic": "/camera/camera/aligned_depth_to_color/image_raw",
             "camera_info_topic": "/camera/camera/color/camera_info"}


def generate_launch_description():
    share = get_package_share_directory("cbcl_pr_ros")
    arguments = [  # (name, default, description); every one is handed on to teaching_session.launch.py
        ("camera_topic", REALSENSE["camera_topic"], "colour image (sensor_msgs/Image)"),
        ("depth_topic", REALSENSE["depth_topic"], "depth aligned to the colour image (16UC1 mm or 32FC1 m)"),
        ("camera_info_topic", REALSENSE["camera_info_topic"], "CameraInfo of the colour image"),
        ("namespace", "", "namespace of the nodes"),
        ("config", os.path.join(share, "config", "cbcl_pr.yaml"), "parameters YAML (see config/cbcl_pr.yaml)"),
        ("arm_config", os.path.join(share, "config", "arm.yaml"), "arm node parameters"),
        ("autostart", "true", "false: leave the nodes unconfigured for a lifecycle manager"),
        ("with_arm", "false", "also start the arm node"),
        ("with_page", "false", "also serve the teaching page"),
        ("page_config", os.path.join(share, "config", "teaching_page.yaml"), "teaching page parameters"),
    ]
    session = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", "teaching_session.launch.py")),
        launch_arguments={name: LaunchConfiguration(name) for name, _, _ in arguments}.items())
    # a misspelt argument stops the launch with one line instead of being ignored (settings/launch_args.py)
    return LaunchDescription(checked(__file__, [
        *(DeclareLaunchArgument(n, default_value=d, description=t) for n, d, t in arguments), session],
        OpaqueFunction))
