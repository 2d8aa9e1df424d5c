"""README's Python example runs as printed (it once named pictures it never defined)."""
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
    assert "label='mug'" in capsys.readouterr().out
    assert (tmp_path / "memory.cbcl").is_file()
