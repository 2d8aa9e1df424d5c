"""Issue 23, outcome 1, kept: the learner node stays a thin adapter a newcomer can read.

``nodes/learner.py`` has at most 300 lines, and no function of the ROS adapters (``nodes``) or of
the learner's service logic (``service``) or the process utilities (``runtime``) is longer than 60 lines, read from the sources with
``ast`` (decorators and docstrings count). A module or function that grows past them is split by
concern (docs/architecture.md), not squeezed.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cbcl_pr_ros"
MAX_LEARNER_LINES = 300
MAX_FUNCTION_LINES = 60


def _functions(path: Path) -> list[tuple[str, int]]:
    """(name at line, length in lines) of every function and method in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found.append((f"{node.name} at line {node.lineno}", node.end_lineno - start + 1))
    return found


def test_learner_node_is_at_most_300_lines():
    lines = len((PACKAGE / "nodes" / "learner.py").read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LEARNER_LINES, f"nodes/learner.py has {lines} lines (at most {MAX_LEARNER_LINES})"


@pytest.mark.parametrize("layer", ["nodes", "service", "runtime"])
def test_no_function_is_longer_than_60_lines(layer):
    files = sorted((PACKAGE / layer).glob("*.py"))
    assert files, f"no modules under cbcl_pr_ros/{layer}"
    long = [f"{path.name}: {name} ({n} lines)" for path in files for name, n in _functions(path)
            if n > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines in {layer}:\n" + "\n".join(long)


def test_the_measure_counts_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    path = tmp_path / "m.py"
    path.write_text(f"def f():\n{body}\n", encoding="utf-8")
    assert _functions(path) == [("f at line 1", MAX_FUNCTION_LINES + 1)]
