"""Runs the seeded doctests of the core modules."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "clustering", "memory", "rehearsal", "distance_threshold", "open_set", "learner",
    "classifiers.gaussian", "classifiers.ncm", "classifiers.vote", "classifiers.finetune",
    "classifiers.blended", "transform", "calibration",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    mod = importlib.import_module(f"cbcl_pr_ros.core.{name}")
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0, f"{name} has no doctest"
    assert res.failed == 0
