"""The command names the docs use work in a built checkout, not only after ``pip install``: each
console script of setup.py has a wrapper in bin/ (installed with the nodes' executables), and
``scripts/env.sh`` puts them on PATH."""
from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _console_scripts() -> dict[str, str]:
    """{name: "module:function"} from setup.py's entry_points."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "console_scripts":
                    entries = [e.value for e in v.elts]
                    return dict(e.split("=", 1) for e in entries)
    raise AssertionError("setup.py names no console_scripts")


def test_every_console_script_has_a_bin_wrapper_calling_the_same_function():
    scripts = _console_scripts()
    assert {"cbcl-eval", "cbcl-memory", "cbcl-bag-eval", "cbcl-bag-record", "cbcl-render-dataset"} <= set(scripts)
    for name, target in scripts.items():
        module, func = target.split(":")
        path = REPO / "bin" / name
        assert path.is_file() and os.access(path, os.X_OK), f"bin/{name} missing or not executable"
        assert f"from {module} import {func}" in path.read_text(), f"bin/{name} does not call {target}"


def test_the_docs_name_only_commands_a_checkout_has():
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    named = set()
    for doc in docs:  # a command at the start of a line or after `, $ or a shell operator
        named |= set(re.findall(r"(?:^|[`$|&;(]\s*)(cbcl-(?:eval|memory|bag-eval|bag-record|render-dataset|[a-z-]+))\s",
                                doc.read_text(), re.MULTILINE))
    commands = {n for n in named if not n.startswith("cbcl-pr")}  # cbcl-pr, cbcl-pr-default: method names
    assert commands, "the docs name no cbcl-* command: the pattern is broken"
    missing = sorted(n for n in commands if not (REPO / "bin" / n).is_file())
    assert not missing, f"the docs use {missing}, which a built checkout does not have"


@pytest.mark.skipif(not (REPO / "install" / "setup.bash").is_file(), reason="not built (scripts/setup)")
def test_env_sh_puts_the_console_scripts_on_path():
    names = sorted(_console_scripts())
    script = "source scripts/env.sh >/dev/null 2>&1; " + "; ".join(f"command -v {n}" for n in names) + \
             "; cbcl-memory --help >/dev/null && echo HELP_OK"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/bin:/bin"  # nothing of a pip install of the package on it
    res = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    found = res.stdout.split()
    for n in names:
        assert any(p.endswith(f"/{n}") for p in found), f"{n} not on PATH after env.sh: {res.stdout}{res.stderr}"
    assert "HELP_OK" in res.stdout, res.stderr[-2000:]
