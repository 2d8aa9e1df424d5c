"""``--help`` for the node executables: print usage and exit 0 before anything starts.

rclpy ignores ``--help`` (it is not a ROS argument), so a node used to start instead of explaining
itself. Only the arguments before ``--ros-args`` are looked at: ``-h`` after it belongs to ROS.
"""
from __future__ import annotations

import difflib
import inspect
import re
import sys
from typing import Any, Iterable, Mapping, Sequence, Union

__all__ = ["wants_help", "misplaced_ros_args", "user_text", "usage", "exit_on_help"]

# ROS arguments that mean nothing before --ros-args: rcl ignores them there, so the node started in
# the root namespace with no remap and waited on a topic the person never meant
_ROS_FLAGS = ("-r", "--remap", "-p", "--param", "--params-file", "--log-level", "-e", "--enclave")

# {name: (default, description)}, or ParamSpec-like objects (name, default, description)
Params = Union[Mapping[str, tuple[Any, str]], Iterable[Any], None]


def _table(params: Params) -> dict[str, tuple[Any, str]]:
    if params is None:
        return {}
    if isinstance(params, Mapping):
        return dict(params)
    return {p.name: (p.default, p.description) for p in params}


def wants_help(argv: Sequence[str]) -> bool:
    """True when ``-h``/``--help`` comes before any ``--ros-args`` (argv[0] is the program)."""
    own = list(argv[1:])
    if "--ros-args" in own:
        own = own[:own.index("--ros-args")]
    return "-h" in own or "--help" in own


def misplaced_ros_args(argv: Sequence[str]) -> list[str]:
    """ROS flags (``-r``, ``-p``, ...) given before ``--ros-args``, where ROS ignores them."""
    own = list(argv[1:])
    if "--ros-args" in own:
        own = own[:own.index("--ros-args")]
    return [a for a in own if a.split("=", 1)[0] in _ROS_FLAGS]


# Paragraphs of a module docstring a person starting the node needs; the rest (module layout,
# executor and lock internals) is for developers and stays in the source and docs/nodes.md.
_FOR_USERS = ("topics", "services", "publishes", "subscribes", "examples", "serves", "usage", "parameters")
_ROLE = re.compile(r":(?:mod|class|func|meth|data|attr):`~?([^`]+)`")


def user_text(doc: str) -> str:
    """A module docstring as a person reads it: its first paragraph and the paragraphs about topics,
    services and examples, without Sphinx markup (``:class:`~x.Y``` -> ``Y``, double backticks -> plain)."""
    paras = inspect.cleandoc(doc).split("\n\n")
    keep = [paras[0]] + [p for p in paras[1:] if p.lstrip().lower().startswith(_FOR_USERS)
                         or p.startswith("    ") or p.rstrip().endswith("::")]
    text = "\n\n".join(keep)
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text)
    return text.replace("``", "").replace("::\n", ":\n")


def usage(prog: str, doc: str | None, params: Params = None) -> str:
    """Usage text: how to run it, what it does (:func:`user_text`), the parameters with defaults."""
    lines = [f"usage: {prog} [-h] [--ros-args [-p NAME:=VALUE ...] [--params-file FILE] [-r FROM:=TO ...]]", ""]
    if doc:
        lines += [user_text(doc), ""]
    params = _table(params)
    if params:
        lines.append("parameters (-p NAME:=VALUE, or a --params-file YAML):")
        width = max(len(n) for n in params)
        for name, (default, text) in params.items():
            lines.append(f"  {name:<{width}}  {text} (default {default!r})")
        lines.append("")
    lines.append("Stop with Ctrl-C. Topic and service names are relative: -r __ns:=/robot1 moves them all.")
    return "\n".join(lines)


def exit_on_help(argv: Sequence[str], prog: str, doc: str | None, params: Params = None) -> None:
    """Print :func:`usage` and exit 0 when help was asked for; exit 2 with the corrected command when
    ROS arguments come before ``--ros-args``; return otherwise."""
    if wants_help(argv):
        print(usage(prog, doc, params))
        sys.exit(0)
    stray = misplaced_ros_args(argv)
    if stray:
        own = list(argv[1:])
        cut = own.index("--ros-args") if "--ros-args" in own else len(own)
        # a misspelt --ros-args (--ros-arg, -ros-args) is what put them here: left out of the fix
        mine = [a for a in own[:cut] if a == "--" or not difflib.get_close_matches(a, ["--ros-args"], cutoff=0.8)]
        fixed = " ".join([prog, "--ros-args", *mine, *own[cut + 1:]])
        print(f"{prog}: {stray[0]} is a ROS argument and only counts after --ros-args (without it the "
              f"node would ignore it); run: {fixed}", file=sys.stderr)
        sys.exit(2)
