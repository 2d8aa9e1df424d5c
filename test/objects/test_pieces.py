"""Touching pieces sent as candidate joins, and joined only where recognition says so (objects/pieces.py)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cbcl_pr_ros.perception import Proposal
from dataclasses import replace

from cbcl_pr_ros.objects.pieces import (PIECES, PiecePolicy, candidate_pairs, join_groups, recognised_joins,
                                        union_proposal)
from cbcl_pr_ros.perception.types import CameraIntrinsics

K = CameraIntrinsics(fx=200.0, fy=200.0, cx=80.0, cy=60.0)
H, W = 120, 160


def _piece(x0: int, x1: int, z: float, depth: np.ndarray) -> Proposal:
    """A piece filling columns x0..x1-1 of rows 40..79 at depth z (metres), written into ``depth``."""
    mask = np.zeros((H, W), bool)
    mask[40:80, x0:x1] = True
    depth[mask] = z
    cx = ((x0 + x1) / 2 - K.cx) / K.fx * z
    size = np.array([(x1 - x0) / K.fx * z, 40 / K.fy * z, 0.04])
    return Proposal((x0, 40, x1, 80), mask, np.array([cx, 0.0, z + 0.02]), size, 0.9)


def test_pieces_of_one_surface_are_a_candidate_and_an_object_behind_is_not():
    depth = np.zeros((H, W), np.float32)
    head, body = _piece(40, 60, 0.5, depth), _piece(60, 90, 0.5, depth)  # one surface cut in two
    behind = _piece(90, 110, 0.56, depth)  # touches the body in the image, 6 cm further away
    assert candidate_pairs([head, body, behind], depth, K) == [(0, 1)]


def test_far_apart_pieces_no_depth_and_a_zero_limit_give_no_pairs():
    depth = np.zeros((H, W), np.float32)
    a, b = _piece(0, 40, 0.5, depth), _piece(40, 160, 0.5, depth)  # touching, centroids 20 cm apart
    assert candidate_pairs([a, b], depth, K) == []
    c, d = _piece(40, 60, 0.5, depth), _piece(60, 90, 0.5, depth)
    assert candidate_pairs([c, d], None, K) == [] and candidate_pairs([c, d], depth, None) == []
    assert candidate_pairs([c, d], depth, K, replace(PIECES, join_candidates=0)) == []
    half = depth[::2, ::2]  # depth of half the size is resized to the masks, as propose() does
    assert candidate_pairs([c, d], half, K) == [(0, 1)]


def test_the_check_refuses_bad_settings():
    for bad in ({"pair_centroid_m": 0.0}, {"pair_contact_m": float("nan")}, {"join_candidates": 17},
                {"pair_touch_px": True}, {"join_slack": -0.01}, {"hold_m": float("inf")}, {"part_overlap": 1.5},
                {"side_piece_m": "0.065"}):
        with pytest.raises(ValueError):
            PiecePolicy(**bad)


def test_a_union_holds_both_pieces():
    depth = np.zeros((H, W), np.float32)
    a, b = _piece(40, 60, 0.5, depth), _piece(60, 90, 0.5, depth)
    u = union_proposal(a, b)
    assert u.box == (40, 40, 90, 80) and u.mask.sum() == a.mask.sum() + b.mask.sum()
    lo = np.minimum(a.centroid - a.size / 2, b.centroid - b.size / 2)
    assert np.allclose(u.centroid - u.size / 2, lo) and u.size[0] == pytest.approx(a.size[0] + b.size[0])


def _pred(label: str, distance: float, known: bool = True) -> SimpleNamespace:
    return SimpleNamespace(label=label if known else "", known=known, distance=distance)


def test_a_union_nearer_the_larger_pieces_class_is_joined_and_one_farther_is_not():
    depth = np.zeros((H, W), np.float32)
    beak, head, mug, twin = (_piece(40, 50, 0.5, depth), _piece(50, 90, 0.5, depth), _piece(90, 120, 0.5, depth),
                             _piece(120, 150, 0.5, depth))
    props = [beak, head, mug, twin]
    pieces = [_pred("", 1.4, known=False), _pred("duck", 0.6), _pred("mug", 0.5), _pred("mug", 0.55)]
    pairs = [(0, 1), (2, 3)]
    # the beak and head together look more like the duck; two mugs together look less like a mug
    assert recognised_joins(pairs, props, pieces, [_pred("duck", 0.45), _pred("mug", 0.7)]) == [0]
    # the union named another class than the larger piece, or unknown: not joined
    assert recognised_joins(pairs, props, pieces, [_pred("mug", 0.3), _pred("mug", 0.3, known=False)]) == []
    # a larger piece that is not known is never joined, whatever the union
    unknown_big = [_pred("duck", 0.3), _pred("", 1.2, known=False), *pieces[2:]]
    assert recognised_joins([(0, 1)], props, unknown_big, [_pred("duck", 0.2)]) == []
    # no distance (gate off): nothing to compare
    assert recognised_joins([(0, 1)], props, pieces, [_pred("duck", float("nan"))]) == []


def test_a_near_tie_joins_only_pieces_named_alike_or_a_join_held_from_the_last_frame():
    depth = np.zeros((H, W), np.float32)
    props = [_piece(40, 60, 0.5, depth), _piece(60, 100, 0.5, depth)]  # a head beside its larger body
    body = _pred("teddy", 0.72)
    tie = [_pred("teddy", 0.72 * (1 + PIECES.join_slack / 2))]  # the union a little farther than the body alone
    # named apart, not held: a union farther than the larger piece is not joined
    assert recognised_joins([(0, 1)], props, [_pred("ball", 0.6), body], tie) == []
    # both pieces named the teddy, or the pair joined in the last frame: a near tie still joins
    assert recognised_joins([(0, 1)], props, [_pred("teddy", 0.75), body], tie) == [0]
    assert recognised_joins([(0, 1)], props, [_pred("ball", 0.6), body], tie, held={0}) == [0]
    # beyond the slack neither helps: two objects of one class side by side stay two
    far = [_pred("teddy", 0.72 * (1 + 2 * PIECES.join_slack))]
    assert recognised_joins([(0, 1)], props, [_pred("teddy", 0.75), body], far, held={0}) == []


def test_a_piece_may_join_two_others_and_the_chain_makes_one_group():
    depth = np.zeros((H, W), np.float32)
    left, mid, right = _piece(40, 60, 0.5, depth), _piece(60, 100, 0.5, depth), _piece(100, 115, 0.5, depth)
    pieces = [_pred("", 1.0, known=False), _pred("teddy", 0.8), _pred("", 1.0, known=False)]
    pairs = [(0, 1), (1, 2)]  # a teddy's head and arm, each beside its body
    chosen = recognised_joins(pairs, [left, mid, right], pieces, [_pred("teddy", 0.7), _pred("teddy", 0.5)])
    assert chosen == [0, 1]
    assert join_groups(3, pairs, chosen) == [[0, 1, 2]]
    assert join_groups(4, pairs, [1]) == [[0], [1, 2], [3]] and join_groups(2, [], []) == [[0], [1]]
