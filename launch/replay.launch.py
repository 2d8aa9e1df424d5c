"""Replay a recorded teaching session into the nodes, as it happened.

    ros2 launch cbcl_pr_ros replay.launch.py bag:=/path/to/session
    ros2 launch cbcl_pr_ros replay.launch.py bag:=/path/to/session rate:=4.0 start_nodes:=false
    ros2 launch cbcl_pr_ros replay.launch.py bag:=/path/to/session record_to:=/tmp/live_answers

By default the perception nodes (feature_extractor, learner) are started too, reading the bag's
camera topic; replay_session waits for their services, publishes the recorded frames at the
recorded timing and re-issues the teaching events as service calls. ``record_to`` also records
the replayed frames and the live answers into a new bag. When the replay ends the launch ends too,
with the nodes it started (``exit_after_replay:=false`` keeps them). What the replay teaches is
temporary: the learner's memory is loaded back afterwards (``keep_taught:=true`` keeps it). Where
``ros2 launch`` is not installed, run ``teaching_session`` and ``replay_session`` (and
``record_session``) by hand.
"""
import os

import yaml
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from cbcl_pr_ros.settings.launch_args import checked


def _replay_defaults(share):
    path = os.path.join(share, "config", "bags.yaml")
    with open(path, encoding="utf8") as fh:
        return (yaml.safe_load(fh) or {}).get("replay", {})


def _tools(context, *args, **kwargs):
    """The replay (and optional recorder) process, with arguments resolved from the launch config."""
    get = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    bag = get("bag")
    if not bag:
        raise RuntimeError("replay.launch.py needs bag:=<bag directory>")
    replay_args = [bag, "--events-out", get("events_out"), "--learner-ns", get("namespace"),
                   "--discovery-wait", "5"]
    replay_args += ["--fast"] if get("fast").lower() == "true" else ["--rate", get("rate")]
    if get("report"):
        replay_args += ["--report", get("report")]
    if get("keep_taught").lower() == "true":
        replay_args += ["--keep-taught"]
    actions = []
    record_to = get("record_to")
    if record_to:
        actions.append(Node(package="cbcl_pr_ros", executable="record_session", name="bag_recorder",
                            arguments=[record_to, "--topics", get("camera_topic"), "--reliable"],
                            output="screen"))
        replay_args += ["--min-subscribers", "2"]
    replay = Node(package="cbcl_pr_ros", executable="replay_session", name="bag_replay",
                  arguments=replay_args, output="screen", emulate_tty=True)
    actions.append(replay)
    if get("exit_after_replay").lower() == "true":  # the nodes it started go with it
        from launch.actions import RegisterEventHandler, Shutdown
        from launch.event_handlers import OnProcessExit

        actions.append(RegisterEventHandler(OnProcessExit(target_action=replay,
                                                          on_exit=[Shutdown(reason="the replay ended")])))
    return actions


def generate_launch_description():
    share = get_package_share_directory("cbcl_pr_ros")
    defaults = _replay_defaults(share)
    # a misspelt argument stops the launch with one line instead of being ignored (settings/launch_args.py)
    return LaunchDescription(checked(__file__, [
        DeclareLaunchArgument("bag", description="bag directory (metadata.yaml + .mcap/.db3)"),
        DeclareLaunchArgument("rate", default_value=str(defaults.get("rate", 1.0)),
                              description="playback rate (1.0 = as recorded)"),
        DeclareLaunchArgument("fast", default_value="false", description="true: as fast as possible"),
        DeclareLaunchArgument("camera_topic", default_value="/camera/image_raw",
                              description="the bag's camera topic (the nodes read it)"),
        DeclareLaunchArgument("depth_topic", default_value="depth",
                              description="the bag's aligned depth topic, if it has one"),
        DeclareLaunchArgument("camera_info_topic", default_value="camera_info",
                              description="the bag's CameraInfo topic, if it has one"),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the nodes"),
        DeclareLaunchArgument("config", default_value=os.path.join(share, "config", "cbcl_pr.yaml"),
                              description="parameters YAML of the nodes"),
        DeclareLaunchArgument("start_nodes", default_value="true",
                              description="also start feature_extractor and learner"),
        DeclareLaunchArgument("events_out", default_value=str(defaults.get("events_out", "teaching_events")),
                              description="topic of the live answers as TeachingEvents ('' = none)"),
        DeclareLaunchArgument("record_to", default_value="",
                              description="also record frames and live answers into this new bag"),
        DeclareLaunchArgument("report", default_value="", description="write the JSON report here"),
        DeclareLaunchArgument("keep_taught", default_value="false",
                              description="keep what the replay teaches in the learner's memory"),
        DeclareLaunchArgument("exit_after_replay", default_value="true",
                              description="end the launch (and the nodes it started) when the replay ends; "
                                          "false keeps the nodes running"),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(os.path.join(share, "launch", "perception.launch.py")),
            launch_arguments={"camera_topic": LaunchConfiguration("camera_topic"),
                              "depth_topic": LaunchConfiguration("depth_topic"),
                              "camera_info_topic": LaunchConfiguration("camera_info_topic"),
                              "namespace": LaunchConfiguration("namespace"),
                              "config": LaunchConfiguration("config"),
                              "autostart": "true"}.items(),  # replay_session needs them active
            condition=IfCondition(LaunchConfiguration("start_nodes"))),
        OpaqueFunction(function=_tools),
    ], OpaqueFunction))
