"""cbcl-eval's progress bar has a known total (issue 21, outcome 7): the runs it plans are the runs
each command makes, on a small synthetic feature set."""
from __future__ import annotations

import pytest
from rich.progress import Progress

from cbcl_pr_ros.cli import evaluate
from cbcl_pr_ros.evaluation.featureset import synthetic_feature_set


@pytest.mark.parametrize("argv", [
    ["--methods", "ncm,cbcl", "--seeds", "2", "fsil-table", "--ways", "2,5,7", "--shots", "1,2"],
    ["--methods", "ncm", "--seeds", "2", "curves", "--ways", "2,5"],
    ["--methods", "ncm", "--seeds", "2", "ablation"],
    ["--methods", "ncm", "--seeds", "4", "prediction-time"],
    ["--methods", "ncm", "--seeds", "1", "sota"],
    ["--methods", "cbcl", "--seeds", "1", "d-sweep", "--scales", "1.0,2.0", "--shots", "2"],
    ["--methods", "cbcl-pr-default", "--seeds", "1", "memory-budget", "--budgets", "10,20"],
])
def test_planned_runs_are_the_runs_made(argv):
    args = evaluate.build_parser().parse_args(["--synthetic", "--fast", *argv])
    fs = synthetic_feature_set(n_classes=10, dim=8, train_per_class=12, test_per_class=4, seed=1)
    planned = evaluate.planned_runs(args.command, len(fs.classes), args)
    with Progress(disable=True) as progress:
        exp = evaluate._run_command(args.command, fs, args, progress)
        total = progress.tasks[0].total
    assert planned == len(exp.runs) == total, (planned, len(exp.runs))
