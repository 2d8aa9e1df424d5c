"""Fixtures for the foundation tests."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout_copy(tmp_path: Path) -> Path:
    """The checkout's files (tracked and not ignored) copied to a temporary directory.

    Tests that build or install from the sources use it, so nothing they do writes into the checkout.
    """
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    clone = tmp_path / "clone"
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            dst = clone / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return clone
