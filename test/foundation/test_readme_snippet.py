"""README's Python example runs as printed (it once named pictures it never defined) and shows what its
comments say (its untaught pictures once looked so like the mug that it named them the mug)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_readme_python_example_runs_verbatim(tmp_path, monkeypatch, capsys):
    text = (REPO / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert "mug_images =" in code and "frame =" in code and "other_objects =" in code
    monkeypatch.chdir(tmp_path)  # learner.save writes where it is run
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    out = capsys.readouterr().out.splitlines()
    assert "label='mug'" in out[0]
    # what the comments say: the object like the negatives offered is not named the mug
    assert out[-1] == "['mug', '']", out
    assert (tmp_path / "memory.cbcl").is_file()
