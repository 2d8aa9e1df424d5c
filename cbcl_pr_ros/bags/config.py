"""Defaults of the bag tools from ``config/bags.yaml`` (installed share dir, else source tree)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["default_bags_config", "load_bag_defaults"]


def default_bags_config() -> Path | None:
    """``config/bags.yaml`` of the installed package (AMENT_PREFIX_PATH) or of the source tree."""
    cands = [Path(p) / "share" / "cbcl_pr_ros" / "config" / "bags.yaml"
             for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    cands.append(Path(__file__).resolve().parents[2] / "config" / "bags.yaml")
    return next((c for c in cands if c.is_file()), None)


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
        raise ValueError(f"cannot read bag tools config {src}: {exc}") from None
    sect = doc.get(section) or {}
    if not isinstance(sect, dict):
        raise ValueError(f"{src}: section {section!r} must be a mapping")
    return sect
