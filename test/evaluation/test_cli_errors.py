"""cbcl-eval's answers to wrong arguments are one line each (no usage block, no traceback), name the nearest
valid choice for a misspelling, and every option says what it is in --help."""
from __future__ import annotations

import argparse

import pytest

from cbcl_pr_ros.cli import evaluate


def _argparse_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        evaluate.main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err  # argparse printed its whole usage block first
    return lines[0]


def _run_error(argv, capsys) -> str:
    assert evaluate.main(argv) == 1
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and captured.out == "", (captured.out, captured.err)
    return lines[0]


def test_a_misspelt_command_is_one_line_with_the_nearest_command(capsys):
    line = _argparse_error(["fsil-tabel"], capsys)
    assert line.startswith("cbcl-eval: error: unknown command 'fsil-tabel' (did you mean 'fsil-table'?)")
    assert "curves" in line and "--help" in line


def test_an_unknown_method_is_one_line_with_the_nearest_method(capsys):
    line = _argparse_error(["fsil-table", "--methods", "cbcl-pr,fecm"], capsys)
    assert "unknown method 'fecm' (did you mean 'fecam'?)" in line and "cbcl-pr-default" in line
    line = _argparse_error(["--backbone", "resnet5O", "fsil-table"], capsys)
    assert "unknown value for --backbone 'resnet5O'" in line and "efficientnet_lite0" in line


def test_an_unknown_data_set_name_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    line = _run_error(["--dataset", "fashon-mnist", "fsil-table"], capsys)
    assert "unknown data set 'fashon-mnist' (did you mean 'fashion-mnist'?)" in line and "NAME=PATH" in line


def test_a_missing_data_set_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    line = _run_error(["--data-root", str(tmp_path), "--dataset", "fashion-mnist", "fsil-table"], capsys)
    assert line.startswith("cbcl-eval: error: data set fashion-mnist is not under")
    assert "scripts/get-fashion-mnist" in line


def test_a_folder_that_is_not_there_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    line = _run_error(["--dataset", f"mine={tmp_path / 'nothing'}", "fsil-table"], capsys)
    assert "mine" in line and "is not a directory" in line


def test_a_missing_weights_file_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine" / "a").mkdir(parents=True)
    line = _run_error(["--dataset", f"mine={tmp_path / 'mine'}", "--backbone", "resnet18", "--weights",
                       str(tmp_path / "resnet18.pth"), "fsil-table"], capsys)
    assert "resnet18" in line and "not found" in line


def test_every_option_of_every_command_says_what_it_is():
    parser = evaluate.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in [("cbcl-eval", parser), *subs.choices.items()]:
        silent = [a.option_strings for a in sub._actions
                  if a.option_strings and not a.help and a.help != argparse.SUPPRESS]
        assert not silent, (name, silent)  # --shots, --ways, --base, ... had no help text
