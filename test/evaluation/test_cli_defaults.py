"""cbcl-eval never writes over the committed results by default, and shows progress when piped."""
from __future__ import annotations

import re

from cbcl_pr_ros.cli import evaluate


def _args(argv):
    args = evaluate.build_parser().parse_args(argv)
    evaluate.default_paths(args, now=0.0)
    return args


def test_defaults_are_a_new_run_folder_and_explicit_paths_win():
    args = _args(["all"])
    assert args.out == "runs/eval-19700101-000000" and args.docs == "runs/eval-19700101-000000/results.md"
    report = _args(["report"])
    assert report.out == "runs/bench" and report.docs == "runs/report-19700101-000000/results.md"
    kept = _args(["all", "--out", "bench/results", "--docs", "docs/results.md"])
    assert (kept.out, kept.docs) == ("bench/results", "docs/results.md")


def test_a_piped_run_writes_its_run_folder_and_a_line_per_finished_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = evaluate.main(["--synthetic", "--seeds", "2", "--fast", "--methods", "ncm", "fsil-table", "--shots", "2",
                        "--ways", "5"])
    assert rc == 0
    out = capsys.readouterr().out  # captured: not a terminal, as when piped
    lines = re.findall(r"fsil-table on synthetic: (\d+)/(\d+) runs \(\d+ s\)", out)
    assert [int(done) for done, _ in lines] == [1, 2] and {total for _, total in lines} == {"2"}
    (run,) = list((tmp_path / "runs").glob("eval-*"))
    assert (run / "eval_fsil-table_synthetic" / "fsil-table.json").is_file()
    assert not (tmp_path / "bench").exists() and not (tmp_path / "docs").exists()
