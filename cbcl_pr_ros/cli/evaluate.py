"""cbcl-eval: the paper's experiments as commands, on cached frozen features.

    cbcl-eval datasets                       # which data sets are present / missing
    cbcl-eval fsil-table --seeds 5           # FSIL table on every present data set
    cbcl-eval --dataset fashion-mnist fsil-table --shots 1 --ways 2   # the quickest docs/results.md rows (~1.5 min)
    cbcl-eval --dataset fashion-mnist curves --ways 2,5
    cbcl-eval --synthetic all --seeds 2 --fast --out /tmp/x --docs /tmp/x/results.md
    cbcl-eval all                            # every table and figure, then their results document
    cbcl-eval all --reuse --out runs/bench --docs docs/results.md     # refresh docs/results.md from the stored runs
    cbcl-eval report                         # a results document from the runs in runs/bench (runs nothing)

Results go to ``<out>/eval_<command>_<dataset>/`` as JSON, CSV, Markdown and PNG; ``<out>`` is a new
folder ``runs/eval-<UTC time>`` unless ``--out`` names one, and the results document of ``all`` and
``report`` goes to ``<out>/results.md`` (``report``: a new ``runs/report-<UTC time>``) unless ``--docs``
names one, so a run never overwrites the committed bench/results or docs/results.md by default. Where
the output is not a terminal (piped, a log file), a line per finished run says how far it is.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from cbcl_pr_ros.cli.one_line_errors import OneLineErrorParser, did_you_mean
from cbcl_pr_ros.core.threads import fit_threads
from cbcl_pr_ros.evaluation import experiments as ex
from cbcl_pr_ros.evaluation.datasets import KNOWN_DATASETS, discover, load_dataset
from cbcl_pr_ros.evaluation.featureset import FeatureSet, extract_feature_set, synthetic_feature_set
from cbcl_pr_ros.evaluation.methods import METHODS, MethodContext
from cbcl_pr_ros.evaluation.report import write_experiment
from cbcl_pr_ros.evaluation.results_doc import write_results_doc
from cbcl_pr_ros.features.backbones import available_backbones, make_backbone

__all__ = ["main", "build_parser"]

_LOG = logging.getLogger("cbcl-eval")
COMMANDS = ("fsil-table", "sota", "ablation", "memory-budget", "curves", "prediction-time", "d-sweep")
PIPELINE = ex.PIPELINE


def _ints(s: str) -> list[int]:
    try:
        return [int(v) for v in s.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None


def _floats(s: str) -> list[float]:
    try:
        return [float(v) for v in s.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {s!r}") from None


def _methods(s: str) -> list[str]:
    names = [v.strip() for v in s.split(",") if v.strip()]
    bad = [n for n in names if n not in METHODS]
    if bad:
        which = ", ".join(f"{n!r}{did_you_mean(n, METHODS)}" for n in bad)
        raise argparse.ArgumentTypeError(f"unknown method {which}; known: {', '.join(METHODS)}")
    if not names:
        raise argparse.ArgumentTypeError(f"no method named; known: {', '.join(METHODS)}")
    return names


def _csv(values) -> str:
    return ",".join(str(v) for v in values)


# the default of the all-data commands' --ways (experiments.ablation and its kin)
_TENTH = ("classes per increment (default: a tenth of the classes with 20 or more, e.g. 10 of 100 as in the paper, "
          "else a fifth)")


def _add_globals(p: argparse.ArgumentParser, suppress: bool = False) -> None:
    """The options of every command; on a sub-command (suppress=True) they default to "not given", so
    ``cbcl-eval fsil-table --seeds 5`` and ``cbcl-eval --seeds 5 fsil-table`` mean the same."""
    def add(*a, **k):
        return p.add_argument(*a, **({**k, "default": argparse.SUPPRESS} if suppress else k))

    add("--data-root", default="data", help="where data sets are looked for (default: data)")
    add("--dataset", action="append", default=[], metavar="NAME[=PATH]",
                   help="restrict to this data set (repeatable); NAME=PATH adds any image folder")
    add("--synthetic", action="store_true", help="use synthetic Gaussian features (no images needed)")
    add("--backbone", default="efficientnet_lite0", choices=available_backbones(), metavar="NAME",
        help="efficientnet_lite0 (default), efficientnet_lite1/2 (stronger, slower; weights in packages), "
             "resnet18/34 (with --weights)")
    add("--runtime", default="onnx", choices=("onnx", "torch"), help="backbone runtime (default onnx)")
    add("--weights", default=None, help="weights file for resnet18/34")
    add("--threads", type=int, default=2, help="backbone threads for feature extraction (default 2)")
    add("--compute-threads", type=int, default=1,
                   help="BLAS/torch threads for the methods (1 is fastest on a busy machine; see core.threads)")
    add("--train-per-class", type=int, default=300,
                   help="fixed seeded subsample of training images per class (default 300; 0 = all)")
    add("--test-per-class", type=int, default=200, help="fixed seeded test subset per class (default 200; 0 = all)")
    add("--seeds", type=int, default=10, help="number of seeds (class orders), default 10")
    add("--seed-start", type=int, default=0, help="first seed (default 0); seeds are consecutive")
    add("--out", default=None, help="output root (default: a new folder runs/eval-<UTC time>; 'report' "
                                    "reads runs/bench)")
    add("--cache-dir", default="cache/eval", help="feature cache (default cache/eval)")
    add("--docs", default=None, help="results document written by 'all' and 'report' (default: "
                                     "<out>/results.md; 'report': runs/report-<UTC time>/results.md)")
    add("--fast", action="store_true", help="3 SGD epochs instead of 25 (smoke runs only)")
    add("--methods", type=_methods, default=None,
        help=f"comma-separated subset of the command's methods (default: the command's own list); "
             f"names: {', '.join(METHODS)}")
    add("--reuse", action="store_true",
                   help="reuse a stored result (same command, data set, seeds, --fast and --methods) instead of rerunning")
    add("--refresh", type=_methods, default=None, metavar="METHODS",
                   help="with --reuse: rerun these methods of a stored result (their stored runs are dropped), "
                        "e.g. after a fix that changes only them")
    add("--note", action="append", default=[], metavar="TEXT",
                   help="say why a run departs from the defaults (e.g. fewer seeds on a busy machine); "
                        "stored in the run's params and notes, repeatable")
    add("-v", "--verbose", action="store_true", help="log the learner's steps")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(prog="cbcl-eval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_globals(p)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("datasets", help="list present and missing data sets")
    s = sub.add_parser("fsil-table", help="few-shot incremental table (no base session)")
    s.add_argument("--shots", type=_ints, default=list(ex.FSIL_SHOTS),
                   help=f"shots per class, comma-separated (default {_csv(ex.FSIL_SHOTS)})")
    s.add_argument("--ways", type=_ints, default=[2, 5, 10, 20],
                   help="classes per increment, comma-separated (default 2,5,10,20; fewer than two increments: skipped)")
    s = sub.add_parser("sota", help="base session + n-way k-shot sessions (TOPIC/CEC)")
    s.add_argument("--base", type=int, default=None,
                   help="classes of the base session, taught with all their data (default 60 %% of the classes, 60 of "
                        "100 as in TOPIC/CEC)")
    s.add_argument("--ways", type=int, default=None,
                   help="classes per session after the base (default 5 %% of the classes, at least 1)")
    s.add_argument("--shots", type=int, default=None, help="shots per class after the base (default 5)")
    s.add_argument("--session-dir", default=None, help="folder of session_<i>.txt index files")
    s = sub.add_parser("ablation", help="clustering and pseudo-rehearsal ablation (all data)")
    s.add_argument("--ways", type=int, default=None, help=_TENTH)
    s.add_argument("--K", type=int, default=None, help="memory budget in clusters (default unlimited)")
    s = sub.add_parser("memory-budget", help="accuracy vs budget K, reduction vs removal")
    s.add_argument("--ways", type=int, default=None, help=_TENTH)
    s.add_argument("--budgets", type=_ints, default=None,
                   help="budgets K in clusters, comma-separated (default 10, 25, 50, 100 %% of the unlimited "
                        "run's clusters, at least one per class)")
    s = sub.add_parser("curves", help="accuracy after each increment (all data)")
    s.add_argument("--ways", type=_ints, default=[2, 5, 10, 20],
                   help="classes per increment, comma-separated (default 2,5,10,20)")
    s = sub.add_parser("prediction-time", help="prediction time vs stored clusters")
    s.add_argument("--ways", type=int, default=None, help=_TENTH)
    s = sub.add_parser("d-sweep", help="accuracy and clusters vs Agg-Var's D")
    s.add_argument("--scales", type=_floats, default=[0.5, 0.75, 1.0, 1.25, 1.5, 3.0],
                   help="D = scale x the learner's own D, comma-separated (default 0.5,0.75,1,1.25,1.5,3)")
    s.add_argument("--shots", type=int, default=10, help="shots per class (default 10)")
    s.add_argument("--ways", type=int, default=2, help="classes per increment (default 2)")
    sub.add_parser("all", help="every table and figure on every present data set, then the results document")
    sub.add_parser("report", help="rebuild the results document from the runs stored under --out (runs nothing)")
    for sp in sub.choices.values():
        _add_globals(sp, suppress=True)
    return p


def _feature_sets(args) -> list[FeatureSet]:
    if args.synthetic:
        return [synthetic_feature_set(n_classes=10, dim=32, train_per_class=60, test_per_class=30, seed=0)]
    overrides = {}
    wanted = []
    for item in args.dataset:
        name, _, path = item.partition("=")
        wanted.append(name)
        if path:
            overrides[name] = path
    unknown = [n for n in wanted if n not in KNOWN_DATASETS and n not in overrides]
    if unknown:
        name = unknown[0]
        _fail(f"unknown data set {name!r}{did_you_mean(name, KNOWN_DATASETS)}; known: "
              f"{', '.join(KNOWN_DATASETS)}, or NAME=PATH for an image folder of your own")
        return []
    try:
        present, missing = discover(args.data_root, overrides)
    except FileNotFoundError as exc:  # NAME=PATH to nothing
        _fail(str(exc))
        return []
    names = [n for n in present if not wanted or n in wanted]
    for name, how in missing.items():
        if wanted and name in wanted:
            if names:
                print(f"[missing] {name}: {how}")
            else:
                _fail(f"data set {name} is not under {args.data_root}/; get it with: {how}")
        elif not wanted:
            print(f"[missing] {name}: {how}")
    if not names:
        if not wanted:
            print(f"no data set present under {args.data_root}/; nothing to run (see 'cbcl-eval datasets')")
        return []
    try:
        bb = make_backbone(args.backbone, runtime=args.runtime, weights_path=args.weights,
                           threads=args.threads, cache_dir=str(Path(args.cache_dir).parent / "onnx"))
    except (FileNotFoundError, ValueError) as exc:  # the paper's ResNets need a weights file named by --weights
        _fail(str(exc))
        return []
    out = []
    for n in names:
        try:
            ds = load_dataset(n, present[n])
        except Exception as exc:  # one broken data set must not stop the others
            print(f"[error] {n} at {present[n]}: {exc}")
            continue
        print(f"[present] {ds.summary()} ({present[n]})")
        out.append(extract_feature_set(ds, bb, args.cache_dir, args.train_per_class or None,
                                       args.test_per_class or None))
    return out


def _fail(message: str) -> None:
    """One line on stderr for a run that cannot start (the caller returns exit status 1)."""
    print(f"cbcl-eval: error: {message}", file=sys.stderr)


DEFAULT_METHODS = {"fsil-table": ex.FSIL_METHODS, "sota": ex.SOTA_METHODS, "ablation": ex.ABLATION_METHODS,
                   "memory-budget": ex.BUDGET_METHODS,
                   "curves": ex.CURVE_METHODS, "prediction-time": ("cbcl", "cbcl-pr", "cbcl-pr-default")}



def planned_runs(cmd: str, n_classes: int, args, methods: list[str] | None = None) -> int:
    """Runs (method x seed x setting) a command will make, for the progress bar's total. memory-budget
    without --budgets: an upper bound (its K values are found during the run; the bar is set exact then)."""
    g = lambda name, default=None: getattr(args, name, default)  # noqa: E731
    seeds = args.seeds
    if cmd == "d-sweep":
        default = ["cbcl-pr-default", "cbcl-pr", "cbcl"]
        sweep = [m for m in default if not args.methods or m in args.methods] or default
        return len(g("scales", [0.5, 0.75, 1.0, 1.25, 1.5, 3.0])) * seeds * len(sweep)
    n_methods = len(methods or args.methods or DEFAULT_METHODS[cmd])
    if cmd == "fsil-table":
        ways = ex.valid_ways(n_classes, g("ways", [2, 5, 10, 20]))[0]
        return len(g("shots", list(ex.FSIL_SHOTS))) * len(ways) * seeds * n_methods
    if cmd == "curves":
        ways = g("ways", [2, 5, 10, 20])
        return len(ex.valid_ways(n_classes, ways if isinstance(ways, list) else [2, 5, 10, 20])[0]) * seeds * n_methods
    if cmd == "sota":
        return (1 if g("session_dir") else seeds) * n_methods
    if cmd == "prediction-time":
        return min(3, seeds) * n_methods
    if cmd == "memory-budget":
        budgets = g("budgets")
        return seeds * n_methods * (1 + 2 * (len(budgets) if budgets else 4))
    return seeds * n_methods  # ablation


def _run_command(cmd: str, fs: FeatureSet, args, progress, methods: list[str] | None = None) -> ex.Experiment:
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    task = progress.add_task(f"{cmd} on {fs.name}", total=planned_runs(cmd, len(fs.classes), args, methods))

    def tick(n: int) -> None:
        progress.advance(task, n)

    kw = {"tick": tick}
    fast = args.fast
    g = lambda name, default=None: getattr(args, name, default)  # noqa: E731
    if (methods or args.methods) and cmd != "d-sweep":
        kw["methods"] = methods or args.methods
    if cmd == "fsil-table":
        exp = ex.fsil_table(fs, seeds, g("shots", list(ex.FSIL_SHOTS)), g("ways", [2, 5, 10, 20]),
                            ctx=MethodContext(few_shot=True, fast=fast), **kw)
    elif cmd == "sota":
        exp = ex.sota(fs, seeds, g("base"), g("ways"), g("shots"), g("session_dir"),
                      ctx=MethodContext(few_shot=True, fast=fast), **kw)
    elif cmd == "ablation":
        exp = ex.ablation(fs, seeds, g("ways"), g("K"), ctx=MethodContext(few_shot=False, max_clusters=g("K"), fast=fast),
                          **kw)
    elif cmd == "memory-budget":
        exp = ex.memory_budget(fs, seeds, g("ways"), budgets=g("budgets"), ctx=MethodContext(few_shot=False, fast=fast),
                               **kw)
    elif cmd == "curves":
        ways = g("ways", [2, 5, 10, 20])
        exp = ex.curves(fs, seeds, ways if isinstance(ways, list) else [2, 5, 10, 20],
                        ctx=MethodContext(few_shot=False, fast=fast), **kw)
    elif cmd == "prediction-time":
        ways = g("ways")
        exp = ex.prediction_time(fs, seeds[:3], ways if isinstance(ways, int) else None,
                                 ctx=MethodContext(few_shot=False, fast=fast), **kw)
    elif cmd == "d-sweep":
        default = ["cbcl-pr-default", "cbcl-pr", "cbcl"]
        sweep = [m for m in default if not args.methods or m in args.methods] or default
        exp = ex.d_sweep(fs, seeds, g("scales", [0.5, 0.75, 1.0, 1.25, 1.5, 3.0]), g("shots", 10) or 10,
                         g("ways", 2) if isinstance(g("ways", 2), int) else 2, methods=sweep, tick=tick)
    else:  # pragma: no cover - argparse restricts the choices
        raise ValueError(cmd)
    if fast:
        exp.notes.append("--fast: 3 SGD epochs (smoke run, not the paper's schedule)")
    exp.params["pipeline"] = PIPELINE
    if args.note:
        exp.params["note"] = list(args.note)
        exp.notes += [n for n in args.note if n not in exp.notes]
    progress.update(task, description=f"{cmd} on {fs.name}: done", total=len(exp.runs), completed=len(exp.runs))
    return exp


def _subsample_note(exp: ex.Experiment, fs: FeatureSet) -> None:
    """Say how much of the data set the features cover (replacing a stored note)."""
    exp.notes = [n for n in exp.notes if not n.startswith("features of ")]
    full_tr, full_te = fs.meta.get("full_train"), fs.meta.get("full_test")
    if full_tr is None:
        return
    if full_tr > len(fs.train_y) or full_te > len(fs.test_y):
        exp.notes.append(f"features of a fixed seeded subsample: up to {fs.meta.get('train_per_class')} train and "
                         f"{fs.meta.get('test_per_class')} test images per class ({len(fs.train_y)} of {full_tr} "
                         f"train, {len(fs.test_y)} of {full_te} test images)")
    else:
        exp.notes.append(f"features of all images: {len(fs.train_y)} train, {len(fs.test_y)} test")


def _run_key(cmd: str, fs: FeatureSet, args) -> str:
    return json.dumps(_key_dict(cmd, fs, args), sort_keys=True, default=str)


def _key_dict(cmd: str, fs: FeatureSet, args) -> dict:
    """What must match for a stored result to be reused (the subcommand's own options are in it)."""
    own = {k: v for k, v in sorted(vars(args).items()) if k not in _GLOBAL_KEYS}
    return {"cmd": cmd, "dataset": fs.name, "dim": fs.dim, "n_train": len(fs.train_y),
            "seeds": [args.seed_start, args.seeds], "fast": args.fast, "methods": args.methods,
            "own": own if args.command != "all" else {}}


_GLOBAL_KEYS = {"data_root", "dataset", "synthetic", "backbone", "runtime", "weights", "threads", "compute_threads", "note",
                "refresh",
                "train_per_class",
                "test_per_class", "seeds", "seed_start", "out", "cache_dir", "docs", "fast", "methods", "reuse",
                "verbose", "command"}


def _stored(path: Path, cmd: str, fs: FeatureSet, args) -> ex.Experiment | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    try:
        stored = json.loads(data.get("params", {}).get("run_key", "null")) or {}
    except ValueError:
        return None
    current = json.loads(_run_key(cmd, fs, args))
    stored.pop("methods", None)
    current.pop("methods", None)
    if stored != current:  # methods may differ: missing ones are run and merged by the caller
        return None
    return ex.Experiment.from_dict(data)


def _complete(exp: ex.Experiment, cmd: str, fs: FeatureSet, args, progress) -> ex.Experiment:
    """Run the methods a reused experiment lacks, merge them, and keep only the wanted ones."""
    if cmd not in DEFAULT_METHODS:
        return exp
    wanted = list(args.methods or DEFAULT_METHODS[cmd])
    refresh = [m for m in (args.refresh or []) if m in wanted]
    have = [m for m in exp.params.get("methods", []) if m not in refresh]
    exp.runs = [r for r in exp.runs if r.method not in refresh]
    missing = [m for m in wanted if m not in have]
    if missing:
        extra = _run_command(cmd, fs, args, progress, methods=missing)
        exp.runs += extra.runs
        how = "rerun in" if set(missing) <= set(refresh) else "added to"
        exp.notes.append(f"methods {missing} {how} a stored run with pipeline {PIPELINE} (load then: "
                         f"{', '.join(f'{v:.1f}' for v in extra.machine.get('loadavg', []))})")
        exp.params.setdefault("configs", {}).update(extra.params.get("configs", {}))
        exp.params["pipeline_by_method"] = {**{m: exp.params.get("pipeline", "earlier") for m in have},
                                            **exp.params.get("pipeline_by_method", {}),
                                            **{m: PIPELINE for m in missing}}
    exp.runs = [r for r in exp.runs if r.method in wanted]
    exp.params["methods"] = wanted
    configs = exp.params.setdefault("configs", {})
    ctx = MethodContext(few_shot=cmd in ("fsil-table", "sota", "d-sweep"), fast=args.fast)
    for m, text in ex.method_configs(wanted, ctx).items():
        configs.setdefault(m, text)
    if args.note:
        exp.params["note"] = list(dict.fromkeys([*exp.params.get("note", []), *args.note]))
        exp.notes += [n for n in args.note if n not in exp.notes]
    stored = exp.params.get("pipeline")
    affected = ex.PIPELINE_AFFECTED.get(stored)
    if stored != PIPELINE and affected is not None and not (affected & set(have) & set(wanted)):
        # every run the version change touched was rerun: the experiment is the current pipeline's
        exp.notes.append(f"runs of {sorted(set(have) & set(wanted))} kept from pipeline {stored}, which "
                         f"differs from {PIPELINE} only for {sorted(affected)} (rerun)")
        exp.params["pipeline"] = PIPELINE
    return exp


def _report(args) -> int:
    """docs/results.md from every stored experiment under ``--out`` (data sets restricted by --dataset)."""
    wanted = {item.partition("=")[0] for item in args.dataset}
    found: list[tuple[ex.Experiment, Path]] = []
    for out_dir in sorted(Path(args.out).glob("eval_*")):
        for cmd in COMMANDS:
            path = out_dir / f"{cmd}.json"
            if not path.is_file():
                continue
            exp = ex.Experiment.from_dict(json.loads(path.read_text()))
            if wanted and exp.dataset not in wanted:
                continue
            version = exp.params.get("pipeline")
            if version != PIPELINE:
                exp.notes.append(ex.PIPELINE_NOTES.get(version, ex.EARLIER_PIPELINE_NOTE))
            found.append((exp, out_dir))
    if not found:
        print(f"no stored experiments under {args.out}")
        return 1
    found.sort(key=lambda e: (e[0].dataset, COMMANDS.index(e[0].name)))
    print(f"wrote {write_results_doc(found, args.docs)}")
    return 0


def default_paths(args: argparse.Namespace, now: float | None = None) -> None:
    """Fill ``--out`` and ``--docs`` left out: a new run folder under runs/, never the committed results."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    if args.command == "report":
        args.out = args.out or "runs/bench"
        args.docs = args.docs or str(Path("runs") / f"report-{stamp}" / "results.md")
        return
    args.out = args.out or str(Path("runs") / f"eval-{stamp}")
    args.docs = args.docs or str(Path(args.out) / "results.md")


class LineProgress:
    """Rich's bar draws nothing where the output is not a terminal (piped, a log file): this forwards to
    it and prints a line per finished run with the total, so a long run shows that it goes on."""

    def __init__(self, progress: Any, stream: Any = None) -> None:
        self._p, self._stream = progress, stream or sys.stdout
        self._tasks: dict[Any, list] = {}
        self._t0 = time.monotonic()

    @property
    def console(self) -> Any:
        return self._p.console

    def add_task(self, description: str, total: float | None = None, **kw: Any) -> Any:
        task = self._p.add_task(description, total=total, **kw)
        self._tasks[task] = [description, total, 0]
        return task

    def update(self, task: Any, **kw: Any) -> None:
        self._p.update(task, **kw)
        if task in self._tasks and kw.get("total") is not None:
            self._tasks[task][1] = kw["total"]

    def advance(self, task: Any, n: float = 1) -> None:
        self._p.advance(task, n)
        entry = self._tasks.setdefault(task, ["runs", None, 0])
        entry[2] += n
        total = "?" if entry[1] is None else f"{int(entry[1])}"
        print(f"{entry[0]}: {int(entry[2])}/{total} runs ({time.monotonic() - self._t0:.0f} s)",
              file=self._stream, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    default_paths(args)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "datasets":
        present, missing = discover(args.data_root)
        for n, p in present.items():
            print(f"[present] {n}: {p}")
        for n, how in missing.items():
            print(f"[missing] {n}: {how}")
        return 0
    if args.command == "report":
        return _report(args)
    if args.seeds < 1:
        _fail(f"--seeds must be >= 1, got {args.seeds}")
        return 2
    if args.threads < 1 or args.compute_threads < 1:
        _fail(f"--threads and --compute-threads must be >= 1, got {args.threads} and {args.compute_threads}")
        return 2
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    sets = _feature_sets(args)
    if not sets:
        return 1
    cmds = COMMANDS if args.command == "all" else (args.command,)
    written = []
    t0 = time.time()
    with fit_threads(args.compute_threads), Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("runs"),
            TimeElapsedColumn()) as bar:
        progress = bar if sys.stdout.isatty() else LineProgress(bar)
        for fs in sets:
            for cmd in cmds:
                out_dir = Path(args.out) / f"eval_{cmd}_{fs.name.replace(':', '_')}"
                exp = _stored(out_dir / f"{cmd}.json", cmd, fs, args) if args.reuse else None
                if exp is None:
                    exp = _run_command(cmd, fs, args, progress)
                    exp.params["run_key"] = _run_key(cmd, fs, args)
                else:
                    progress.console.print(f"[yellow]reused[/yellow] {out_dir / (cmd + '.json')}")
                    exp = _complete(exp, cmd, fs, args, progress)
                    exp.params["run_key"] = _run_key(cmd, fs, args)
                _subsample_note(exp, fs)
                paths = write_experiment(exp, out_dir)
                written.append((exp, out_dir))
                progress.console.print(f"[green]wrote[/green] {paths['md']}")
    for exp, out_dir in written:  # the result tables, then where every file is
        table = out_dir / f"{exp.name}.md" if hasattr(exp, "name") else None
        md = table if table is not None and table.is_file() else next(iter(sorted(out_dir.glob("*.md"))), None)
        if md is not None:
            print(md.read_text().rstrip() + "\n")
    print("files:")
    for _exp, out_dir in written:
        print(f"  {out_dir}/  ({', '.join(sorted(p.name for p in out_dir.iterdir()))})")
    if args.command == "all":
        doc = write_results_doc(written, args.docs, wall_seconds=time.time() - t0)
        print(f"wrote {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
