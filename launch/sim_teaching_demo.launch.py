"""The simulated teaching set-up as separate processes: simulated Baxter world, extractor, learner, arm.

    ros2 launch cbcl_pr_ros sim_teaching_demo.launch.py
    ros2 launch cbcl_pr_ros sim_teaching_demo.launch.py seed:=3 namespace:=sim

Nodes read config/cbcl_pr.yaml (extractor, learner), config/sim_world.yaml and config/arm.yaml.
The camera of the world publishes on ``image``, which the extractor reads; the arm node listens to the
learner's ``detections`` (placed in the base frame) and the world's ``joint_states``, and commands the
world on ``joint_command``. The extractor also reads ``depth`` and ``camera_info`` and sends every object of a frame
(``object_features``); the learner publishes ``detections``, which the arm points at. A whole
teach -> detect -> point session with service calls alone (NS= for no namespace, NS=/sim with
namespace:=sim; the ros2 CLI resolves a relative name against its own root namespace):

    NS=/sim
    ros2 service call $NS/place_object cbcl_pr_ros/srv/PlaceObject "{category: mug, instance: 1, x: 0.7, y: -0.26}"
    ros2 topic echo --once $NS/detections      # the mug's track id (the hand camera starts on the table)
    ros2 service call $NS/teach_class cbcl_pr_ros/srv/TeachClass "{label: mug, track_id: 1}"   # that id
    ros2 service call $NS/place_object cbcl_pr_ros/srv/PlaceObject "{category: duck, instance: 1, x: 0.7, y: -0.06}"
    ros2 service call $NS/point_at cbcl_pr_ros/srv/PointAt "{label: mug}"
    ros2 service call $NS/look_at cbcl_pr_ros/srv/LookAt "{pose: table_left}"     # or {target: {x: 0.7, y: 0.1, z: -0.18}}
    ros2 service call $NS/clear_objects cbcl_pr_ros/srv/ClearObjects "{}"

(with_page:=true also serves the teaching page on http://127.0.0.1:8080, where the same is done by
tapping the object: docs/teaching_page.md. test/robot/test_session_by_names.py runs this session with
and without a namespace.)

The scripted teaching session (the main job, ``run_demo_session``) runs the same nodes in one process,
because its teacher moves objects in the world in-process; it needs no ``ros2 launch``.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from cbcl_pr_ros.settings.launch_args import checked


def generate_launch_description():
    share = get_package_share_directory("cbcl_pr_ros")
    cfg = os.path.join(share, "config")
    namespace = LaunchConfiguration("namespace")
    seed = LaunchConfiguration("seed")
    perception = LaunchConfiguration("config")
    world_cfg = LaunchConfiguration("world_config")
    arm_cfg = LaunchConfiguration("arm_config")
    lifecycle = {"autostart": LaunchConfiguration("autostart")}  # after the YAML: wins over it
    # the simulated session learns simulated objects: into a memory file of its own, never the robot's
    # (a file keyed like the learner's section of the config: a plain value would lose against that)
    memory = LaunchConfiguration("memory_config")
    # a misspelt argument stops the launch with one line instead of being ignored (settings/launch_args.py)
    return LaunchDescription(checked(__file__, [
        DeclareLaunchArgument("namespace", default_value="", description="namespace of every node"),
        DeclareLaunchArgument("seed", default_value="0", description="world seed (texture, lighting)"),
        DeclareLaunchArgument("config", default_value=os.path.join(cfg, "cbcl_pr.yaml"),
                              description="extractor and learner parameters"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="extractor and learner configure and activate themselves; "
                                          "false: unconfigured, for a lifecycle manager"),
        DeclareLaunchArgument("memory_config", default_value=os.path.join(cfg, "sim_memory.yaml"),
                              description="the learner's memory file in this session (config/sim_memory.yaml: "
                                          "sim_memory.safetensors in its memory folder)"),
        DeclareLaunchArgument("world_config", default_value=os.path.join(cfg, "sim_world.yaml"),
                              description="simulated world parameters"),
        DeclareLaunchArgument("arm_config", default_value=os.path.join(cfg, "arm.yaml"),
                              description="arm node parameters (backend, side, tolerances)"),
        DeclareLaunchArgument("with_page", default_value="false",
                              description="also serve the teaching page (http://127.0.0.1:8080)"),
        DeclareLaunchArgument("page_config", default_value=os.path.join(cfg, "teaching_page.yaml"),
                              description="teaching page parameters (address, port, token)"),
        Node(package="cbcl_pr_ros", executable="teaching_page_node", name="teaching_page", namespace=namespace,
             parameters=[LaunchConfiguration("page_config")], output="screen",
             condition=IfCondition(LaunchConfiguration("with_page"))),
        Node(package="cbcl_pr_ros", executable="sim_world_node", name="sim_world", namespace=namespace,
             parameters=[world_cfg, {"seed": seed}], output="screen"),
        Node(package="cbcl_pr_ros", executable="feature_extractor_node", name="feature_extractor",
             namespace=namespace, parameters=[perception, lifecycle], output="screen",
             sigterm_timeout="20"),  # its torch exit took > 5 s at load 20 too (ros2 launch, 2026-11-24)
        Node(package="cbcl_pr_ros", executable="learner_node", name="learner", namespace=namespace,
             parameters=[perception, lifecycle, memory], output="screen",
             sigterm_timeout="20"),  # see perception.launch.py
        Node(package="cbcl_pr_ros", executable="arm_node", name="arm", namespace=namespace,
             parameters=[arm_cfg], output="screen"),
    ], OpaqueFunction))
