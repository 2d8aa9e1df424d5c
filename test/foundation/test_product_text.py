"""The package reads as a product: no lab notebook in its code, docstrings or parameter descriptions.

Issue numbers, outcome numbers, the seed of one run, commit ids and run counts say how a line came
to be, not what the product does or why; that history lives in docs/results.md and the commit
messages. Every ``.py`` file under ``cbcl_pr_ros/`` (parameter descriptions live in
``cbcl_pr_ros/settings/``) and the package's config, launch and interface files are read as text.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(ROOT / "cbcl_pr_ros").rglob("*.py"), *(ROOT / "config").glob("*.yaml"),
                  *(ROOT / "launch").glob("*.py"), *(ROOT / "msg").glob("*.msg"), *(ROOT / "srv").glob("*.srv")])

# what a lab notebook line looks like; each with the kind of history it names
NOTEBOOK = (
    ("issue number", re.compile(r"\bissues? #?\d+", re.IGNORECASE)),
    ("outcome number", re.compile(r"\boutcomes? \d+\b", re.IGNORECASE)),
    ("one seed's run", re.compile(r"\bseeds? \d+(?:'s|\s*-\s*\d+|:)", re.IGNORECASE)),
    ("commit id", re.compile(r"\b(?:commit|at|since|before|after) [0-9a-f]{7,40}\b")),
    ("run count", re.compile(r"\b(?:in|of|over) \d+ (?:of \d+ )?runs\b", re.IGNORECASE)),
    ("file named after an issue", re.compile(r"_(?:before_|after_)?issue\d+", re.IGNORECASE)),
)


def notebook_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, kind, line) of every line of ``text`` that reads like a lab notebook."""
    found = []
    for no, line in enumerate(text.splitlines(), 1):
        for kind, pattern in NOTEBOOK:
            if pattern.search(line):
                found.append((no, kind, line.strip()))
    return found


@pytest.mark.parametrize("line", [
    '"""Teaching by object (issue 12) without ROS."""',
    "# Issue 20: 1-shot accuracy on real crops 0.81 -> 0.93",
    '"""Recent vectors (outcome 3)."""',
    "beside the arm's reach: seed 3's cereal box once ended the main job here",
    "main job 12 runs seeds 0-6",
    "measured at 7b19fd7 on a quiet machine",
    "in 4 of 12 runs the id switched",
    'OUT = "bench/results/real_before_issue20.json"',
])
def test_the_rule_catches_a_notebook_line(line):
    assert notebook_lines(line), f"not caught: {line}"


@pytest.mark.parametrize("line", [
    '"""Format 6 adds the open-set gate\'s negatives."""',
    "rng = np.random.default_rng(seed + 15485863)",
    "Run: ``python -m cbcl_pr_ros.nodes.demo --classes 6 --seed 0``",
    "cbcl-eval fsil-table --seeds 5",
    "0 runs the loader in this thread",
])
def test_the_rule_leaves_product_lines_alone(line):
    assert not notebook_lines(line), f"caught: {line}"


def test_package_code_has_no_lab_notebook():
    assert len(SOURCES) > 100, "the package's sources were not found"
    found = [f"{path.relative_to(ROOT)}:{no}: {kind}: {line}"
             for path in SOURCES for no, kind, line in notebook_lines(path.read_text(encoding="utf-8"))]
    assert not found, ("package code reads like a lab notebook (history goes to docs/results.md and "
                       "commit messages):\n" + "\n".join(found))
