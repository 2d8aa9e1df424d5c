"""``--help`` for the node executables: print usage and exit 0 before anything starts.

rclpy ignores ``--help`` (it is not a ROS argument), so a node used to start instead of explaining
itself. Only the arguments before ``--ros-args`` are looked at: ``-h`` after it belongs to ROS.
"""
from __future__ import annotations

import inspect
import sys
from typing import Any, Iterable, Mapping, Sequence, Union

__all__ = ["wants_help", "usage", "exit_on_help"]

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


def usage(prog: str, doc: str | None, params: Params = None) -> str:
    """Usage text: how to run it, the module docstring, the parameters with defaults."""
    lines = [f"usage: {prog} [-h] [--ros-args [-p NAME:=VALUE ...] [--params-file FILE] [-r FROM:=TO ...]]", ""]
    if doc:
        lines += [inspect.cleandoc(doc), ""]
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
    """Print :func:`usage` and exit 0 when help was asked for; return otherwise."""
    if wants_help(argv):
        print(usage(prog, doc, params))
        sys.exit(0)
