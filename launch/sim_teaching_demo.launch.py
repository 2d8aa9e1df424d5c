"""The simulated teaching set-up as separate processes: simulated Baxter world, extractor, learner, arm.

    ros2 launch cbcl_pr_ros sim_teaching_demo.launch.py
    ros2 launch cbcl_pr_ros sim_teaching_demo.launch.py seed:=3 namespace:=sim

Nodes read config/cbcl_pr.yaml (extractor, learner), config/sim_world.yaml and config/arm.yaml.
The camera of the world publishes on ``image``, which the extractor reads; the arm node listens to the
learner's ``prediction`` and the world's ``depth``/``camera_pose``/``joint_states``, and commands the
world on ``joint_command``. The extractor also reads ``depth`` and ``camera_info`` and sends every object of a frame
(``object_features``); the learner publishes ``detections``, which the arm points at. A whole
teach -> detect -> point session with service calls alone:

    ros2 service call place_object cbcl_pr_ros/srv/PlaceObject "{category: mug, instance: 1, x: 0.7, y: -0.26}"
    ros2 service call place_object cbcl_pr_ros/srv/PlaceObject "{category: duck, random_spot: true}"
    ros2 topic echo --once detections           # ids, boxes, centroids (labels once taught)
    ros2 service call teach_class cbcl_pr_ros/srv/TeachClass "{label: mug, track_id: 3}"
    ros2 service call point_at cbcl_pr_ros/srv/PointAt "{label: mug}"
    ros2 service call clear_objects cbcl_pr_ros/srv/ClearObjects "{}"

(the hand camera is aimed with a JointState on ``joint_command``; test/robot/test_detections_ros.py
runs exactly this session with the four nodes in separate processes).

The scripted teaching session (the main job, ``run_demo_session``) runs the same nodes in one process,
because its teacher moves objects in the world in-process; it needs no ``ros2 launch``.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    share = get_package_share_directory("cbcl_pr_ros")
    cfg = os.path.join(share, "config")
    namespace = LaunchConfiguration("namespace")
    seed = LaunchConfiguration("seed")
    perception = LaunchConfiguration("config")
    world_cfg = LaunchConfiguration("world_config")
    arm_cfg = LaunchConfiguration("arm_config")
    lifecycle = {"autostart": LaunchConfiguration("autostart")}  # after the YAML: wins over it
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
        DeclareLaunchArgument("seed", default_value="0", description="world seed (texture, lighting)"),
        DeclareLaunchArgument("config", default_value=os.path.join(cfg, "cbcl_pr.yaml"),
                              description="extractor and learner parameters"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="extractor and learner configure and activate themselves; "
                                          "false: unconfigured, for a lifecycle manager"),
        DeclareLaunchArgument("world_config", default_value=os.path.join(cfg, "sim_world.yaml"),
                              description="simulated world parameters"),
        DeclareLaunchArgument("arm_config", default_value=os.path.join(cfg, "arm.yaml"),
                              description="arm node parameters (backend, side, tolerances)"),
        Node(package="cbcl_pr_ros", executable="sim_world_node", name="sim_world", namespace=namespace,
             parameters=[world_cfg, {"seed": seed}], output="screen"),
        Node(package="cbcl_pr_ros", executable="feature_extractor_node", name="feature_extractor",
             namespace=namespace, parameters=[perception, lifecycle], output="screen"),
        Node(package="cbcl_pr_ros", executable="learner_node", name="learner", namespace=namespace,
             parameters=[perception, lifecycle], output="screen", sigterm_timeout="20"),  # see perception.launch.py
        Node(package="cbcl_pr_ros", executable="arm_node", name="arm", namespace=namespace,
             parameters=[arm_cfg], output="screen"),
    ])
