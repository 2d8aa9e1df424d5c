"""The layering, read from the sources: who imports whom among cbcl_pr_ros modules.

Every ``import``/``from ... import`` statement (also those inside functions and ``TYPE_CHECKING``
blocks, and ``importlib.import_module("literal")`` calls) counts: a lazy import hides a dependency
from the import order, not from the design. Rules (docs/architecture.md):

- no module outside ``cbcl_pr_ros.nodes`` imports ``cbcl_pr_ros.nodes`` (the nodes are the top layer);
- every package the docs call ROS-free (docs/architecture.md's layer table: all but ``nodes``) imports
  no ROS package (rclpy, messages, launch); ``bags`` alone may use ``rosbags``, the pure-Python bag
  library that needs no ROS installation;
- no import cycle between modules, nor between the top-level subpackages (``core``, ``bags``...).
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cbcl_pr_ros"
ROS_FREE = ("cbcl_pr_ros.core", "cbcl_pr_ros.features", "cbcl_pr_ros.evaluation", "cbcl_pr_ros.perception",
            "cbcl_pr_ros.objects",
            "cbcl_pr_ros.robot", "cbcl_pr_ros.bags", "cbcl_pr_ros.service", "cbcl_pr_ros.runtime",
            "cbcl_pr_ros.settings", "cbcl_pr_ros.teaching_page", "cbcl_pr_ros.cli", "cbcl_pr_ros.share",
            "cbcl_pr_ros.stamps", "cbcl_pr_ros.request_checks", "cbcl_pr_ros.plurals",
            "cbcl_pr_ros.lookalike")
# ROS-free packages allowed one ROS-ecosystem library that runs without ROS
ROS_FREE_ALLOWED = {"cbcl_pr_ros.bags": {"rosbags"}}
ROS_PACKAGES = {"rclpy", "rosidl_runtime_py", "rosidl_parser", "launch", "launch_ros", "ament_index_python",
                "std_msgs", "sensor_msgs", "geometry_msgs", "builtin_interfaces", "rcl_interfaces",
                "lifecycle_msgs", "rosbags", "rosbag2_py", "cbcl_pr_ros.msg", "cbcl_pr_ros.srv"}

# KNOWN EXCEPTIONS, each owned by another open change. The lead removes an entry when merging the
# change that fixes it; an entry that no longer matches anything fails test_allow_list_is_current.
KNOWN_MODULE_CYCLES: set[frozenset[str]] = set()
KNOWN_PACKAGE_CYCLES: set[frozenset[str]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Absolute names of what the module at ``path`` imports (a ``from X import Y`` of a submodule
    ``X.Y`` names ``X.Y``; of an attribute, ``X``)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            subs = {f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known}
            found.update(subs)
            if len(subs) < len(node.names):
                found.add(module)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _subpackage(name: str) -> str:
    return ".".join(name.split(".")[:2])


def _module_cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    g = nx.DiGraph()
    g.add_nodes_from(graph)
    g.add_edges_from((a, b) for a, targets in graph.items() for b in targets if b in graph and b != a)
    return {frozenset(c) for c in nx.strongly_connected_components(g) if len(c) > 1}


def _package_cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    g = nx.DiGraph()
    for a, targets in graph.items():
        for b in targets:
            if _within(b, "cbcl_pr_ros") and b != "cbcl_pr_ros" and a != "cbcl_pr_ros":
                pa, pb = _subpackage(a), _subpackage(b)
                if pa != pb:
                    g.add_edge(pa, pb)
    return {frozenset(c) for c in nx.strongly_connected_components(g) if len(c) > 1}


def test_the_reader_sees_the_package():
    graph = _graph()
    assert "cbcl_pr_ros.core.learner" in graph and "cbcl_pr_ros.nodes.learner" in graph
    # a relative import, an absolute one and a lazy one are all resolved
    assert "cbcl_pr_ros.core.memory" in graph["cbcl_pr_ros.core.persistence"]
    assert "cbcl_pr_ros.service.controller" in graph["cbcl_pr_ros.bags.offline_eval"]
    assert any(_within(m, "rclpy") for m in graph["cbcl_pr_ros.nodes.learner"])


def test_the_reader_flags_a_planted_cycle_and_upward_import(tmp_path):
    """The checks below are not vacuous: the same reader finds a cycle and an upward import."""
    (tmp_path / "cbcl_pr_ros" / "core").mkdir(parents=True)
    (tmp_path / "cbcl_pr_ros" / "nodes").mkdir()
    a = tmp_path / "cbcl_pr_ros" / "core" / "a.py"
    b = tmp_path / "cbcl_pr_ros" / "core" / "b.py"
    a.write_text("from .b import f\nimport rclpy\n")
    b.write_text("def f():\n    from cbcl_pr_ros.core import a\n    import cbcl_pr_ros.nodes.x\n")
    known = {"cbcl_pr_ros.core.a", "cbcl_pr_ros.core.b", "cbcl_pr_ros.nodes.x"}
    graph = {"cbcl_pr_ros.core.a": _imports("cbcl_pr_ros.core.a", a, known),
             "cbcl_pr_ros.core.b": _imports("cbcl_pr_ros.core.b", b, known)}
    assert _module_cycles(graph) == {frozenset(graph)}
    assert "cbcl_pr_ros.nodes.x" in graph["cbcl_pr_ros.core.b"] and "rclpy" in graph["cbcl_pr_ros.core.a"]


def test_nothing_outside_nodes_imports_nodes():
    upward = sorted(f"{a} imports {b}" for a, targets in _graph().items() if not _within(a, "cbcl_pr_ros.nodes")
                    for b in targets if _within(b, "cbcl_pr_ros.nodes"))
    assert not upward, "modules outside cbcl_pr_ros.nodes import the nodes:\n" + "\n".join(upward)


@pytest.mark.parametrize("layer", ROS_FREE)
def test_ros_free_layers_import_no_ros(layer):
    bad = sorted(f"{a} imports {b}" for a, targets in _graph().items() if _within(a, layer)
                 for b in targets if any(_within(b, ros) for ros in ROS_PACKAGES - ROS_FREE_ALLOWED.get(layer, set())))
    assert not bad, f"{layer} must not import ROS:\n" + "\n".join(bad)


def test_every_subpackage_but_nodes_is_checked_ros_free():
    """A new subpackage joins the ROS-free check unless it is the nodes' (the docs' layer table)."""
    subpackages = {_subpackage(m) for m in _modules() if m.count(".") >= 1} - {"cbcl_pr_ros.nodes"}
    assert subpackages <= set(ROS_FREE), f"not checked ROS-free: {sorted(subpackages - set(ROS_FREE))}"


def test_no_module_import_cycles():
    cycles = _module_cycles(_graph()) - KNOWN_MODULE_CYCLES
    assert not cycles, "import cycles between modules: " + "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def test_no_subpackage_import_cycles():
    cycles = _package_cycles(_graph()) - KNOWN_PACKAGE_CYCLES
    assert not cycles, "import cycles between subpackages: " + "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def test_allow_list_is_current():
    """A fixed exception must leave the allow-list (so it cannot come back unnoticed)."""
    graph = _graph()
    stale = (KNOWN_MODULE_CYCLES - _module_cycles(graph)) | (KNOWN_PACKAGE_CYCLES - _package_cycles(graph))
    assert not stale, "fixed, remove from the allow-list: " + "; ".join(" <-> ".join(sorted(c)) for c in stale)


def test_core_and_default_head_do_not_load_torch():
    """torch costs seconds at a node's start and exit; only the torch-backed heads may load it."""
    import subprocess
    import sys

    code = ("import sys; from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig; import numpy as np\n"
            "l = CBCLPRLearner(LearnerConfig(seed=0), 'test', 4)\n"
            "rng = np.random.default_rng(0)\n"
            "l.teach_increment({'a': rng.normal(size=(3, 4)), 'b': rng.normal(3, 1, size=(3, 4))})\n"
            "l.predict(rng.normal(size=(2, 4)))\n"
            "print('torch' in sys.modules)\n"
            "from cbcl_pr_ros.core import NaiveFineTuneHead\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]
