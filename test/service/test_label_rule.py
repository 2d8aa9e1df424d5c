"""One rule for class names: the core's check_label; the request boundary strips, then applies it."""
from __future__ import annotations

import pytest

from cbcl_pr_ros.core.validation import MAX_LABEL_CHARS
from cbcl_pr_ros.core.validation import check_label as core_check
from cbcl_pr_ros.request_checks import RequestError
from cbcl_pr_ros.request_checks import check_label as request_check


def test_the_boundary_strips_and_the_core_takes_names_as_they_are():
    assert request_check("  blue mug\t") == "blue mug" == core_check("blue mug")
    with pytest.raises(ValueError, match="leading or trailing whitespace"):
        core_check(" blue mug")


@pytest.mark.parametrize("bad, reason", [("", "empty"), ("   ", "empty"), ("x" * (MAX_LABEL_CHARS + 1), "the most is 128"),
                                         ("mu\x00g", "unprintable character U\\+0000"),
                                         ("a\nb", "unprintable character U\\+000A")])
def test_both_refuse_the_same_names_with_the_same_reason(bad, reason):
    with pytest.raises(ValueError, match=reason) as core:
        core_check(bad)
    with pytest.raises(RequestError, match=reason) as request:
        request_check(bad)
    assert str(core.value) == str(request.value)


def test_refusals_never_echo_a_long_name():
    with pytest.raises(ValueError) as exc:
        core_check(" " + "y" * 100_000)
    assert len(str(exc.value)) < 200
    with pytest.raises(TypeError, match="must be a string"):
        core_check(b"mug")
    with pytest.raises(RequestError, match="must be a string"):
        request_check(3)


def test_the_boundary_composes_a_name_so_two_keyboards_reach_one_class():
    composed, decomposed = "caf\u00e9 mug", "cafe\u0301 mug"
    assert composed != decomposed
    assert request_check(decomposed) == request_check(composed) == composed
    assert len(request_check(" " + decomposed)) == len(composed)
