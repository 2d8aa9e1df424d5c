"""The learner node stays a thin adapter a newcomer can read, by design rather than by a line cap.

Concerns first: the learner's logic lives in one ROS-free object (``service/learner_session.py``),
which imports no ROS and nothing from ``nodes``; the learner node builds no controller, Teacher or
object stream itself (it imports only the session from ``service``); and no class in ``nodes`` keeps
a node in an attribute unless it is a node, runs one (an executor) or is a client that calls other
nodes' services through it (the allow-list below, each with its reason). A helper that needs the
node to make or destroy a ROS entity is handed it for that call. Sizes still bound the rest:
``nodes/learner.py`` has at most 300 lines, and no function of the ROS adapters (``nodes``), the
learner's service logic (``service``) or the process utilities (``runtime``) is longer than 60
lines, read from the sources with ``ast`` (decorators and docstrings count).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cbcl_pr_ros"
MAX_LEARNER_LINES = 300
MAX_FUNCTION_LINES = 60


SESSION = PACKAGE / "service" / "learner_session.py"
# classes of nodes/ that keep a node, and why that is their job
HOLDS_A_NODE = {
    "spin.py: StreamGroupsExecutor": "an executor runs the node it is given",
    "learner_client.py: LearnerClient": "a client for scripts: calls the learner's services through its node",
    "demo_teacher.py: WorldClient": "the main job's client of the simulated world's services",
}


def _imports(path: Path) -> set[str]:
    """Every module named by an import statement of the file (also inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module if node.level == 0 else "." * node.level + node.module)
    return found


def _node_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The parameters of ``fn`` that take a node: named ``node``/``*_node`` or annotated ``...Node``."""
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    return {a.arg for a in args if a.arg == "node" or a.arg.endswith("_node")
            or (a.annotation is not None and ast.unparse(a.annotation).strip("'\"").endswith("Node"))}


def node_holders(path: Path) -> list[str]:
    """'file: Class.attribute (line n)' for every attribute a non-node class of the file sets to a node
    it was given (or names ``node``/``_node``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        if any(ast.unparse(b).endswith("Node") for b in cls.bases):
            continue  # a node keeps itself
        for fn in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            given = _node_params(fn)
            for stmt in (n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign))):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    pairs = (zip(target.elts, stmt.value.elts) if isinstance(target, ast.Tuple)
                             and isinstance(stmt.value, ast.Tuple) else [(target, stmt.value)])
                    for t, v in pairs:
                        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"):
                            continue
                        if t.attr in ("node", "_node") or (isinstance(v, ast.Name) and v.id in given):
                            found.append(f"{path.name}: {cls.name}.{t.attr} (line {stmt.lineno})")
    return found


def test_no_class_in_nodes_keeps_a_node_but_nodes_executors_and_clients():
    held = [h for path in sorted((PACKAGE / "nodes").glob("*.py")) for h in node_holders(path)
            if h.split(" (")[0].rsplit(".", 1)[0] not in HOLDS_A_NODE]
    assert not held, ("these classes keep a node (hand it to the call that needs it, or let the "
                      "node call a ROS-free object):\n" + "\n".join(held))
    stale = [k for k in HOLDS_A_NODE if not (PACKAGE / "nodes" / k.split(":")[0]).exists()]
    assert not stale, f"allow-list names modules that are gone: {stale}"


def test_the_measure_finds_a_helper_that_keeps_its_node(tmp_path):
    path = tmp_path / "helper.py"
    path.write_text("class Port:\n    def __init__(self, node, x):\n        self.n, self.x = node, x\n\n"
                    "class Streams:\n    def __init__(self, owner: 'LearnerNode'):\n        self.owner = owner\n\n"
                    "class Debug:\n    def bind(self, n):\n        self._node = n\n\n"
                    "class Fine:\n    def subscribe(self, node):\n        self.sub = node.create_subscription()\n\n"
                    "class LearnerNode(ManagedNode):\n    def __init__(self, node=None):\n        self.node = node\n",
                    encoding="utf-8")
    assert node_holders(path) == ["helper.py: Port.n (line 3)", "helper.py: Streams.owner (line 7)",
                                  "helper.py: Debug._node (line 11)"]


def test_the_learner_session_is_ros_free_and_the_node_only_calls_it():
    session = _imports(SESSION)
    assert not {m for m in session if m.split(".")[0] in ("rclpy", "rosidl_runtime_py", "std_msgs")
                or m.startswith("cbcl_pr_ros.nodes") or m.startswith(".")}, sorted(session)
    service = {m for m in _imports(PACKAGE / "nodes" / "learner.py") if m.startswith("cbcl_pr_ros.service")}
    assert service == {"cbcl_pr_ros.service.learner_session"}, (
        f"nodes/learner.py builds service objects itself ({sorted(service)}): the session owns them")


def test_the_extractor_and_the_object_package_use_nothing_of_the_learners_service():
    """The extractor's object path lives in ``objects`` and builds no learner-side type: neither the
    extractor node nor the object package imports ``cbcl_pr_ros.service``."""
    paths = [PACKAGE / "nodes" / "feature_extractor.py", *sorted((PACKAGE / "objects").glob("*.py"))]
    found = {p.name: sorted(m for m in _imports(p) if m.startswith("cbcl_pr_ros.service")) for p in paths}
    assert not {k: v for k, v in found.items() if v}, found


def _methods(path: Path, cls: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    (found,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls]
    return {n.name for n in found.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_the_learner_node_implements_the_sessions_whole_port():
    port = _methods(SESSION, "LearnerPort")
    node = _methods(PACKAGE / "nodes" / "learner.py", "LearnerNode") | _methods(PACKAGE / "nodes" / "lifecycle.py",
                                                                                  "ManagedNode")
    assert port and not port - node, f"LearnerPort methods the learner node lacks: {sorted(port - node)}"


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
