"""docs/results.md keeps its hand-written history when the generated part is rewritten."""
from __future__ import annotations

from cbcl_pr_ros.evaluation.results_doc import HISTORY, write_results_doc


def test_history_section_survives_a_rewrite(tmp_path):
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\nold generated table\n\n" + HISTORY + "\n\n- kept by hand\n", encoding="utf-8")
    write_results_doc([], doc)
    text = doc.read_text(encoding="utf-8")
    assert "old generated table" not in text  # the generated part is rewritten
    assert text.endswith(HISTORY + "\n\n- kept by hand\n")
    assert text.count(HISTORY) == 1


def test_a_doc_without_history_gets_none(tmp_path):
    doc = tmp_path / "results.md"
    write_results_doc([], doc)
    assert HISTORY not in doc.read_text(encoding="utf-8").splitlines()
