"""docs/results.md: every table and figure written by ``cbcl-eval all``, and the answers to the
questions the evaluation exists for, computed from the numbers (so they are regenerated with them)."""
from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .experiments import PIPELINE, Experiment
from .methods import PEERS
from .report import header_line, markdown_table, summarise

__all__ = ["write_results_doc", "answers"]

QUESTIONS = (
    "Is the product's default (CBCL-PR default) ahead of every frozen-feature peer at 1, 5 and 10 shots?",
    "Does the paper's head (CBCL-PR, SGD) beat CBCL, NCM and FLB on few-shot increments, as the paper claims?",
    "How much does the diagonal mode lose?",
    "Which D, and why?",
)

REFERENCE = "cbcl-pr-default"
COMPARED = ("cbcl-pr", "fast", "cbcl", "cbcl-1nn", *PEERS)


def _paired_table(exp: Experiment) -> list[str]:
    """The default minus each other method, paired by seed (same class order and shots), mean ± std."""
    acc: dict[tuple, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in exp.runs:
        acc[(r.info.get("shots"), r.info.get("ways"), r.info.get("base"))][r.method][r.seed] = \
            100 * r.average_incremental_accuracy
    present = {m for per in acc.values() for m in per}
    if REFERENCE not in present:
        return []
    compared = [o for o in COMPARED if o in present]
    what = "few-shot incremental, no base session" if exp.name == "fsil-table" else "base session + few-shot sessions"
    lines = [f"**{exp.dataset}, {what}, {len(exp.seeds)} seeds** — the default's average incremental accuracy and "
             "its difference to each method in percentage points (default minus other; paired by seed, mean ± std):",
             "", "| shots | ways | default % | " + " | ".join(f"− {o}" for o in compared) + " | paper diag − full |",
             "|---|---|---|" + "---|" * (len(compared) + 1)]
    ahead: dict[str, int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)

    def diff(a: dict[int, float], b: dict[int, float]) -> tuple[float, float] | None:
        seeds = sorted(set(a) & set(b))
        if not seeds:
            return None
        d = np.array([a[s] - b[s] for s in seeds])
        return float(d.mean()), float(d.std())

    for key in sorted(acc, key=lambda k: tuple(v or 0 for v in k)):
        m = acc[key]
        if REFERENCE not in m:
            continue
        ref = m[REFERENCE]
        cells = []
        for o in compared:
            d = diff(ref, m[o]) if o in m else None
            if d is not None:
                ahead[o] += d[0] >= 1.0
                seen[o] += 1
            cells.append("" if d is None else f"{d[0]:+.1f} ± {d[1]:.1f}")
        dd = diff(m["cbcl-pr-diag"], m["cbcl-pr"]) if "cbcl-pr-diag" in m and "cbcl-pr" in m else None
        vals = list(ref.values())
        lines.append(f"| {key[0]} | {key[1]} | {np.mean(vals):.1f} ± {np.std(vals):.1f} | " + " | ".join(cells)
                     + f" | {'' if dd is None else f'{dd[0]:+.1f} ± {dd[1]:.1f}'} |")
    lines.append("")
    if seen:
        lines += ["The default is ahead by at least 1 point in " + ", ".join(
            f"{ahead[o]}/{seen[o]} settings against {o}" for o in compared if seen[o]) + ".", ""]
    return lines


def answers(experiments: list[Experiment]) -> list[str]:
    """Markdown lines answering QUESTIONS from the measured numbers."""
    lines: list[str] = []
    for exp in experiments:
        old = "" if exp.params.get("pipeline") == PIPELINE else " (stored run of the earlier pipeline)"
        if exp.name in ("fsil-table", "sota"):
            lines += _paired_table(exp)
        if exp.name == "curves":
            rows = summarise(exp)
            full = {(r.get("ways")): 100 * r["avg_inc_acc"] for r in rows if r["method"] == "cbcl-pr"}
            diag = {(r.get("ways")): 100 * r["avg_inc_acc"] for r in rows if r["method"] == "cbcl-pr-diag"}
            memf = {(r.get("ways")): r["memory_bytes"] for r in rows if r["method"] == "cbcl-pr"}
            memd = {(r.get("ways")): r["memory_bytes"] for r in rows if r["method"] == "cbcl-pr-diag"}
            for w in sorted(set(full) & set(diag)):
                lines.append(f"- {exp.dataset}{old}, all data, {w} classes/increment: diagonal CBCL-PR {diag[w]:.1f}% vs "
                             f"full {full[w]:.1f}% ({diag[w] - full[w]:+.1f} points) with "
                             f"{memd[w] / 1024:.0f} KiB vs {memf[w] / 1024:.0f} KiB of memory.")
            lines.append("")
        if exp.name == "d-sweep":
            allrows = summarise(exp)
            present = {r["method"] for r in allrows}
            pick = next((m for m in (REFERENCE, "cbcl-pr") if m in present), min(present, default=None))
            rows = [r for r in allrows if r["method"] == pick]
            if rows:
                best = max(rows, key=lambda r: r["avg_inc_acc"])
                default = next((r for r in rows if r.get("d_scale") == 1.0), None)
                lines.append(f"- {exp.dataset}{old}, D sweep of {pick} ({exp.params.get('shots')}-shot, {exp.params.get('ways')}-way): "
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
    took = (f"this invocation took {wall_seconds / 60:.1f} min (with `--reuse`, stored runs are not recomputed)"
            if wall_seconds else "from the runs stored by each command (`cbcl-eval report`)")
    lines = ["# Results (generated by `cbcl-eval all` or `cbcl-eval report`; do not edit by hand)", "",
             f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {took}. "
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
