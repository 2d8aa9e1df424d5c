"""Where the package's shared files (``config/*.yaml``, ``msg/*.msg``) are, without ROS.

One lookup for every installation: a colcon/ament install (``share/cbcl_pr_ros`` under each prefix of
``$AMENT_PREFIX_PATH``), ``pip install .`` (``share/cbcl_pr_ros`` under ``sys.prefix``, from
setup.py's ``data_files``) and a source checkout (the repository beside the Python package). The
ament index is only a list of those prefixes, so reading ``$AMENT_PREFIX_PATH`` keeps this module
free of ROS packages (core, service and bags use it).
"""
from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["PACKAGE", "find_share_file", "share_dirs"]

PACKAGE = "cbcl_pr_ros"


def share_dirs() -> list[Path]:
    """Candidate package share directories, most specific installation first."""
    dirs = [Path(p) / "share" / PACKAGE for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    dirs += _pip_share_dirs()
    dirs.append(Path(sys.prefix) / "share" / PACKAGE)
    dirs.append(Path(__file__).resolve().parents[1])  # source checkout (also colcon --symlink-install)
    return dirs


def _pip_share_dirs() -> list[Path]:
    """``share/cbcl_pr_ros`` of a pip installation, wherever its prefix (``--prefix``, ``--target``,
    ``--user``, a venv): the distribution's own file list names the installed data files."""
    try:
        files = metadata.distribution(PACKAGE).files or []
    except metadata.PackageNotFoundError:
        return []
    found: list[Path] = []
    for f in files:
        parts = f.parts
        for i in range(len(parts) - 1):
            if parts[i] == "share" and parts[i + 1] == PACKAGE:
                d = Path(os.path.normpath(f.locate())).parents[len(parts) - i - 3]
                if d not in found:
                    found.append(d)
                break
    return found


def find_share_file(*parts: str) -> Path:
    """The first existing ``<share>/<parts...>`` (e.g. ``find_share_file("config", "arm.yaml")``).

    Raises ``FileNotFoundError`` naming every place looked at.
    """
    if not parts:
        raise ValueError("find_share_file needs a relative path, e.g. ('config', 'arm.yaml')")
    candidates = [d.joinpath(*parts) for d in share_dirs()]
    for cand in candidates:
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"cannot find {'/'.join(parts)} of {PACKAGE}; looked in "
                            + ", ".join(str(c) for c in candidates))
