"""Parameter names given at start that no node of the package knows (ROS-free).

ROS ignores a start value (``-p``, a YAML file, a launch override) whose name the node never declares,
so a misspelt name (``max_clustres``) would leave the node running on the default its user meant to
change, without a word. These helpers name such values, with the nearest real name.

A name another node of the package declares is not reported: one YAML file (its ``/**`` section) or
one ``-p`` of ``teaching_session`` reaches every node of the process.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

from cbcl_pr_ros.settings.params import PARAMS, REMOVED, ParamSpec
from cbcl_pr_ros.settings.robot_params import ARM_PARAMS, PAGE_PARAMS, SIM_WORLD_PARAMS

__all__ = ["nearest_name_hint", "package_parameter_names", "unknown_parameters", "unknown_parameter_note"]

# declared by rclpy itself, or by the publishers and subscriptions after the package's own parameters
_ROS_OWNED = ("use_sim_time", "start_type_description_service")
_ROS_OWNED_PREFIXES = ("qos_overrides.",)


def nearest_name_hint(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean X?)`` with the candidate nearest a misspelt ``name``, or "" when none is close."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def package_parameter_names() -> frozenset[str]:
    """Every parameter name some node of the package declares, earlier names and removed ones included."""
    specs: tuple[ParamSpec, ...] = (*PARAMS, *ARM_PARAMS, *SIM_WORLD_PARAMS, *PAGE_PARAMS)
    return frozenset({s.name for s in specs} | {a for s in specs for a in s.aliases} | set(REMOVED))


def unknown_parameters(given: Iterable[str], declared: Callable[[str], bool]) -> list[str]:
    """The names in ``given`` that neither this node (``declared``), another node of the package nor
    ROS itself uses, in the order given."""
    known = package_parameter_names()
    return [n for n in given if not declared(n) and n not in known and n not in _ROS_OWNED
            and not n.startswith(_ROS_OWNED_PREFIXES)]


def unknown_parameter_note(name: str, node: str, candidates: Iterable[str],
                           effect: str = "given at start is not a parameter of {node} and changes nothing") -> str:
    """One line for a value nobody reads: the name, ``effect`` (what became of it), the nearest name of
    ``candidates`` (the node's own parameters) when one is close, and where the list is."""
    return (f"parameter {name!r} {effect.format(node=node)}{nearest_name_hint(name, candidates)}; "
            f"`{node}_node --help` lists them")
