"""``cbcl-memory``: inspect, compare, merge and split learner memory files, without ROS.

    cbcl-memory info memory.safetensors            # classes, clusters, shots, bytes, who taught them
    cbcl-memory merge robot1.safetensors robot2.safetensors -o fleet.safetensors
    cbcl-memory diff robot1.safetensors robot2.safetensors     # a summary, the classes that differ (--all: all)
    cbcl-memory export-class memory.safetensors mug -o mug.safetensors
    cbcl-memory repair memory.safetensors.unreadable-1700000000 -o memory.safetensors

Every file read is verified completely (checksum, shapes, ranges; :mod:`cbcl_pr_ros.core.persistence`)
and refused with the reason when it is not sound.  ``merge`` follows :mod:`cbcl_pr_ros.core.merge`:
same backbone, feature transform and width, classes held on both sides pooled, the budget K applied
once, the head refitted once; it never overwrites a file unless ``--force``.  An exported class is a
memory file holding that class alone (what a fleet update carries), so ``merge`` takes it in too.
Whatever is written is first read back with the same checks (a file the learner would refuse is
never written).  ``repair`` makes a file that load refuses by a range (a file the learner moved aside
at start) loadable: it clamps those fields, prints each change, and never touches the classes'
statistics.  Text taken from a file (names, backbone, messages) is printed with control characters
escaped, so a crafted file cannot drive the terminal.
Exit status: 0 done, 1 refused (the reason is printed), 2 usage error.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from cbcl_pr_ros.core import CBCLPRLearner
from cbcl_pr_ros.core.merge import MergeError, check_compatible, merge_states, one_class_state
from cbcl_pr_ros.core.persistence import (
    MemoryFileError,
    checked_bytes,
    filled_provenance,
    repaired_bytes,
    state_from_bytes,
    write_atomic,
)
from cbcl_pr_ros.core.provenance import ids
from cbcl_pr_ros.lookalike import nearest
from cbcl_pr_ros.plurals import counted, noun

__all__ = ["main", "build_parser"]

_MAX_BYTES = 256 * 1024 * 1024  # the learner node's default max_memory_file_bytes
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe(text: object) -> str:
    """``text`` with control characters (terminal escapes, bidirectional overrides) written as \\xNN."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def _say(con: Console, text: str) -> None:
    con.print(safe(text), highlight=False, markup=False, soft_wrap=True)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cbcl-memory", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:2]))
    ap.add_argument("--max-bytes", type=int, default=_MAX_BYTES, help="largest memory file read (default 256 MiB)")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="what a memory file holds, class by class")
    p.add_argument("file")
    p = sub.add_parser("merge", help="merge two memory files into a third")
    p.add_argument("a", help="the receiving memory (its configuration, D and class order are kept)")
    p.add_argument("b", help="the memory (or exported class) merged in")
    p.add_argument("-o", "--output", required=True, help="the merged memory file to write")
    p.add_argument("--force", action="store_true", help="overwrite the output file if it exists")
    p = sub.add_parser("diff", help="classes only in one file, and how shared classes differ",
                       description="A summary line (classes only in a, only in b, changed, the same), then a "
                                   "table of the classes that differ; --all lists the same ones too.")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--all", action="store_true", help="list every class, the same ones too")
    p = sub.add_parser("export-class", help="write one class as a memory file of its own")
    p.add_argument("file")
    p.add_argument("name", help="the class to export")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--force", action="store_true", help="overwrite the output file if it exists")
    p = sub.add_parser("repair", help="write a copy that load accepts of a file it refuses by a range")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True, help="the repaired memory file to write")
    p.add_argument("--force", action="store_true", help="overwrite the output file if it exists")
    return ap


class Refused(Exception):
    """A file or an operation is refused; the message is printed and the exit status is 1."""


def _bytes(path: str, max_bytes: int) -> bytes:
    p = Path(path)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise Refused(f"{path}: not a regular file")
        if size > max_bytes:
            raise Refused(f"{path}: {size} bytes, more than --max-bytes {max_bytes}")
        return p.read_bytes()
    except OSError as exc:
        raise Refused(f"{path}: cannot read ({exc.strerror or exc})") from None


def _read(path: str, max_bytes: int):
    try:
        return state_from_bytes(_bytes(path, max_bytes), path)
    except MemoryFileError as exc:
        raise Refused(str(exc)) from None


def _checked(state, path: str) -> bytes:
    """The bytes of ``state`` once read back as load reads them; Refused otherwise (nothing written)."""
    try:
        return checked_bytes(state, path)
    except MemoryFileError as exc:
        raise Refused(f"not written, since loading it would be refused: {exc}") from None


def _write(path: str, blob: bytes, force: bool) -> None:
    if os.path.lexists(path) and not force:
        raise Refused(f"{path} exists; give --force to overwrite it")
    try:
        write_atomic(path, blob)
    except OSError as exc:
        raise Refused(f"{path}: cannot write ({exc.strerror or exc})") from None


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M") if t > 0 else "?"


def class_table(state, title: str) -> Table:
    """One row per class: clusters, shots, storage, bytes, robots and the last teach."""
    prov = filled_provenance(state)
    table = Table(title=safe(title))
    for col in ("class", "clusters", "shots", "storage", "bytes", "taught by", "last taught (UTC)"):
        table.add_column(col, justify="right" if col in ("clusters", "shots", "bytes") else "left")
    for name, cc in state.memory.items():
        robots = sorted({c.robot or "?" for c in prov[name]})
        table.add_row(Text(safe(name)), str(cc.n_clusters), str(cc.n_samples), cc.storage, str(cc.nbytes()),
                      Text(safe(", ".join(robots))), _when(max(c.time for c in prov[name])))
    return table


def _header(state, path: str) -> str:
    k = state.config.get("max_clusters")
    return (f"{path}: backbone {state.backbone}, width {state.feature_dim}, transform "
            f"{state.config.get('transform', 'none')}, covariance {state.memory.covariance}, "
            f"{counted(len(state.memory), 'class')}, {counted(state.memory.n_clusters, 'cluster')} (K {k if k else 'unlimited'}), "
            f"D {state.distance_threshold if state.distance_threshold is None else f'{state.distance_threshold:.4g}'}, "
            f"model v{state.model_version}, views' spread of {(state.view_spread.images if state.view_spread else 0)} images")


def cmd_info(opts, con: Console) -> None:
    """What the file holds; a file load refuses by a range (one moved aside at start) is shown as
    ``repair`` would write it, after the reason and the fields repair would change (exit status 1)."""
    try:
        state, refused = _read(opts.file, opts.max_bytes), None
    except Refused as exc:
        try:
            blob, notes = repaired_bytes(_bytes(opts.file, opts.max_bytes), opts.file)
        except (MemoryFileError, Refused):
            raise exc from None
        state, refused = state_from_bytes(blob, opts.file), exc
        _say(con, f"load refuses this file; 'cbcl-memory repair {opts.file} -o <file>' would change:")
        for note in notes:
            _say(con, f"  {note}")
    _say(con, _header(state, opts.file))
    con.print(class_table(state, counted(len(state.memory), "class")))
    if refused is not None:
        raise refused


def cmd_merge(opts, con: Console) -> None:
    if os.path.lexists(opts.output) and not opts.force:
        raise Refused(f"{opts.output} exists; give --force to overwrite it")
    with Progress(console=con, transient=True) as progress:
        task = progress.add_task("reading", total=4)
        a = _read(opts.a, opts.max_bytes)
        b = _read(opts.b, opts.max_bytes)
        progress.update(task, advance=1, description="merging statistics")
        try:
            merged, report = merge_states(a, b)
            progress.update(task, advance=1, description="refitting the head")
            learner = CBCLPRLearner.from_state(merged, model_version=merged.model_version + 1)
        except (MergeError, ValueError) as exc:
            raise Refused(f"merge refused: {exc}") from None
        progress.update(task, advance=1, description="writing")
        blob = _checked(learner.to_state(), opts.output)
        if len(blob) > opts.max_bytes:
            raise Refused(f"the merged memory would be {len(blob)} bytes, more than --max-bytes {opts.max_bytes}")
        _write(opts.output, blob, opts.force)
        progress.update(task, advance=1)
    _say(con, f"merged {opts.b} into {opts.a} -> {opts.output}: {report.summary()} ({len(blob)} bytes)")
    con.print(class_table(learner.to_state(), f"{counted(len(learner.classes_), 'class')} in {opts.output}"))


def cmd_diff(opts, con: Console) -> None:
    a, b = _read(opts.a, opts.max_bytes), _read(opts.b, opts.max_bytes)
    try:
        check_compatible(a, b)
        _say(con, "compatible: a merge is possible")
    except (MergeError, ValueError) as exc:  # ValueError: a configuration no learner accepts
        _say(con, f"not mergeable: {exc}")
    pa, pb = filled_provenance(a), filled_provenance(b)
    rows, counts = [], {"a only": 0, "b only": 0, "changed": 0, "same": 0}
    for name in list(a.memory.classes) + [c for c in b.memory.classes if c not in a.memory]:
        in_a, in_b = name in a.memory, name in b.memory
        where, teaching, kind = "both", "", "a only" if in_a else "b only"
        if in_a and in_b:
            ia, ib = ids(pa[name]), ids(pb[name])
            teaching = ("same" if ia == ib else "b holds all of a's" if ia < ib else "a holds all of b's" if ib < ia
                        else "separate (would pool)" if not ia & ib else "partly shared (merge refused)")
            kind = "same" if ia == ib and a.memory[name].n_samples == b.memory[name].n_samples else "changed"
        else:
            where = kind
        counts[kind] += 1
        if kind != "same" or opts.all:
            rows.append((Text(safe(name)), where, str(a.memory[name].n_samples) if in_a else "",
                         str(b.memory[name].n_samples) if in_b else "", teaching))
    _say(con, _diff_summary(counts, opts.all))
    if rows:
        table = Table(title=safe(f"{opts.a} vs {opts.b}"))
        for col in ("class", "in", "shots a", "shots b", "teaching"):
            table.add_column(col)
        for row in rows:
            table.add_row(*row)
        con.print(table)


def _diff_summary(counts: dict[str, int], listed_all: bool) -> str:
    """One line of ``diff``: how many classes are only in a, only in b, changed and the same, and
    which of them the table lists (at a thousand classes, nearly all are the same)."""
    total = sum(counts.values())
    line = (f"{counted(total, 'class')}: {counts['a only']} only in a, {counts['b only']} only in b, "
            f"{counts['changed']} changed, {counts['same']} the same")
    if listed_all or not counts["same"]:
        return line
    if counts["same"] == total:
        return f"{line}; nothing differs (--all lists them)"
    n = total - counts["same"]
    return f"{line}; the table lists the {n} that {noun(n, 'differs', 'differ')} (--all: every class)"


_NAMED = 10  # classes a refusal names: a household's memory of a thousand made a typo a 13 kB line


def _other_names(name: str, classes: tuple[str, ...], path: str) -> str:
    """The classes a file holds, for a name it lacks: all of a few; of more, the count, the names
    nearest the one asked for and where the whole list is."""
    if len(classes) <= _NAMED:
        return f"classes: {', '.join(classes) or 'none'}"
    near = nearest(name, classes)
    hint = f"nearest: {', '.join(near)}; " if near else ""
    return f"{counted(len(classes), 'class')}; {hint}'cbcl-memory info {path}' lists them all"


def cmd_export(opts, con: Console) -> None:
    state = _read(opts.file, opts.max_bytes)
    if opts.name not in state.memory:
        raise Refused(f"no class {opts.name[:64]!r} in {opts.file} ({_other_names(opts.name, state.memory.classes, opts.file)})")
    blob = _checked(one_class_state(state, opts.name), opts.output)
    _write(opts.output, blob, opts.force)
    _say(con, f"exported class {opts.name!r} of {opts.file} to {opts.output} ({len(blob)} bytes: its statistics, "
              "no shot)")


def cmd_repair(opts, con: Console) -> None:
    if os.path.lexists(opts.output) and not opts.force:
        raise Refused(f"{opts.output} exists; give --force to overwrite it")
    try:
        blob, notes = repaired_bytes(_bytes(opts.file, opts.max_bytes), opts.file)
    except MemoryFileError as exc:
        raise Refused(f"not repaired: {exc}") from None
    for note in notes or ["nothing to repair: load accepts the file as it is"]:
        _say(con, f"{opts.file}: {note}")
    _write(opts.output, blob, opts.force)
    state = state_from_bytes(blob, opts.output)
    _say(con, f"wrote {opts.output} ({len(blob)} bytes, {len(notes)} fields changed): load accepts it")
    con.print(class_table(state, f"{counted(len(state.memory), 'class')} in {opts.output}"))


def main(argv: list[str] | None = None) -> int:
    opts = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    con = Console()
    run = {"info": cmd_info, "merge": cmd_merge, "diff": cmd_diff, "export-class": cmd_export,
           "repair": cmd_repair}[opts.command]
    try:
        run(opts, con)
    except Refused as exc:
        _say(Console(stderr=True), f"cbcl-memory: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
