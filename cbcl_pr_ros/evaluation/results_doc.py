"""docs/results.md: every table and figure written by ``cbcl-eval all``, and the answers to the
questions the evaluation exists for, computed from the numbers (so they are regenerated with them)."""
from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .experiments import Experiment
from .report import header_line, markdown_table, summarise

__all__ = ["write_results_doc", "answers"]

QUESTIONS = (
    "Does CBCL-PR beat CBCL, NCM and FLB on few-shot increments here, as the paper claims?",
    "Where does it stand against the Mahalanobis and streaming-LDA peers?",
    "How much does the diagonal mode lose?",
    "Which D, and why?",
)


def _fsil_means(exp: Experiment) -> dict[tuple, dict[str, tuple[float, float]]]:
    out: dict[tuple, dict[str, tuple[float, float]]] = defaultdict(dict)
    for r in summarise(exp):
        out[(r.get("shots"), r.get("ways"))][r["method"]] = (100 * r["avg_inc_acc"], 100 * r["avg_inc_acc_std"])
    return out


def answers(experiments: list[Experiment]) -> list[str]:
    """Markdown lines answering QUESTIONS from the measured numbers."""
    lines: list[str] = []
    for exp in experiments:
        if exp.name == "fsil-table":
            table = _fsil_means(exp)
            lines += [f"**{exp.dataset}, few-shot incremental (no base session), {len(exp.seeds)} seeds** — "
                      "differences in average incremental accuracy, percentage points (CBCL-PR minus other):", "",
                      "| shots | ways | CBCL-PR % | − CBCL | − NCM | − FLB | − Mahalanobis | − SLDA | − fast | diag − full |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
            wins = defaultdict(int)
            n = 0
            for (shots, ways), m in sorted(table.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0)):
                if "cbcl-pr" not in m:
                    continue
                n += 1
                base = m["cbcl-pr"][0]
                cells = []
                for other in ("cbcl", "ncm", "flb", "mahalanobis", "slda", "fast"):
                    if other in m:
                        diff = base - m[other][0]
                        wins[other] += diff > 0
                        cells.append(f"{diff:+.1f}")
                    else:
                        cells.append("")
                diag = f"{m['cbcl-pr-diag'][0] - base:+.1f}" if "cbcl-pr-diag" in m else ""
                lines.append(f"| {shots} | {ways} | {base:.1f} ± {m['cbcl-pr'][1]:.1f} | " + " | ".join(cells)
                             + f" | {diag} |")
            lines.append("")
            if n:
                lines.append("CBCL-PR is ahead in " + ", ".join(
                    f"{wins[o]}/{n} settings against {o}" for o in ("cbcl", "ncm", "flb", "mahalanobis", "slda", "fast"))
                    + ".")
                lines.append("")
        if exp.name == "curves":
            rows = summarise(exp)
            full = {(r.get("ways")): 100 * r["avg_inc_acc"] for r in rows if r["method"] == "cbcl-pr"}
            diag = {(r.get("ways")): 100 * r["avg_inc_acc"] for r in rows if r["method"] == "cbcl-pr-diag"}
            memf = {(r.get("ways")): r["memory_bytes"] for r in rows if r["method"] == "cbcl-pr"}
            memd = {(r.get("ways")): r["memory_bytes"] for r in rows if r["method"] == "cbcl-pr-diag"}
            for w in sorted(set(full) & set(diag)):
                lines.append(f"- {exp.dataset}, all data, {w} classes/increment: diagonal CBCL-PR {diag[w]:.1f}% vs "
                             f"full {full[w]:.1f}% ({diag[w] - full[w]:+.1f} points) with "
                             f"{memd[w] / 1024:.0f} KiB vs {memf[w] / 1024:.0f} KiB of memory.")
            lines.append("")
        if exp.name == "d-sweep":
            rows = [r for r in summarise(exp) if r["method"] == "cbcl-pr"]
            if rows:
                best = max(rows, key=lambda r: r["avg_inc_acc"])
                default = next((r for r in rows if r.get("d_scale") == 1.0), None)
                lines.append(f"- {exp.dataset}, D sweep ({exp.params.get('shots')}-shot, {exp.params.get('ways')}-way): "
                             + "; ".join(f"D×{r['d_scale']}: {100 * r['avg_inc_acc']:.1f}% with {r['clusters']:.0f} "
                                         f"clusters (D≈{r.get('D', float('nan')):.1f})" for r in rows) + ".")
                if default is not None:
                    lines.append(f"  Best scale {best['d_scale']} ({100 * best['avg_inc_acc']:.1f}%); the default "
                                 f"(scale 1, median within-class distance of the first increment) gives "
                                 f"{100 * default['avg_inc_acc']:.1f}%.")
            lines.append("")
    return lines


def _rel(target: Path, doc: Path) -> str:
    return os.path.relpath(target, doc.parent)


def write_results_doc(written: list[tuple[Experiment, Path]], doc_path: str | Path, wall_seconds: float = 0.0) -> Path:
    """Write the results document from the experiments of one ``cbcl-eval all`` run."""
    doc = Path(doc_path)
    doc.parent.mkdir(parents=True, exist_ok=True)
    exps = [e for e, _ in written]
    lines = ["# Results (generated by `cbcl-eval all`; do not edit by hand)", "",
             f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in {wall_seconds / 60:.1f} min. "
             "Accuracy is top-1 over all classes seen so far, after the last epoch of training (never the best "
             "epoch on test data); mean ± std over seeds (random class order per seed). "
             "See docs/evaluation.md for protocols and methods.", ""]
    datasets = sorted({e.dataset for e in exps})
    lines += [f"Data sets: {', '.join(datasets)}.", ""]
    lines += ["## Answers", ""] + [f"{i + 1}. {q}" for i, q in enumerate(QUESTIONS)] + [""]
    lines += answers(exps)
    for exp, out_dir in written:
        lines += [f"## {exp.name} — {exp.dataset}", "", header_line(exp), ""]
        lines += [f"- {n}" for n in exp.notes] + ([""] if exp.notes else [])
        lines += [markdown_table(exp), ""]
        for png in sorted(out_dir.glob("*.png")):
            lines.append(f"![{exp.name} {exp.dataset}]({_rel(png, doc)})")
        lines += [f"Raw runs: `{_rel(out_dir / (exp.name + '.json'), doc)}`", ""]
    doc.write_text("\n".join(lines) + "\n")
    return doc
