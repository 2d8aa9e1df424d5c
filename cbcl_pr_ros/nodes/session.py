"""``teaching_session``: the nodes of a teaching session in ONE process, from the same YAML.

Where ``ros2 launch`` is not installed (ROS 2 from PyPI wheels has no ``launch``), this command starts
what ``launch/teaching_session.launch.py`` starts, with the same ``config/cbcl_pr.yaml``, on one
MultiThreadedExecutor. In one process the learner computes features for request images with the
extractor's own backbone object (no second model, no service round trip).

Nodes are built by factories in :data:`NODE_FACTORIES` (``world`` and ``arm`` imported lazily); each
node reads its own YAML (:mod:`cbcl_pr_ros.settings.node_configs`), as with ``ros2 launch``.

Examples::

    teaching_session --camera-topic /camera/image_raw
    teaching_session --camera realsense --page     # RGB-D: colour, aligned depth, CameraInfo (docs/quickstart.md)
    teaching_session --namespace robot1 --nodes extractor,learner,world,arm --arm-config my_arm.yaml
    teaching_session --nodes extractor,learner,world,arm --page    # then open http://127.0.0.1:8080
    python -m cbcl_pr_ros.nodes.session --config my.yaml -- --ros-args --log-level debug
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

from cbcl_pr_ros.cli.arg_types import int_in
from cbcl_pr_ros.runtime.heap import keep_heap_flat
from cbcl_pr_ros.settings.node_configs import params_files

__all__ = ["SessionContext", "NODE_FACTORIES", "CAMERA_PRESETS", "SIM_MEMORY", "build_ros_args", "camera_topics",
           "memory_files", "memory_override",
           "session_params_files", "parse_args", "build_nodes", "main"]

log = logging.getLogger(__name__)


@dataclass
class SessionContext:
    """What factories see: the namespace, the nodes built so far, and shared in-process objects."""
    namespace: str = ""
    nodes: dict[str, Any] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)


NodeFactory = Callable[[SessionContext], Any]


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _extractor(ctx: SessionContext) -> Any:
    cls = _import("cbcl_pr_ros.nodes.feature_extractor:FeatureExtractorNode")
    node = cls(namespace=ctx.namespace or None)
    ctx.shared["extractor"] = node
    return node


def _learner(ctx: SessionContext) -> Any:
    cls = _import("cbcl_pr_ros.nodes.learner:LearnerNode")
    source = None
    if "extractor" in ctx.shared:  # same process: call the extractor's backbone directly
        # local: rclpy and the service clients load only when a session builds its nodes
        from cbcl_pr_ros.nodes.feature_source import ExtractorFeatureSource

        source = ExtractorFeatureSource(ctx.shared["extractor"])
    return cls(feature_source=source, namespace=ctx.namespace or None)


def lazy_factory(target: str) -> NodeFactory:
    """Factory for a node class named ``module:Class`` taking ``namespace=``, imported when built."""
    def make(ctx: SessionContext) -> Any:
        return _import(target)(namespace=ctx.namespace or None)
    make.__doc__ = f"builds {target}"
    return make


# Build order is this dict's order (the learner uses the extractor's backbone, so it comes after).
NODE_FACTORIES: dict[str, NodeFactory] = {
    "extractor": _extractor,
    "learner": _learner,
    "world": lazy_factory("cbcl_pr_ros.nodes.sim_world:SimWorldNode"),
    "arm": lazy_factory("cbcl_pr_ros.nodes.arm:ArmNode"),
    "page": lazy_factory("cbcl_pr_ros.nodes.teaching_page:TeachingPageNode"),
}


# With the simulated world and the package's own YAML, the learner keeps a memory file of its own:
# simulated objects stay out of the real robot's memory (launch/sim_teaching_demo.launch.py: the same).
SIM_MEMORY = "sim_memory.safetensors"


def memory_override(opts: argparse.Namespace, kinds: list[str]) -> str | None:
    """The learner's memory_path for this session: ``--memory``, else :data:`SIM_MEMORY` with the
    simulated world and no ``--config`` of one's own, else None (the YAML's)."""
    if opts.memory is not None:
        return opts.memory
    if "world" in kinds and "learner" in kinds and opts.config is None:
        return SIM_MEMORY
    return None


def memory_files(opts: argparse.Namespace, kinds: list[str], directory: str) -> list[str]:
    """Params files that set the learner's memory_path (:func:`memory_override`): one in ``directory``
    keyed like the learner's section of the YAML (a ``-p`` loses against that section), given after
    the config; none for the YAML's own."""
    import yaml

    memory = memory_override(opts, kinds)
    if memory is None:
        return []
    path = os.path.join(directory, "session_memory.params.yaml")
    with open(path, "w", encoding="utf8") as fh:
        yaml.safe_dump({"/**/learner": {"ros__parameters": {"memory_path": memory}}}, fh)
    return [path]


#: executor threads per node: a node has a handful of callback groups, and each thread is a stack
MAX_THREADS = 64

# The usual topics of RGB-D camera drivers: (colour image, depth aligned to it, the colour CameraInfo).
# realsense2_camera 4.x with align_depth.enable:=true; launch/depth_camera.launch.py has the same defaults.
CAMERA_PRESETS: dict[str, tuple[str, str, str]] = {
    "realsense": ("/camera/camera/color/image_raw", "/camera/camera/aligned_depth_to_color/image_raw",
                  "/camera/camera/color/camera_info"),
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="teaching_session",
        description="Start the cbcl_pr_ros nodes in one process (what launch/teaching_session.launch.py "
                    "starts), configured by the same YAML. Extra ROS arguments go after --ros-args.")
    ap.add_argument("--config", default=None, help="extractor and learner parameters (default: the "
                    "package's config/cbcl_pr.yaml)")
    ap.add_argument("--world-config", default=None, help="simulated world parameters (default: "
                    "config/sim_world.yaml)")
    ap.add_argument("--arm-config", default=None, help="arm node parameters (default: config/arm.yaml)")
    ap.add_argument("--page-config", default=None, help="teaching page parameters (default: "
                    "config/teaching_page.yaml)")
    ap.add_argument("--page", action="store_true", help="also serve the teaching page (node kind 'page') on "
                    "http://127.0.0.1:8080; address and port in --page-config (docs/teaching_page.md)")
    ap.add_argument("--namespace", default="", help="namespace of every node, e.g. robot1")
    ap.add_argument("--camera-topic", default="", help="camera topic to remap 'image' to, e.g. "
                    "/camera/image_raw")
    ap.add_argument("--depth-topic", default="", help="depth image aligned to the camera image (16UC1 mm or "
                    "32FC1 m) to remap 'depth' to; objects get 3D positions from it")
    ap.add_argument("--camera-info-topic", default="", help="CameraInfo of the camera image to remap "
                    "'camera_info' to")
    ap.add_argument("--camera", choices=sorted(CAMERA_PRESETS), default=None,
                    help="the three topics of a depth camera driver (realsense: realsense2_camera with "
                         "align_depth.enable:=true); --camera-topic/--depth-topic/--camera-info-topic win")
    ap.add_argument("--nodes", default="extractor,learner",
                    help=f"comma-separated node kinds to start; known: {','.join(NODE_FACTORIES)}")
    ap.add_argument("--memory", default=None, help="the learner's memory file (a name inside its memory "
                    "folder, or an absolute path; '' = RAM only); default: the config's, but "
                    f"{SIM_MEMORY} with the simulated world")
    ap.add_argument("--threads", type=int_in(0, MAX_THREADS), default=0,
                    help=f"executor threads per node, at most {MAX_THREADS} (0 = 4)")
    ap.add_argument("--no-autostart", action="store_true",
                    help="leave the lifecycle nodes (extractor, learner) unconfigured for a lifecycle "
                         "manager (ros2 lifecycle set /learner configure); as autostart:=false")
    return ap.parse_args(argv)


def session_params_files(opts: argparse.Namespace, kinds: list[str]) -> list[str]:
    """The YAML files of the started node kinds (absolute paths), as the launch files give them."""
    over = {"config": opts.config, "world_config": opts.world_config, "arm_config": opts.arm_config,
            "page_config": opts.page_config}
    return [os.path.abspath(f) for f in params_files(kinds, over)]


def camera_topics(opts: argparse.Namespace) -> tuple[str, str, str]:
    """(camera, depth, camera_info) topics to remap to: the explicit flags, else the ``--camera``
    preset's, else "" (the nodes' own names ``image``, ``depth``, ``camera_info``)."""
    preset = CAMERA_PRESETS.get(opts.camera or "", ("", "", ""))
    given = (opts.camera_topic, opts.depth_topic, opts.camera_info_topic)
    return tuple(g or p for g, p in zip(given, preset))  # type: ignore[return-value]


def build_ros_args(files: list[str], camera_topic: str = "", extra: list[str] | None = None,
                   autostart: bool = True, depth_topic: str = "", camera_info_topic: str = "") -> list[str]:
    """rclpy.init arguments: the params files (sections keyed by node), ``autostart`` and the camera
    remappings. ``-p`` lands in the same ``/**`` section as the YAML's ``autostart``, after it."""
    args = ["teaching_session", "--ros-args"]
    for f in files:
        args += ["--params-file", f]
    if not autostart:
        args += ["-p", "autostart:=false"]
    for name, topic in (("image", camera_topic), ("depth", depth_topic), ("camera_info", camera_info_topic)):
        if topic:
            args += ["-r", f"{name}:={topic}"]
    if extra:
        args += [a for a in extra if a != "--ros-args"]
    return args


def build_nodes(kinds: list[str], ctx: SessionContext) -> list[Any]:
    unknown = [k for k in kinds if k not in NODE_FACTORIES]
    if unknown:
        raise ValueError(f"unknown node kind(s) {unknown}; known: {', '.join(NODE_FACTORIES)}")
    for name, factory in NODE_FACTORIES.items():
        if name in kinds:
            ctx.nodes[name] = factory(ctx)
    return list(ctx.nodes.values())


def main(argv: list[str] | None = None) -> int:
    # local: importing the session (its factories, argument parsing) loads no rclpy; it loads when a session starts
    from cbcl_pr_ros.nodes.spin import own_args, run_nodes

    argv = list(sys.argv if argv is None else argv)
    ros_extra = argv[argv.index("--ros-args"):] if "--ros-args" in argv else []
    opts = parse_args([a for a in own_args(argv, "teaching_session")[1:] if a != "--"])
    kinds = [k.strip() for k in opts.nodes.split(",") if k.strip()]
    if opts.page and "page" not in kinds:
        kinds.append("page")
    unknown = [k for k in kinds if k not in NODE_FACTORIES]
    if not kinds or unknown:
        print(f"teaching_session: unknown node kind(s) {unknown or kinds}; known: "
              f"{', '.join(NODE_FACTORIES)}", file=sys.stderr)
        return 2
    files = session_params_files(opts, kinds)
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        print(f"teaching_session: config file not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    ctx = SessionContext(namespace=opts.namespace.strip("/"))

    def make() -> list[Any]:
        nodes = build_nodes(kinds, ctx)
        nodes[0].get_logger().info(f"teaching session: {', '.join(kinds)} in one process, config "
                                   f"{', '.join(files)}")
        return nodes

    # one executor per node, signals handled in order (cbcl_pr_ros.nodes.spin)
    camera, depth, info = camera_topics(opts)
    if "learner" in kinds:
        keep_heap_flat()  # before the executors' threads exist (runtime/heap.py)
    with tempfile.TemporaryDirectory(prefix="teaching_session_") as tmp:
        args = build_ros_args(files + memory_files(opts, kinds, tmp), camera, ros_extra,
                              autostart=not opts.no_autostart, depth_topic=depth, camera_info_topic=info)
        return run_nodes(make, threads=opts.threads or 4, args=args, on_stop=_log_stop_reports)


def _log_stop_reports(nodes: list[Any]) -> None:
    """Each node's counters and stage times as it stops (plain logging: rosout is gone by then)."""
    for node in nodes:
        report = getattr(node, "stop_report", None)
        if report is not None:
            logging.getLogger(__name__).warning(report())


if __name__ == "__main__":
    sys.exit(main())
