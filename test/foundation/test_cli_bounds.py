"""Counts on the command line have a range: ``teaching_session --threads`` (executor threads per node)
and ``cbcl-render-dataset --objects-per-class`` / ``--poses-per-object`` took any integer, so a
mistyped 100000 started that many threads per node or rendered for days before anything said no.
Now argparse refuses it at once, naming the option and the range."""
from __future__ import annotations

import pytest

from cbcl_pr_ros.cli import render_dataset
from cbcl_pr_ros.nodes import session


@pytest.mark.parametrize("value", ["100000", "65", "-1", "4" * 5000, "two"], ids=["big", "65", "negative", "5000-digits", "word"])
def test_threads_out_of_range_are_refused_by_argparse(value, capsys):
    with pytest.raises(SystemExit) as done:
        session.parse_args(["--threads", value])
    said = capsys.readouterr().err.splitlines()[-1]  # after the usage lines
    assert done.value.code == 2 and "argument --threads: must be an integer from 0 to 64" in said and len(said) < 200


def test_threads_in_range_are_taken():
    assert session.parse_args([]).threads == 0 and session.parse_args(["--threads", "64"]).threads == 64


@pytest.mark.parametrize("option, value, high", [("--objects-per-class", "100000", 1000), ("--objects-per-class", "0", 1000),
                                                 ("--poses-per-object", "101", 100)])
def test_data_set_counts_out_of_range_are_refused_by_argparse(option, value, high, capsys):
    with pytest.raises(SystemExit) as done:
        render_dataset.main(["/nonexistent/out", option, value])
    assert done.value.code == 2 and f"argument {option}: must be an integer from 1 to {high}" in capsys.readouterr().err


def test_the_data_set_spec_refuses_the_same_counts():
    from cbcl_pr_ros.robot.dataset import DatasetSpec

    with pytest.raises(ValueError, match=r"objects_per_class must be in \[1, 1000\]"):
        DatasetSpec(objects_per_class=1001, train_per_class=1)
    args = render_dataset.build_parser().parse_args(["out", "--objects-per-class", "1000", "--poses-per-object", "100"])
    assert (args.objects_per_class, args.poses_per_object) == (1000, 100)
