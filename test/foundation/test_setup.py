"""scripts/setup: idempotent, and one clear line with a non-zero exit when a precondition is missing."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup"
STAMP = ROOT / ".venv" / ".cbcl-setup-complete"
BASE_PYTHON = Path(getattr(sys, "_base_executable", sys.executable)).resolve()


def _run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def _tool_dir(tmp_path: Path, tools: list[str]) -> Path:
    """A PATH holding only the named tools, so a test can take one away."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    return bindir


BASIC_TOOLS = ["bash", "dirname", "mkdir", "flock", "cat", "sha256sum", "cut", "rm", "mktemp", "sed",
               "grep", "xargs", "ln", "tail"]


def test_second_run_changes_nothing_and_reports_up_to_date() -> None:
    first = _run(["bash", str(SETUP)])
    assert first.returncode == 0, first.stderr
    stamp_before = STAMP.read_text()
    site = next((ROOT / ".venv" / "lib").glob("python3.*/site-packages"))
    site_mtime = site.stat().st_mtime_ns
    second = _run(["bash", str(SETUP)])
    assert second.returncode == 0, second.stderr
    assert "venv up to date" in second.stdout
    assert "installing" not in second.stdout
    assert STAMP.read_text() == stamp_before
    assert site.stat().st_mtime_ns == site_mtime, "a warm run must not touch the installed packages"


def test_wrong_python_is_named_in_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "python3.9"
    fake.write_text("#!/bin/sh\necho 3.9\n")
    fake.chmod(0o755)
    env = dict(os.environ, CBCL_PYTHON=str(fake))
    result = _run(["bash", str(SETUP)], env=env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "wrong Python" in lines[0] and "3.9" in lines[0], result.stderr


def test_missing_cmake_is_named_in_one_line(tmp_path: Path) -> None:
    bindir = _tool_dir(tmp_path, BASIC_TOOLS + ["cc", "c++"])
    env = dict(os.environ, PATH=str(bindir), CBCL_PYTHON=str(BASE_PYTHON))
    result = _run(["bash", str(SETUP)], env=env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cmake is missing" in lines[0], result.stderr


def test_missing_compiler_is_named_in_one_line(tmp_path: Path) -> None:
    bindir = _tool_dir(tmp_path, BASIC_TOOLS + ["cmake"])
    env = dict(os.environ, PATH=str(bindir), CBCL_PYTHON=str(BASE_PYTHON))
    result = _run(["bash", str(SETUP)], env=env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "compiler is missing" in lines[0], result.stderr


def test_unreachable_registry_fails_clearly_and_leaves_nothing_trusted(tmp_path: Path, checkout_copy: Path) -> None:
    clone = checkout_copy
    empty_links = tmp_path / "no-wheels"
    empty_links.mkdir()
    env = dict(os.environ, CBCL_PYTHON=str(BASE_PYTHON), PIP_CONFIG_FILE=os.devnull,
               PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_EXTRA_INDEX_URL="",
               PIP_FIND_LINKS=str(empty_links), PIP_RETRIES="0", PIP_DEFAULT_TIMEOUT="3")
    env.pop("VIRTUAL_ENV", None)
    result = _run(["bash", str(clone / "scripts" / "setup")], env=env, cwd=clone)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Python package registry" in lines[0], result.stderr
    assert not (clone / ".venv" / ".cbcl-setup-complete").exists()


def test_run_demo_shows_the_set_up_steps_with_elapsed_time() -> None:
    """The main job is not silent while it sets up (each step with its elapsed time); tests are."""
    result = _run(["bash", str(ROOT / "scripts" / "run-demo"), "--help"])
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    steps = [ln for ln in lines if ln.startswith("[") and "s] setup: " in ln]
    assert steps and any("venv up to date" in ln or "venv complete" in ln for ln in steps), result.stdout
    assert any("building cbcl_pr_ros" in ln for ln in steps) and "run_demo_session" in result.stdout
    quiet = _run(["bash", str(ROOT / "scripts" / "test"), "--collect-only", "-q", str(Path(__file__))])
    assert quiet.returncode == 0 and "setup: " not in quiet.stdout, quiet.stdout[-2000:]


def test_run_demo_says_still_while_a_set_up_step_is_silent(tmp_path: Path) -> None:
    """The first colcon build prints nothing for a minute or more after "building cbcl_pr_ros": the
    main job repeats that step with "still" meanwhile, and keeps a line that arrives in pieces whole."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy2(ROOT / "scripts" / "run-demo", scripts / "run-demo")
    (scripts / "setup").write_text("echo 'setup: building cbcl_pr_ros with colcon'\nsleep 3\n"
                                   "printf 'setup: half'\nsleep 2\necho ' a line'\nexit 3\n")
    env = dict(os.environ, CBCL_SETUP_HEARTBEAT_S="1")
    env.pop("CBCL_SETUP_QUIET", None)
    result = _run(["bash", str(scripts / "run-demo")], env=env, cwd=tmp_path)
    assert result.returncode != 0  # the stand-in set-up failed: the demo does not start
    lines = result.stdout.splitlines()
    step = next(i for i, ln in enumerate(lines) if ln.endswith("s] setup: building cbcl_pr_ros with colcon"))
    assert any("still: setup: building cbcl_pr_ros with colcon" in ln for ln in lines[step + 1:]), lines
    assert any(ln.endswith("s] setup: half a line") for ln in lines), lines
