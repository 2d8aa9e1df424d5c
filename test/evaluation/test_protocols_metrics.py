"""Protocol splits (class order per seed, shots, no test leakage) and metrics on hand-checked cases."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.evaluation.metrics import average_incremental_accuracy, forgetting, mean_std, top1
from cbcl_pr_ros.evaluation.protocols import (
    base_sessions, class_incremental, class_order, few_shot_incremental, read_session_files,
)

LABELS = np.repeat(np.arange(10), 30)


def test_class_order_is_a_seeded_permutation():
    a, b, c = class_order(range(10), 0), class_order(range(10), 0), class_order(range(10), 1)
    assert a == b and a != c and sorted(a) == list(range(10))


def test_class_incremental_covers_every_train_vector_once():
    s = class_incremental(LABELS, 3, seed=4)
    assert [len(st.new_classes) for st in s.steps] == [3, 3, 3, 1]
    idx = np.concatenate([i for st in s.steps for i in st.train_indices.values()])
    assert sorted(idx.tolist()) == list(range(len(LABELS)))
    for st in s.steps:
        for c, i in st.train_indices.items():
            assert np.all(LABELS[i] == c)
    assert s.seen_after(1) == s.order[:6]


def test_few_shot_has_exact_shots_and_differs_by_seed():
    s0, s1 = few_shot_incremental(LABELS, 2, 5, 0), few_shot_incremental(LABELS, 2, 5, 1)
    for st in s0.steps:
        for c, i in st.train_indices.items():
            assert len(i) == 5 and len(set(i.tolist())) == 5 and np.all(LABELS[i] == c)
    assert s0.order != s1.order
    again = few_shot_incremental(LABELS, 2, 5, 0)
    assert all(np.array_equal(a.train_indices[c], b.train_indices[c])
               for a, b in zip(s0.steps, again.steps) for c in a.new_classes)
    with pytest.raises(ValueError, match="fewer than 50 shots"):
        few_shot_incremental(LABELS, 2, 50, 0)
    with pytest.raises(ValueError, match="classes per increment"):
        few_shot_incremental(LABELS, 11, 5, 0)


def test_base_sessions_seeded():
    s = base_sessions(LABELS, 6, 2, 5, seed=3)
    assert len(s.steps) == 3 and len(s.steps[0].new_classes) == 6
    assert all(len(i) == 30 for i in s.steps[0].train_indices.values())
    assert all(len(i) == 5 for st in s.steps[1:] for i in st.train_indices.values())


def test_session_files_by_index_and_path(tmp_path):
    refs = [f"/data/train/c{y}/img{i}.png" for i, y in enumerate(LABELS)]
    d = tmp_path / "idx"
    d.mkdir()
    (d / "session_1.txt").write_text("\n".join(str(i) for i in range(0, 60)) + "\n")  # classes 0, 1
    (d / "session_2.txt").write_text("train/c2/img60.png\nc3/img90.png\n")
    (d / "session_10.txt").write_text("120\n")
    s = base_sessions(LABELS, 0, 0, 0, 0, session_dir=d, train_refs=refs)
    assert [st.new_classes for st in s.steps] == [(0, 1), (2, 3), (4,)]
    assert s.steps[1].train_indices[2].tolist() == [60]
    (d / "session_3.txt").write_text("nothing/like/this.png\n")
    with pytest.raises(ValueError, match="matches no train image"):
        read_session_files([d / "session_3.txt"], refs, LABELS)


def test_metrics_by_hand():
    assert top1(np.array([1, 2, 3, 4]), np.array([1, 2, 0, 0])) == 0.5
    assert average_incremental_accuracy([1.0, 0.5, 0.6]) == pytest.approx(0.7)
    # class 0: best 1.0, last 0.5 -> 0.5; class 1: best 0.8, last 0.8 -> 0; class 2 only last -> ignored
    steps = [{0: 1.0}, {0: 0.75, 1: 0.8}, {0: 0.5, 1: 0.8, 2: 0.9}]
    assert forgetting(steps) == pytest.approx(0.25)
    assert forgetting(steps[:1]) == 0.0
    assert mean_std([1.0, 3.0]) == (2.0, 1.0)
    with pytest.raises(ValueError):
        top1(np.array([1]), np.array([1, 2]))


def test_session_files_of_any_size_cost_at_most_the_train_set(tmp_path):
    """A session file was read whole and every line kept: a file repeating one index a billion
    times held a billion ints; one line of gigabytes was read whole before its first error."""
    refs = [f"/data/train/c{y}/img{i}.png" for i, y in enumerate(LABELS)]
    many = tmp_path / "session_1.txt"
    with open(many, "w") as fh:
        fh.write("0\n1\n")
        fh.write("0\n" * 2_000_000)  # stopped at the first repeat, not read to the end
    with pytest.raises(ValueError, match=r"session_1.txt:3: train image 0 is listed twice"):
        read_session_files([many], refs, LABELS)
    long = tmp_path / "session_2.txt"
    long.write_text("0\n" + "x" * 5_000_000 + "\n")
    with pytest.raises(ValueError, match=r"session_2.txt:2: line longer than 4096"):
        read_session_files([long], refs, LABELS)
    ok = tmp_path / "session_3.txt"
    ok.write_text("\n  0  \n\n1\r\ntrain/c2/img60.png\n")
    assert {c: v.tolist() for c, v in read_session_files([ok], refs, LABELS)[0].items()} == {0: [0, 1], 2: [60]}
