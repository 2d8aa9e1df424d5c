"""docs/results.md: every table and figure written by ``cbcl-eval all``, and the answers to the
questions the evaluation exists for, computed from the numbers (so they are regenerated with them)."""
from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .experiments import PIPELINE, PIPELINE_NOTES, Experiment
from .methods import METHOD_LABELS, PEERS
from .report import header_line, markdown_table, summarise

__all__ = ["write_results_doc", "answers"]

QUESTIONS = (
    "Is the product's default (CBCL-PR default) ahead of every frozen-feature peer at 1, 5 and 10 shots?",
    "Does the paper's head (CBCL-PR, SGD) beat CBCL, NCM and FLB on few-shot increments, as the paper claims?",
    "How much does the diagonal mode lose?",
    "Which D, and why?",
    "Does Agg-Var with pseudo-rehearsal beat other clusterings and the vote (ablation), and where is the default?",
    "What does a memory budget K cost, reduction vs removal?",
    "How does prediction time grow with the stored clusters?",
)

# the frozen-feature peer comparison (own splits, transforms, calibration), written by bench/bench_accuracy.py
PEER_COMPARISON = Path("bench/results/accuracy/accuracy.md")

# the hand-written part at the end of the document (history moved out of the code), kept as it is
# whenever the generated part above it is rewritten
HISTORY = "## History"

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
        version = exp.params.get("pipeline")
        old = ("" if version == PIPELINE else " (stored before the backbone name reached the learner)"
               if version in PIPELINE_NOTES else " (stored run of the earlier pipeline)")
        if exp.name in ("fsil-table", "sota"):
            lines += _paired_table(exp)
        if exp.name == "curves":
            rows = summarise(exp)
            full = {(r.get("ways")): 100 * r["avg_inc_acc"] for r in rows if r["method"] == "cbcl-pr"}
            diag = {(r.get("ways")): 100 * r["avg_inc_acc"] for r in rows if r["method"] == "cbcl-pr-diag"}
            memf = {(r.get("ways")): r["memory_bytes"] for r in rows if r["method"] == "cbcl-pr"}
            memd = {(r.get("ways")): r["memory_bytes"] for r in rows if r["method"] == "cbcl-pr-diag"}
            dflt = {(r.get("ways")): r for r in rows if r["method"] == REFERENCE}
            for w in sorted(set(full) & set(diag)):
                ref = (f"; the default {100 * dflt[w]['avg_inc_acc']:.1f}% with {dflt[w]['memory_bytes'] / 1024:.0f} KiB"
                       if w in dflt else "")
                lines.append(f"- {exp.dataset}{old}, all data, {w} classes/increment: diagonal CBCL-PR {diag[w]:.1f}% vs "
                             f"full {full[w]:.1f}% ({diag[w] - full[w]:+.1f} points) with "
                             f"{memd[w] / 1024:.0f} KiB vs {memf[w] / 1024:.0f} KiB of memory (paper head){ref}.")
            lines.append("")
        if exp.name == "d-sweep":
            allrows = summarise(exp)
            present = {r["method"] for r in allrows}
            picks = [m for m in (REFERENCE, "cbcl-pr") if m in present] or sorted(present)[:1]
            for pick in picks:
                rows = [r for r in allrows if r["method"] == pick]
                if not rows:
                    continue
                best = max(rows, key=lambda r: r["avg_inc_acc"])
                default = next((r for r in rows if r.get("d_scale") == 1.0), None)
                lines.append(f"- {exp.dataset}{old}, D sweep of {pick} ({exp.params.get('shots')}-shot, {exp.params.get('ways')}-way): "
                             + "; ".join(f"D×{r['d_scale']}: {100 * r['avg_inc_acc']:.1f}% with {r['clusters']:.0f} "
                                         f"clusters (D≈{r.get('D', float('nan')):.2f})" for r in rows) + ".")
                if default is not None:
                    lines.append(f"  Best scale {best['d_scale']} ({100 * best['avg_inc_acc']:.1f}%); the learner's own D "
                                 f"(scale 1) gives {100 * default['avg_inc_acc']:.1f}%.")
            lines.append("")
        if exp.name == "ablation":
            lines += _ablation_answer(exp, old)
        if exp.name == "memory-budget":
            lines += _budget_answer(exp, old)
        if exp.name == "prediction-time":
            lines += _time_answer(exp, old)
    return lines


def _label(method: str) -> str:
    return f"{METHOD_LABELS.get(method, method)} (`{method}`)"


def _ablation_answer(exp: Experiment, old: str) -> list[str]:
    rows = {r["method"]: r for r in summarise(exp)}
    acc = {m: 100 * r["avg_inc_acc"] for m, r in rows.items()}
    if not acc:
        return []
    w = exp.params.get("ways")
    text = f"- {exp.dataset}{old}, ablation (all data, {w} classes/increment): " + "; ".join(
        f"{m} {acc[m]:.1f}%" for m in sorted(acc, key=acc.get, reverse=True)) + "."
    extra = []
    if "cbcl-pr-diag" in acc:
        for m in ("trad-agg-pr", "kmeans-pr"):
            if m in acc:
                extra.append(f"Agg-Var minus {m} {acc['cbcl-pr-diag'] - acc[m]:+.1f} points")
        if "cbcl" in acc:
            extra.append(f"pseudo-rehearsal head minus the vote on the same clusters "
                         f"{acc['cbcl-pr-diag'] - acc['cbcl']:+.1f} points")
        if REFERENCE in acc:
            extra.append(f"the default minus the paper's CBCL-PR_D {acc[REFERENCE] - acc['cbcl-pr-diag']:+.1f} points")
    return [text + (" " + "; ".join(extra) + "." if extra else ""), ""]


def _budget_answer(exp: Experiment, old: str) -> list[str]:
    lines = []
    rows = summarise(exp)
    for m in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == m]
        unl = next((r for r in mine if r.get("K") == "unlimited"), None)
        ks = sorted({r["K"] for r in mine if r.get("K") != "unlimited"})
        if unl is None or not ks:
            continue
        parts = []
        for k in ks:
            by = {r["reduction"]: 100 * r["avg_inc_acc"] for r in mine if r.get("K") == k}
            parts.append(f"K={k}: " + ", ".join(f"{red} {v - 100 * unl['avg_inc_acc']:+.1f}" for red, v in sorted(by.items())))
        lines.append(f"- {exp.dataset}{old}, {m}: unlimited {100 * unl['avg_inc_acc']:.1f}% with "
                     f"{unl['clusters']:.0f} clusters; points vs unlimited: " + "; ".join(parts) + ".")
    return lines + [""] if lines else []


def _time_answer(exp: Experiment, old: str) -> list[str]:
    parts = []
    for m in dict.fromkeys(r.method for r in exp.runs):
        runs = [r for r in exp.runs if r.method == m]
        first = np.mean([r.predict_ms_per_image[0] for r in runs])
        last = np.mean([r.predict_ms_per_image[-1] for r in runs])
        cl0, cl1 = np.mean([r.n_clusters[0] for r in runs]), np.mean([r.n_clusters[-1] for r in runs])
        parts.append(f"{m} {first:.3f} → {last:.3f} ms/image ({cl0:.0f} → {cl1:.0f} clusters)")
    load = ", ".join(f"{v:.1f}" for v in exp.machine.get("loadavg", []))
    return [f"- {exp.dataset}{old}, prediction time from the first to the last increment (features given, "
            f"load {load}): " + "; ".join(parts) + ".", ""] if parts else []


def _configs(exp: Experiment) -> list[str]:
    """The configuration every row runs (stored with the experiment)."""
    configs = exp.params.get("configs") or {}
    if not configs:
        return []
    return ["Configurations:", ""] + [f"- {_label(m)}: {c}" for m, c in configs.items()] + [""]


def _rel(target: Path, doc: Path) -> str:
    return os.path.relpath(Path(target).resolve(), Path(doc).resolve().parent)


def _history(doc: Path) -> list[str]:
    """The document's hand-written ``## History`` section to its end, or nothing."""
    if not doc.is_file():
        return []
    lines = doc.read_text(encoding="utf-8").splitlines()
    return lines[lines.index(HISTORY):] if HISTORY in lines else []


def write_results_doc(written: list[tuple[Experiment, Path]], doc_path: str | Path, wall_seconds: float = 0.0) -> Path:
    """Write the results document from the experiments of one ``cbcl-eval all`` run; a ``## History``
    section at its end is hand-written and kept."""
    doc = Path(doc_path)
    doc.parent.mkdir(parents=True, exist_ok=True)
    history = _history(doc)
    exps = [e for e, _ in written]
    took = (f"this invocation took {wall_seconds / 60:.1f} min (with `--reuse`, stored runs are not recomputed)"
            if wall_seconds else "from the runs stored by each command (`cbcl-eval report`)")
    lines = ["# Results (generated by `cbcl-eval all` or `cbcl-eval report`; do not edit by hand above "
             f"\"{HISTORY[3:]}\")", "",
             f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {took}. "
             "Accuracy is top-1 over all classes seen so far, after the last epoch of training (never the best "
             "epoch on test data); mean ± std over seeds (random class order per seed). "
             "See docs/evaluation.md for protocols and methods.", ""]
    datasets = sorted({e.dataset for e in exps})
    lines += [f"Data sets: {', '.join(datasets)}.", ""]
    lines += [f"Every CBCL-PR row is the product's `CBCLPRLearner` (through the evaluation's adapter): "
              "`cbcl-pr-default` is `LearnerConfig()` as shipped, the paper's rows are `LearnerConfig.paper(...)`; "
              "rows are taught from cached feature vectors, so without the teach-time views the learner node adds "
              "to taught images by default (their effect is in the peer comparison below); "
              "each experiment lists the configuration of each row. The frozen-feature peer comparison "
              f"(own splits, 10 seeds, transforms and calibration): [{PEER_COMPARISON}]({_rel(PEER_COMPARISON, doc)}) "
              f"(bench/bench_accuracy.py). How the stored runs were made (machine, load, reduced seeds) and what "
              f"changed when they were rerun: [docs/evaluation.md]({_rel(Path('docs/evaluation.md'), doc)}), "
              "\"Speed on a busy machine\".", ""]
    lines += ["## Answers", ""] + [f"{i + 1}. {q}" for i, q in enumerate(QUESTIONS)] + [""]
    lines += answers(exps)
    for exp, out_dir in written:
        lines += [f"## {exp.name} — {exp.dataset}", "", header_line(exp), ""]
        lines += [f"- {n}" for n in exp.notes] + ([""] if exp.notes else [])
        lines += _configs(exp)
        lines += [markdown_table(exp), ""]
        # named, not embedded: the runs are written outside git (``--out``), the tables above are the figures
        plots = ", ".join(f"`{_rel(png, doc)}`" for png in sorted(out_dir.glob("*.png")))
        lines += [f"Raw runs: `{_rel(out_dir / (exp.name + '.json'), doc)}`" + (f"; plots: {plots}" if plots else ""), ""]
    doc.write_text("\n".join(lines + history) + "\n")
    return doc
