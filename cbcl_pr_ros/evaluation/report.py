"""Write an experiment as JSON (every run), CSV and Markdown (mean ± std over seeds) and PNG plots."""
from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from .experiments import Experiment
from .methods import METHOD_LABELS
from .metrics import mean_std

__all__ = ["summarise", "write_experiment", "markdown_table", "plot_experiment", "header_line", "GROUP_KEYS"]

GROUP_KEYS = ("shots", "ways", "base", "K", "reduction", "d_scale")


def _group_key(r) -> tuple:
    return (r.method,) + tuple((k, r.info[k]) for k in GROUP_KEYS if k in r.info)


def summarise(exp: Experiment) -> list[dict]:
    """One row per (method, protocol setting): mean and std over seeds of the reported metrics."""
    groups = defaultdict(list)
    for r in exp.runs:
        groups[_group_key(r)].append(r)
    rows = []
    for key, runs in groups.items():
        row = {"method": key[0], **dict(key[1:]), "seeds": len(runs)}
        for name, vals in (
            ("avg_inc_acc", [r.average_incremental_accuracy for r in runs]),
            ("final_acc", [r.final_accuracy for r in runs]),
            ("forgetting", [r.forgetting for r in runs]),
            ("teach_s_per_increment", [float(np.mean(r.teach_seconds)) for r in runs]),
            ("predict_ms_per_image", [float(np.mean(r.predict_ms_per_image)) for r in runs]),
            ("memory_bytes", [r.memory_bytes[-1] for r in runs]),
            ("clusters", [r.n_clusters[-1] for r in runs]),
        ):
            m, s = mean_std(vals)
            row[name], row[name + "_std"] = m, s
        if any("D" in r.info for r in runs):
            row["D"] = float(np.mean([r.info.get("D", np.nan) for r in runs]))
        rows.append(row)
    order = {m: i for i, m in enumerate(METHOD_LABELS)}

    def setting(v) -> tuple:
        try:
            return (0, float(v), "")
        except (TypeError, ValueError):
            return (1, 0.0, str(v))

    rows.sort(key=lambda r: (tuple(setting(r.get(k, "")) for k in GROUP_KEYS), order.get(r["method"], 99)))
    return rows


def header_line(exp: Experiment) -> str:
    m = exp.machine
    return (f"data set **{exp.dataset}**, backbone **{exp.backbone}**, seeds {len(exp.seeds)} "
            f"({exp.seeds[0]}..{exp.seeds[-1]}), machine: {m.get('cpu', '?')} ×{m.get('nproc', '?')}, "
            f"load {', '.join(f'{v:.1f}' for v in m.get('loadavg', []))}")


def _pct(row: dict, key: str) -> str:
    return f"{100 * row[key]:.1f} ± {100 * row[key + '_std']:.1f}"


def markdown_table(exp: Experiment, rows: list[dict] | None = None) -> str:
    """A Markdown table of the summary rows (accuracies in %)."""
    rows = rows if rows is not None else summarise(exp)
    keys = [k for k in GROUP_KEYS if any(k in r for r in rows)]
    head = ["method", *keys, "avg inc. acc %", "final acc %", "forgetting %", "teach s/incr.", "predict ms/img",
            "memory KiB", "clusters"]
    if any("D" in r for r in rows):
        head.append("D")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [METHOD_LABELS.get(r["method"], r["method"]), *[str(r.get(k, "")) for k in keys],
                 _pct(r, "avg_inc_acc"), _pct(r, "final_acc"), _pct(r, "forgetting"),
                 f"{r['teach_s_per_increment']:.3f}", f"{r['predict_ms_per_image']:.4f}",
                 f"{r['memory_bytes'] / 1024:.0f}", f"{r['clusters']:.0f}"]
        if "D" in head:
            cells.append(f"{r['D']:.2f}" if "D" in r and np.isfinite(r["D"]) else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _curve(runs):
    n = min(len(r.accuracy) for r in runs)
    acc = np.array([r.accuracy[:n] for r in runs])
    return np.array(runs[0].n_classes[:n]), acc.mean(0), acc.std(0)


def plot_experiment(exp: Experiment, out_dir: Path) -> list[Path]:
    """PNG figures for the experiment (Agg backend, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: list[Path] = []
    title = f"{exp.name}: {exp.dataset}, {exp.backbone}, {len(exp.seeds)} seeds"
    by = defaultdict(list)
    for r in exp.runs:
        by[_group_key(r)].append(r)

    def save(fig, name):
        p = out_dir / name
        fig.savefig(p, dpi=110, bbox_inches="tight")
        plt.close(fig)
        out.append(p)

    if exp.name in ("curves", "fsil-table", "sota", "ablation"):
        panels = sorted({tuple((k, v) for k, v in key[1:]) for key in by}, key=str)
        fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
        for ax, panel in zip(axes[0], panels):
            for key, runs in by.items():
                if tuple(key[1:]) != panel:
                    continue
                x, m, s = _curve(runs)
                ax.plot(x, 100 * m, marker="o", ms=3, label=f"{key[0]} ({100 * m.mean():.1f})")
                ax.fill_between(x, 100 * (m - s), 100 * (m + s), alpha=0.15)
            ax.set_title(", ".join(f"{k}={v}" for k, v in panel) or exp.name, fontsize=9)
            ax.set_xlabel("classes seen")
            ax.set_ylabel("top-1 accuracy (%)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(title, fontsize=10)
        save(fig, f"{exp.name}.png")
    if exp.name == "memory-budget":
        fig, ax = plt.subplots(figsize=(5, 4))
        for i, meth in enumerate(dict.fromkeys(key[0] for key in by)):
            colour = f"C{i}"
            for red, style in (("kmeans", "-"), ("remove", ":")):
                pts = sorted((key_dict["K"], np.mean([r.average_incremental_accuracy for r in runs]),
                              np.std([r.average_incremental_accuracy for r in runs]))
                             for key, runs in by.items()
                             if key[0] == meth and (key_dict := dict(key[1:])).get("reduction") == red)
                if pts:
                    k, m, s = map(np.array, zip(*pts))
                    ax.errorbar(k, 100 * m, 100 * s, marker="o", capsize=3, ls=style, color=colour,
                                label=f"{meth}: " + ("reduction (k-means)" if red == "kmeans" else "removal"))
            unl = [runs for key, runs in by.items() if key[0] == meth and dict(key[1:]).get("K") == "unlimited"]
            if unl:
                ax.axhline(100 * np.mean([r.average_incremental_accuracy for r in unl[0]]), ls="--", color=colour,
                           alpha=0.6, label=f"{meth}: unlimited")
        ax.set_xlabel("memory budget K (clusters)")
        ax.set_ylabel("average incremental accuracy (%)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_title(title, fontsize=9)
        save(fig, "memory-budget.png")
    if exp.name == "prediction-time":
        fig, ax = plt.subplots(figsize=(5, 4))
        for key, runs in by.items():
            cl = np.mean([r.n_clusters for r in runs], axis=0)
            ms = np.mean([r.predict_ms_per_image for r in runs], axis=0)
            ax.plot(cl, ms, marker="o", label=key[0])
        ax.set_xlabel("stored clusters")
        ax.set_ylabel("prediction time (ms / image, features given)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_title(title, fontsize=9)
        save(fig, "prediction-time.png")
    if exp.name == "d-sweep":
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        for m in sorted({k[0] for k in by}):
            pts = sorted((dict(key[1:])["d_scale"], runs) for key, runs in by.items() if key[0] == m)
            sc = np.array([p[0] for p in pts])
            acc = np.array([np.mean([r.average_incremental_accuracy for r in p[1]]) for p in pts])
            cl = np.array([np.mean([r.n_clusters[-1] for r in p[1]]) for p in pts])
            a1.plot(sc, 100 * acc, marker="o", label=m)
            a2.plot(sc, cl, marker="o", label=m)
        a1.set_xlabel("D / default D")
        a1.set_ylabel("average incremental accuracy (%)")
        a2.set_xlabel("D / default D")
        a2.set_ylabel("clusters after last increment")
        for a in (a1, a2):
            a.grid(alpha=0.3)
            a.legend(fontsize=8)
        fig.suptitle(title, fontsize=10)
        save(fig, "d-sweep.png")
    return out


def write_experiment(exp: Experiment, out_dir: str | Path) -> dict[str, Path]:
    """``<out_dir>/<exp>.json`` (all runs), ``.csv`` and ``.md`` (summary) and PNG plots."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = summarise(exp)
    paths = {"json": out_dir / f"{exp.name}.json", "csv": out_dir / f"{exp.name}.csv",
             "md": out_dir / f"{exp.name}.md"}
    paths["json"].write_text(json.dumps({**exp.to_dict(), "summary": rows}, indent=1, default=str))
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(paths["csv"], "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    md = [f"### {exp.name} — {exp.dataset}", "", header_line(exp), ""]
    md += [f"- {n}" for n in exp.notes] + ([""] if exp.notes else [])
    md += [markdown_table(exp, rows), ""]
    plots = plot_experiment(exp, out_dir)
    md += [f"![{p.stem}]({p.name})" for p in plots]
    paths["md"].write_text("\n".join(md) + "\n")
    for i, p in enumerate(plots):
        paths[f"png{i}"] = p
    return paths
