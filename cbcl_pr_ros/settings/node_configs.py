"""Which YAML file configures which node, for every way of starting them.

``ros2 launch`` (launch/*.launch.py), ``teaching_session`` (one process) and the main job
(``run_demo_session``) must give each node its own file: the extractor and the learner read
``config/cbcl_pr.yaml``, the simulated world ``config/sim_world.yaml`` and the arm ``config/arm.yaml``.
The launch files name the same files through the same launch-argument names (``config``,
``world_config``, ``arm_config``, ``page_config``); the one-process paths take them from here.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cbcl_pr_ros.share import find_share_file

__all__ = ["NodeKind", "NODE_KINDS", "params_files"]


@dataclass(frozen=True)
class NodeKind:
    """A node of a session: its ROS name, and the launch argument and default file configuring it."""
    node_name: str
    config_arg: str
    default_file: str


NODE_KINDS: dict[str, NodeKind] = {
    "extractor": NodeKind("feature_extractor", "config", "cbcl_pr.yaml"),
    "learner": NodeKind("learner", "config", "cbcl_pr.yaml"),
    "world": NodeKind("sim_world", "world_config", "sim_world.yaml"),
    "arm": NodeKind("arm", "arm_config", "arm.yaml"),
    "page": NodeKind("teaching_page", "page_config", "teaching_page.yaml"),
}


def params_files(kinds: Iterable[str], overrides: Mapping[str, str | None] | None = None) -> list[str]:
    """The parameter files for the node ``kinds`` of one process, each once, in ``NODE_KINDS`` order.

    ``overrides`` maps a launch-argument name (``config``, ``world_config``, ``arm_config``, ``page_config``) to
    another file; unset or empty means the package's default. The files key their sections by node
    name (``/**/arm``), so in one process each node still reads only its own section, plus the
    ``/**`` section of ``cbcl_pr.yaml`` (names only the extractor and the learner declare).
    """
    wanted = list(kinds)
    unknown = [k for k in wanted if k not in NODE_KINDS]
    if unknown:
        raise ValueError(f"unknown node kind(s) {unknown}; known: {', '.join(NODE_KINDS)}")
    overrides = overrides or {}
    files: list[str] = []
    for name, kind in NODE_KINDS.items():
        if name in wanted:
            path = overrides.get(kind.config_arg) or str(find_share_file("config", kind.default_file))
            if path not in files:
                files.append(path)
    return files
