"""Load a Python file that is not part of an installed package (a bench script, a test helper) as a
module, registered in ``sys.modules`` so that its dataclasses and pickles find it."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_module(name: str, path: str | Path) -> ModuleType:
    """The module ``name`` from ``path`` (relative paths are taken from the repository root)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(name, path if path.is_absolute() else REPO / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
