"""Imports of the package's own modules sit at module top, where the reader sees a module's dependencies.

An ``import``/``from ... import`` of ``cbcl_pr_ros`` (absolute or relative) inside a function body is
allowed only with a reason written beside it: a comment on the import's lines or on the line just
above (e.g. a heavy optional dependency loaded only on use, a ROS-free import path kept light).  At
most ``MAX_LOCAL`` such imports exist; a new one needs a reason, and the count keeps them rare.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cbcl_pr_ros"
MAX_LOCAL = 30
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# a reason is prose: three words at least, not a linter pragma alone
_REASON = re.compile(r"#\s*(?!noqa\b|type:\s*ignore\b)(\S+\s+){2,}\S+")


def _own(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == "cbcl_pr_ros" or a.name.startswith("cbcl_pr_ros.") for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "cbcl_pr_ros"
    return False


def local_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, has a reason) of every own-package import inside a function body of the module at ``path``."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found: list[tuple[int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and _own(child):
                around = lines[child.lineno - 2:child.end_lineno] if child.lineno > 1 else lines[:child.end_lineno]
                found.append((child.lineno, any(_REASON.search(line) for line in around)))
            visit(child, in_function or isinstance(child, _FUNCTIONS))

    visit(ast.parse(text, filename=str(path)), False)
    return found


def _all() -> dict[str, list[tuple[int, bool]]]:
    return {str(p.relative_to(ROOT)): hits for p in sorted(PACKAGE.rglob("*.py")) if (hits := local_imports(p))}


def test_the_count_sees_local_imports_and_their_reasons(tmp_path):
    """The measure is not vacuous: module-level imports do not count, local ones do, with or without a reason."""
    path = tmp_path / "m.py"
    path.write_text(
        "from cbcl_pr_ros.core import x\n"
        "import cbcl_pr_ros.service\n"
        "def f():\n"
        "    from cbcl_pr_ros.core import y\n"
        "    import numpy\n"
        "    # torch loads only for this head\n"
        "    from .classifiers import z\n"
        "    class C:\n"
        "        def g(self):\n"
        "            import cbcl_pr_ros.nodes  # noqa\n"
        "            from cbcl_pr_ros.features import (a,  # OpenCV loads only here\n"
        "                                              b)\n",
        encoding="utf-8")
    assert local_imports(path) == [(4, False), (7, True), (10, False), (11, True)]


def test_few_local_imports_of_our_own_modules():
    found = _all()
    total = sum(len(hits) for hits in found.values())
    listing = "\n".join(f"{name}:{line}" for name, hits in found.items() for line, _ in hits)
    assert total <= MAX_LOCAL, f"{total} function-local imports of cbcl_pr_ros (at most {MAX_LOCAL}):\n{listing}"


def test_every_local_import_says_why():
    missing = [f"{name}:{line}" for name, hits in _all().items() for line, why in hits if not why]
    assert not missing, ("function-local imports of cbcl_pr_ros without a reason comment (on the import or the "
                         "line above; or move them to module top):\n" + "\n".join(missing))
