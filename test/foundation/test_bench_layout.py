"""Bench results live outside git, a small curated set stays, and bench and tests share helpers from
one place (test/support), never by loading each other's files by path.

Read from the sources with ``ast``: a bench script that names ``bench/results`` (or a ``"results"``
path part) as where it writes, or reaches into ``test/`` by path, fails here; so does a test that
loads a file by path instead of importing it (pytest.ini puts test/support and bench/ on the path).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
CURATED = BENCH / "results"
MAX_CURATED_BYTES = 1_000_000
COMMON = "bench_common.py"


def _paths(path: Path) -> list[tuple[int, str]]:
    """(line, text) of the path parts a script builds: strings outside docstrings that name a folder
    with slashes, and the strings joined with ``/`` onto a path."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found = [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and id(n) not in docs and "/" in n.value]
    found += [(n.lineno, side.value) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
              for side in (n.left, n.right) if isinstance(side, ast.Constant) and isinstance(side.value, str)]
    return found


def _scripts() -> list[Path]:
    found = sorted(p for p in BENCH.rglob("*.py") if p.name != COMMON)
    assert len(found) > 20, "the bench scripts were not found"
    return found


def test_the_curated_results_stay_small():
    files = [p for p in CURATED.rglob("*") if p.is_file() and not p.name.startswith("tmp")]
    total = sum(p.stat().st_size for p in files)
    assert total < MAX_CURATED_BYTES, (f"bench/results holds {total} bytes in {len(files)} files (at most "
                                       f"{MAX_CURATED_BYTES}): runs go to runs/bench/ (bench/bench_common.py)")
    assert (CURATED / "pipeline_baseline.json").is_file()  # what the CI's short pipeline run compares with


def test_bench_scripts_write_outside_git_and_reach_test_helpers_only_through_bench_common():
    bad = []
    for path in _scripts():
        for line, text in _paths(path):
            if text in ("results", "test", "support") or "bench/results" in text or text.startswith("test/"):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {text[:60]!r}")
        if "spec_from_file_location" in path.read_text(encoding="utf-8"):
            bad.append(f"{path.relative_to(ROOT)}: loads a file by path")
    assert not bad, "bench scripts must use bench_common (out_path, CURATED, test/support):\n" + "\n".join(bad)


def test_bench_common_sends_runs_outside_git(monkeypatch, tmp_path):
    import bench_common

    monkeypatch.delenv("CBCL_BENCH_OUT", raising=False)
    assert bench_common.out_root() == ROOT / "runs" / "bench"
    assert "/runs/" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    monkeypatch.setenv("CBCL_BENCH_OUT", str(tmp_path / "elsewhere"))
    out = bench_common.out_path("sub/x.json")
    assert out == tmp_path / "elsewhere" / "sub" / "x.json" and out.parent.is_dir()


def test_tests_import_shared_helpers_instead_of_loading_files():
    bad = [f"{p.relative_to(ROOT)}" for p in sorted((ROOT / "test").rglob("*.py"))
           if p != Path(__file__) and "spec_from_file_location" in p.read_text(encoding="utf-8")]
    assert not bad, "tests import bench scripts and test/support helpers by name (pytest.ini):\n" + "\n".join(bad)


def test_every_bench_that_reads_the_real_frames_honours_CBCL_REAL_RGBD():
    """The real RGB-D frames may not be redistributed and live where each machine keeps them: every
    bench with a ``--frames`` option takes its default from ``$CBCL_REAL_RGBD``, as the tests do, so
    one variable points all of them at the set (a bench that ignored it ran on a missing folder)."""
    found, ignoring = [], []
    for path in _scripts():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "add_argument" and call.args and isinstance(call.args[0], ast.Constant)
                    and call.args[0].value == "--frames"):
                continue
            found.append(path.name)
            default = next((k.value for k in call.keywords if k.arg == "default"), None)
            if default is None or "CBCL_REAL_RGBD" not in ast.unparse(default):
                ignoring.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    assert "bench_real.py" in found and len(found) >= 5, found
    assert not ignoring, "--frames must default to $CBCL_REAL_RGBD: " + ", ".join(ignoring)
