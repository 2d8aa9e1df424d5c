"""One rule for class names: the core's check_label; the request boundary strips, then applies it; a
new class's name must not look like a known one."""
from __future__ import annotations

import pytest

from cbcl_pr_ros.core.validation import MAX_LABEL_CHARS
from cbcl_pr_ros.core.validation import check_label as core_check
from cbcl_pr_ros.lookalike import lookalike_in, lookalike_key, nearest
from cbcl_pr_ros.request_checks import RequestError, check_new_label
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


@pytest.mark.parametrize("a, b", [("mug", "Mug"), ("mug", "\uff4d\uff55\uff47"), ("caf\u00e9", "CAF\u00c9"),
                                  ("mug", "mug\ufe0f"), ("mug", "m\u034fug"), ("mug", "mug\U000e0100"),
                                  ("blue mug", "blue  mug"), ("mug", "\u3164mug"), ("stra\u00dfe", "STRASSE"),
                                  ("\ufb01sh", "fish")])
def test_names_that_look_alike_share_a_key(a, b):
    assert a != b and lookalike_key(a) == lookalike_key(b)
    with pytest.raises(RequestError, match=f"looks like the known class {a!r}"):
        check_new_label(request_check(b), ["box", a])


@pytest.mark.parametrize("a, b", [("mug", "mugs"), ("mug", "m ug"), ("cup 1", "cup 2"), ("a\u00f1o", "ano"),
                                  ("caf\u00e9", "cafe"), ("\u0915\u093f", "\u0915\u0940"),
                                  ("\u0441\u0430\u0440", "cap")])
def test_names_that_differ_to_the_eye_keep_their_own_keys(a, b):
    """Accents and vowel signs are seen and tell words apart ('año' and 'ano'; Devanagari 'कि' and
    'की'). The last pair is Cyrillic 'сар' and Latin 'cap': alike to the eye, but telling them apart needs
    the Unicode confusables table, which this rule does not have (docs/security.md)."""
    assert lookalike_key(a) != lookalike_key(b)
    assert check_new_label(b, [a]) == b


def test_a_name_is_never_its_own_look_alike_and_a_name_of_marks_alone_is_refused():
    assert check_new_label("Mug", ["mug", "box"][1:]) == "Mug"
    assert lookalike_in("mug", ["mug", "box"]) is None and lookalike_in("MUG", ["mug"]) == "mug"
    for marks in ("\u0301", "\ufe0f\u0301", "\u2800", "- -"):
        with pytest.raises(RequestError, match="no letter, digit or symbol"):
            check_new_label(marks, [])
    assert check_new_label("\u2615", []) == "\u2615"  # a symbol (an emoji) is a name


def test_the_nearest_names_are_compared_as_a_reader_sees_them():
    known = ["box", "mug", "Mug", "red mug", "teapot"]
    assert nearest("MUGG", known)[:2] == ["mug", "Mug"]  # one look, both names (a file may hold look-alikes)
    assert nearest("ｔｅａｐｏｔ", known) == ["teapot"]
    assert nearest("zebra", known) == [] and nearest("mug", known, n=1) == ["mug"]
