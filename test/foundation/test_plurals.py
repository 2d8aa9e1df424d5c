"""A count and its noun agree: "1 class", "2 classes" (cbcl_pr_ros.plurals)."""
from __future__ import annotations

import pytest

from cbcl_pr_ros.plurals import counted, noun


@pytest.mark.parametrize(("n", "singular", "text"), [
    (1, "class", "1 class"), (2, "class", "2 classes"), (0, "class", "0 classes"),
    (1, "view", "1 view"), (3, "view", "3 views"), (1, "object crop", "1 object crop"),
    (5, "object crop", "5 object crops"), (2, "box", "2 boxes"), (2, "match", "2 matches"),
    (1, "cluster", "1 cluster"), (10, "frame", "10 frames"),
])
def test_counted_agrees_with_its_count(n, singular, text):
    assert counted(n, singular) == text


def test_an_irregular_plural_and_a_verb_are_given():
    assert counted(2, "child", "children") == "2 children" and counted(1, "child", "children") == "1 child"
    assert [noun(n, "is", "are") for n in (0, 1, 2)] == ["are", "is", "are"]
