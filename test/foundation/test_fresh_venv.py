"""README "Without ROS", followed literally in a new venv: every command-line tool it names installs
and runs (issue 21: `pip install .` once gave tools whose simulator dependency was missing)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE_PYTHON = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"


def readme_tools() -> list[str]:
    """The command-line tools README's "Without ROS" section promises."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Without ROS"):]
    section = section[: section.index("```python")]
    return sorted(set(re.findall(r"`(cbcl-[a-z-]+)`", section)))


def _registry_reachable(python: Path, tmp: Path) -> bool:
    probe = subprocess.run([str(python), "-m", "pip", "download", "--no-deps", "-q", "-d", str(tmp), "catkin-pkg"],
                           capture_output=True, text=True, timeout=120)
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_readme_install_gives_every_tool_it_lists(tmp_path: Path, checkout_copy: Path) -> None:
    tools = readme_tools()
    assert {"cbcl-eval", "cbcl-bag-record", "cbcl-bag-eval", "cbcl-render-dataset", "cbcl-memory"} <= set(tools), tools
    venv = tmp_path / "fresh"
    made = subprocess.run([str(BASE_PYTHON), "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    py = venv / "bin" / "python"
    if not _registry_reachable(py, tmp_path / "probe"):
        pytest.skip("the Python package registry cannot be reached, so a fresh install cannot be tried")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH", "CBCL_PR_ROS_MSG_DIR", "COLCON_PREFIX_PATH",
                        "VIRTUAL_ENV", "LD_LIBRARY_PATH")}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"

    def pip(*args: str) -> None:
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                           capture_output=True, text=True, timeout=1500, env=env)
        assert r.returncode == 0, f"pip install {' '.join(args)} failed:\n{r.stderr[-3000:]}"

    # README steps 1-3. Step 1 names PyTorch's CPU index; the registries here carry the same
    # CPU wheel (scripts/setup installs it the same way), so the pin alone is given.
    pip("-c", str(CONSTRAINTS), "torch==2.13.0")
    pip("-c", str(CONSTRAINTS), str(checkout_copy))
    pip("-c", str(CONSTRAINTS), "--no-deps", "robosuite==1.5.2")

    work = tmp_path / "elsewhere"
    work.mkdir()

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), cwd=work, env=env, capture_output=True, text=True, timeout=900)

    for tool in tools:
        exe = venv / "bin" / tool
        assert exe.is_file(), f"README lists {tool}, the install gave no such command"
        h = run(str(exe), "--help")
        assert h.returncode == 0 and "usage" in h.stdout.lower(), f"{tool} --help: {h.stderr[-1500:]}"

    # the simulator-backed tools work, not only their help
    bag = work / "session"
    rec = run(str(venv / "bin" / "cbcl-bag-record"), "--simulate", str(bag), "--categories", "mug", "duck",
              "--shots", "2", "--test-views", "1", "--image-size", "64")
    assert rec.returncode == 0, rec.stderr[-3000:]
    ev = run(str(venv / "bin" / "cbcl-bag-eval"), str(bag), "-q", "--set", "classifier=ncm", "--json",
             str(work / "r.json"))
    assert ev.returncode == 0, ev.stderr[-3000:]
    assert [inc["n_test"] for inc in json.loads((work / "r.json").read_text())["increments"]] == [1, 2]
    ren = run(str(venv / "bin" / "cbcl-render-dataset"), str(work / "data"), "--classes", "mug", "--objects-per-class",
              "1", "--poses-per-object", "2", "--train-per-class", "1", "--image-size", "64")
    assert ren.returncode == 0, ren.stderr[-3000:]
    assert (work / "data" / "manifest.json").is_file() and list((work / "data" / "train" / "mug").iterdir())
    # nothing of ROS came along: the tools are the ROS-free part
    probe = run(str(py), "-c", "import importlib.util as u; print(u.find_spec('rclpy') is None)")
    assert probe.stdout.strip() == "True", probe.stdout + probe.stderr
