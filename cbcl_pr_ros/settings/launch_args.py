"""Launch arguments a launch file does not declare (ROS-free; the launch files call it).

``ros2 launch`` takes any ``name:=value`` and ignores one the file never declares, so a misspelt
argument (``camera_topc:=/camera/image_raw``) started the nodes on the default without a word. The
launch file named on the command line refuses such a launch with one line; a file included by
another one is not checked (its parent's arguments reach it too).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from cbcl_pr_ros.settings.param_names import nearest_name_hint

__all__ = ["unknown_launch_arguments", "refuse_unknown_arguments", "checked"]


def unknown_launch_arguments(argv: Sequence[str], launch_file: str, declared: Iterable[str]) -> str | None:
    """Why a launch is refused: the ``name:=value`` arguments after ``launch_file`` in ``argv`` (the
    ``ros2 launch`` command line) that it does not declare, with the nearest declared name; None when
    all are declared or ``launch_file`` is not the one named on the command line."""
    base = os.path.basename(launch_file)
    at = next((i for i, a in enumerate(argv) if os.path.basename(a) == base), None)
    if at is None:
        return None
    names = sorted(set(declared))
    given = [a.split(":=", 1)[0] for a in argv[at + 1:] if ":=" in a and not a.startswith("-")]
    unknown = [g for g in dict.fromkeys(given) if g not in names]
    if not unknown:
        return None
    said = [f"'{name}'{nearest_name_hint(name, names)}" for name in unknown]
    return (f"{base} has no launch argument {', '.join(said)}; it takes {', '.join(names)} "
            f"(`ros2 launch cbcl_pr_ros {base} --show-args` describes them)")


def refuse_unknown_arguments(context: Any, launch_file: str, declared: Sequence[str]) -> list:
    """An ``OpaqueFunction`` body: raise (``ros2 launch`` prints the one line and starts nothing) when
    :func:`unknown_launch_arguments` finds a reason."""
    reason = unknown_launch_arguments(sys.argv, launch_file, declared)
    if reason:
        raise ValueError(reason)
    return []


def checked(launch_file: str, entities: Sequence[Any], opaque_function: Any) -> list:
    """``entities`` with the argument check placed right after their ``DeclareLaunchArgument``s, before
    any node (``opaque_function``: launch's ``OpaqueFunction``)."""
    declares = [e for e in entities if type(e).__name__ == "DeclareLaunchArgument"]
    rest = [e for e in entities if type(e).__name__ != "DeclareLaunchArgument"]
    check = opaque_function(function=refuse_unknown_arguments, args=[launch_file, [d.name for d in declares]])
    return [*declares, check, *rest]
