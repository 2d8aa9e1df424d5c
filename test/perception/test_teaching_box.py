"""A hand-drawn teaching box takes the object mostly inside it, or refuses and says why; the pieces of
one object split by the depth proposals are taken together, two objects in one box are refused."""
from __future__ import annotations

import numpy as np

from cbcl_pr_ros.perception.boxes import choose_in_box, inside_share, select_teaching_proposal
from cbcl_pr_ros.perception.types import Proposal

SHAPE = (480, 640)


def prop(box, xyz=(0.0, 0.0, 0.6), depth=True) -> Proposal:
    c = np.array(xyz, float) if depth else np.full(3, np.nan)
    return Proposal(tuple(box), None, c, np.full(3, 0.06) if depth else np.full(3, np.nan), 0.9)


def test_inside_share_is_of_the_objects_box():
    assert inside_share((0, 0, 10, 10), (5, 0, 100, 100)) == 0.5
    assert inside_share((0, 0, 10, 10), (20, 20, 30, 30)) == 0.0
    assert inside_share((0, 0, 0, 10), (0, 0, 100, 100)) == 0.0


def test_a_box_on_bare_table_beside_a_mug_selects_nothing_and_says_why():
    mug = prop((300, 200, 360, 280))
    choice = choose_in_box([mug], SHAPE, (350, 200, 450, 300))  # a sixth of the mug's box inside
    assert not choice.found
    assert "17 %" in choice.reason and "at least 50 %" in choice.reason and "(300, 200)-(360, 280)" in choice.reason
    assert select_teaching_proposal([mug], SHAPE, (350, 200, 450, 300)) is None
    far = choose_in_box([mug], SHAPE, (500, 400, 600, 470))
    assert not far.found and "no object found in the box" in far.reason


def test_an_object_mostly_inside_is_taken_over_a_larger_neighbour_touching_the_box():
    mug = prop((100, 100, 160, 180), (-0.2, 0, 0.6))
    table_thing = prop((150, 80, 400, 300), (0.1, 0, 0.6))  # overlaps the box, 4 % inside
    choice = choose_in_box([table_thing, mug], SHAPE, (90, 90, 170, 190))
    assert choice.indices == (1,)
    assert select_teaching_proposal([table_thing, mug], SHAPE, (90, 90, 170, 190)) == 1


def test_pieces_of_one_object_are_taken_together_the_larger_first():
    body = prop((200, 200, 280, 300), (0.0, 0.02, 0.6))
    head = prop((210, 150, 270, 202), (0.0, -0.05, 0.6))  # touching, 7 cm apart
    other = prop((500, 100, 560, 160), (0.3, -0.1, 0.6))
    choice = choose_in_box([head, other, body], SHAPE, (190, 140, 290, 310))
    assert choice.indices == (2, 0)


def test_pieces_without_depth_join_by_touching_boxes_only():
    a, b = prop((100, 100, 150, 200), depth=False), prop((150, 100, 200, 200), depth=False)
    assert choose_in_box([a, b], SHAPE, (90, 90, 210, 210)).indices == (0, 1)


def test_two_objects_in_one_box_are_refused():
    mug = prop((100, 100, 160, 180), (-0.1, 0, 0.6))
    duck = prop((162, 100, 230, 180), (0.05, 0, 0.6))  # touching boxes but 15 cm apart
    choice = choose_in_box([mug, duck], SHAPE, (90, 90, 240, 190))
    assert not choice.found and "holds 2 objects" in choice.reason and "draw it around one" in choice.reason


def test_a_box_outside_the_picture_is_refused():
    choice = choose_in_box([prop((0, 0, 10, 10))], SHAPE, (700, 500, 800, 600))
    assert not choice.found and "outside the picture" in choice.reason
    assert not choose_in_box([], SHAPE, (0, 0, 10, 10)).found
