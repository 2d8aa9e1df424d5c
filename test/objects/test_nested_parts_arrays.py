"""nested_parts on arrays gives the answer of the pair-by-pair rules it replaced, on random frames."""
from __future__ import annotations

import numpy as np
import pytest

from dataclasses import replace

from cbcl_pr_ros.objects.pieces import PIECES, PiecePolicy, nested_parts, share_extent, side_piece
from cbcl_pr_ros.perception import Proposal


def pairwise_parts(proposals, labels=None, policy: PiecePolicy = PIECES) -> set[int]:
    """The rules one pair at a time, as nested_parts applied them before it worked on arrays."""
    min_overlap, max_distance_m = policy.part_overlap, policy.part_distance_m
    same_label_overlap, same_label_distance_m = policy.same_label_overlap, policy.same_label_distance_m
    close_up_m, side_piece_m, close_up_piece_m = policy.close_up_m, policy.side_piece_m, policy.close_up_piece_m
    side_piece_overlap = policy.side_piece_overlap
    order = sorted(range(len(proposals)), key=lambda i: -proposals[i].area)
    away = [float(np.linalg.norm(p.centroid)) for p in proposals]
    parts: set[int] = set()
    for rank, i in enumerate(order):
        small = proposals[i]
        if not small.has_depth or small.area <= 0:
            continue
        x0, y0, x1, y1 = small.box
        for j in order[:rank]:
            big = proposals[j]
            if j in parts or not big.has_depth:
                continue
            iw = min(x1, big.box[2]) - max(x0, big.box[0])
            ih = min(y1, big.box[3]) - max(y0, big.box[1])
            inside = max(iw, 0) * max(ih, 0) / small.area
            apart = float(np.linalg.norm(small.centroid - big.centroid))
            alike = labels is not None and bool(labels[i]) and labels[i] == labels[j]
            close = max(away[i], away[j]) < close_up_m
            if (inside >= min_overlap and apart <= max_distance_m) or (apart <= same_label_distance_m and (
                    (alike and inside >= same_label_overlap) or ((alike or close) and share_extent(small, big)))) or (
                    apart <= side_piece_m and side_piece(small, big, inside >= side_piece_overlap, max_distance_m,
                                                         policy)) or (
                    close and apart <= close_up_piece_m and side_piece(small, big, False, close_up_piece_m,
                                                                        policy)):
                parts.add(i)
                break
    return parts


def random_frame(rng: np.random.Generator, n: int) -> tuple[list[Proposal], list[str]]:
    """``n`` proposals crowded into a small picture and a small space (most pairs near one another), at
    table and close-up distances, some without depth, some flat or empty, with names from a few."""
    props = []
    for _ in range(n):
        x0, y0 = (int(v) for v in rng.integers(0, 120, 2))
        w, h = (int(v) for v in rng.integers(0, 60, 2))
        z = rng.choice([0.25, 0.6])
        c = np.array([rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), z + rng.uniform(-0.05, 0.05)])
        size = rng.uniform(0.0, 0.12, 3)
        if rng.random() < 0.05:
            size[rng.integers(0, 3)] = 0.0  # a flat extent: shares of 0 / 0
        if rng.random() < 0.1:
            c, size = np.full(3, np.nan), np.full(3, np.nan)
        props.append(Proposal((x0, y0, x0 + w, y0 + h), None, c, size, 1.0))
    labels = [str(v) for v in rng.choice(["", "mug", "duck", "bottle"], n)]
    return props, labels


@pytest.mark.parametrize("seed", range(40))
def test_array_rules_match_the_pairwise_rules_on_random_frames(seed: int):
    rng = np.random.default_rng(seed)
    props, labels = random_frame(rng, int(rng.integers(10, 60)))
    expected_plain, expected_named = pairwise_parts(props), pairwise_parts(props, labels)
    assert nested_parts(props) == expected_plain
    assert nested_parts(props, labels) == expected_named
    assert expected_plain or expected_named  # the frames are crowded enough to hold parts


def test_a_frame_larger_than_one_block_of_rows_matches_too():
    rng = np.random.default_rng(1000)
    props, labels = random_frame(rng, 300)  # more rows than nested_parts computes at once
    assert nested_parts(props, labels) == pairwise_parts(props, labels)


def test_no_proposals_and_thresholds_are_honoured():
    assert nested_parts([]) == set()
    rng = np.random.default_rng(7)
    props, labels = random_frame(rng, 40)
    loose = replace(PIECES, part_overlap=0.1, part_distance_m=0.1, close_up_m=0.7, side_piece_volume=0.5)
    assert nested_parts(props, labels, loose) == pairwise_parts(props, labels, loose)
    assert nested_parts(props, labels, loose) != nested_parts(props, labels)
