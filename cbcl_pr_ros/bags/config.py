"""Defaults of the bag tools from ``config/bags.yaml`` (installed share dir, else source tree)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cbcl_pr_ros.share import find_share_file

__all__ = ["checked_output_file", "default_bags_config", "load_bag_defaults"]


def default_bags_config() -> Path | None:
    """``config/bags.yaml`` of the installed package (ament or pip) or of the source tree; None if none."""
    try:
        return find_share_file("config", "bags.yaml")
    except FileNotFoundError:
        return None


def load_bag_defaults(section: str, path: str | Path | None = None) -> dict[str, Any]:
    """One section (``record``, ``replay``, ``simulate``) of the bag tools' YAML; {} if none."""
    if section not in ("record", "replay", "simulate"):
        raise ValueError(f"unknown section {section!r}; expected record, replay or simulate")
    src = Path(path) if path else default_bags_config()
    if src is None:
        return {}
    try:
        doc = yaml.safe_load(src.read_text(encoding="utf8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read bag tools config {src}: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{src}: a bag tools config is a mapping of sections, got {type(doc).__name__}")
    sect = doc.get(section) or {}
    if not isinstance(sect, dict):
        raise ValueError(f"{src}: section {section!r} must be a mapping")
    return sect


def checked_output_file(path: str | Path) -> Path:
    """``path`` as a report file to write once the work is done; ValueError now when it cannot be
    one (a directory, or a folder that does not exist), so a long evaluation or replay is not run
    only to end in a traceback that loses its report."""
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"{out} is a directory; give a file name for the report")
    if not out.parent.is_dir():
        raise ValueError(f"{out}: the folder {out.parent} does not exist")
    return out
