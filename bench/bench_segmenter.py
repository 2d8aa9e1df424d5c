"""The learned proposal segmenter against the geometry on the real RGB-D frames, per source and
leave-one-source-out.

For every frame of bench/real_rgbd (``CBCL_REAL_RGBD`` or --frames: the assembled frames):

- ``geometry``: ``propose`` with its defaults (method "depth"), and its leave-one-source-out figures as
  bench_real computes them (the height test's noise multiples chosen on the other sources);
- ``learned``: ``perception.segmenter.propose_learned`` with the weights (--weights; by default the trained
  ones in runs/bench/segmenter/), in each variant of ``VARIANTS`` (with or without the support plane's
  refinement, with or without colour, the objects from the border-distance cores at thresholds 0.25-0.7, with or without
  new objects at lower peaks of the distance, or from the
  "inside" class at 0.5/0.7; or the geometry's proposals corrected by the network's,
  ``segmenter.combine``; with or without objects whose seam the depth does not show joined,
  ``segmenter.join_pieces`` at 2 or 3 noise sigmas, and small objects inside a larger one's box given to
  it, ``segmenter.fold_inner``; objects showing less surface than a square of 3-8 cm dropped, every
  one or only those beside a larger object, ``segmenter.drop_small``; the geometry as referee,
  ``segmenter.propose_hybrid``: pieces inside one geometry proposal joined at 3 noise sigmas or not,
  the smaller pieces inside one geometry proposal dropped, learned objects holding two or more geometry
  proposals parted; and a piece inside one geometry proposal that does not reach down to the support joined
  to the piece below it, ``segmenter.join_hanging``; on that rule, outline pixels at the support's level
  taken off the masks, ``segmenter.trim_outline``, a small object covering a share of one geometry proposal
  kept and a small piece inside a larger object's geometry proposal given to it, ``drop_small``'s
  ``confirm`` and ``absorb``, a geometry proposal holding one smaller learned object in its place,
  ``part_merged``'s ``whole``). Leave-one-source-out: the variant best on the other sources
  (F1 at IoU 0.5 less 0.05 per merge in 10 frames, as bench_real) is scored on the held-out one: among
  all variants; among those whose recall on the rendered tables (``bench_real.rendered_recall``,
  --rendered-seeds) is at least 0.98, what a default keeps; and among those no worse there than the rule
  shipped before (each path alone too: the network alone, refereed). The rules of ``propose_learned``
  and ``propose_hybrid`` are those best on all sources among the variants of their path that keep the
  rendered tables, or where none does, among those no worse there;
- recall and precision at IoU 0.5, merges, per source, pooled; CPU milliseconds per 640x480 frame on one
  core (best of 3, process CPU time with one BLAS/OpenCV thread) of the geometry, the chosen rule and,
  when it is refereed, the same rule without the referee, and ``propose_hybrid`` with its defaults (what the
  extractor runs), all in the same run; whether 20 runs of one frame agree.

Nothing here is chosen on the frame it is scored on. Writes runs/bench/segmenter.json. Run:
``source scripts/env.sh && python -P bench/bench_segmenter.py``.

``--timing OUT``: only the time of the default proposals, written to OUT (JSON). Each 640x480 real frame is
proposed in turn by ``propose_hybrid`` (its forward pass on onnxruntime, what the extractor runs), by the
same with the NumPy forward pass, and by the geometry alone (method "depth"), ``--repeats`` times, wall
time, this process pinned to one core with one thread everywhere (BLAS, OpenMP, OpenCV, onnxruntime):
quiet, with a busy loop pinned to another core, and with a busy loop on the same core. Median and p90 per
method, the ratios to the geometry (per frame, side by side: a shared machine's load moves both), and
the load average before and after each condition.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core: the time reported is what one core spends

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import REPO, out_path, vga_cpu_ms  # noqa: E402
from bench_real import _figures, _objective, leave_one_source_out, rendered_recall, rendered_views  # noqa: E402
from real_rgbd_set import ProposalScore, RealFrame, failure_kinds, load_frames, score_proposals  # noqa: E402

RENDERED_FLOOR = 0.98  # recall on the rendered tables a default keeps
SHIPPED_RULE = "classes_inside50_join2_inner"  # the learned path's rule before the variants below

VARIANTS = {"core40": {"plane": True, "colour": True, "core": 0.4},
            "core25": {"plane": True, "colour": True, "core": 0.25},
            "core55": {"plane": True, "colour": True, "core": 0.55},
            "core70": {"plane": True, "colour": True, "core": 0.7},
            "core40_peaks": {"plane": True, "colour": True, "core": 0.4, "peaks": True},
            "core55_peaks": {"plane": True, "colour": True, "core": 0.55, "peaks": True},
            "core70_peaks": {"plane": True, "colour": True, "core": 0.7, "peaks": True},
            "core40_depth_only": {"plane": True, "colour": False, "core": 0.4},
            "core40_no_plane": {"plane": False, "colour": True, "core": 0.4},
            "classes_inside50": {"plane": True, "colour": True, "core": None, "inside_p": 0.5},
            "classes_inside70": {"plane": True, "colour": True, "core": None, "inside_p": 0.7},
            "geometry_corrected_core25": {"plane": True, "colour": True, "combine": True, "core": 0.25},
            "geometry_corrected_core40": {"plane": True, "colour": True, "combine": True, "core": 0.4},
            "geometry_corrected_core55": {"plane": True, "colour": True, "combine": True, "core": 0.55},
            "geometry_corrected_core70": {"plane": True, "colour": True, "combine": True, "core": 0.7},
            "geometry_corrected_core40_peaks": {"plane": True, "colour": True, "combine": True, "core": 0.4, "peaks": True},
            "geometry_corrected_core55_peaks": {"plane": True, "colour": True, "combine": True, "core": 0.55, "peaks": True},
            "geometry_corrected_classes_inside50": {"plane": True, "colour": True, "combine": True, "core": None,
                                                    "inside_p": 0.5},
            # objects whose seam the depth does not show joined (segmenter.join_pieces, at 2 or 3 noise sigmas)
            "classes_inside50_join3": {"plane": True, "colour": True, "core": None, "inside_p": 0.5, "join": 3.0},
            "classes_inside50_join2": {"plane": True, "colour": True, "core": None, "inside_p": 0.5, "join": 2.0},
            "classes_inside70_join3": {"plane": True, "colour": True, "core": None, "inside_p": 0.7, "join": 3.0},
            "core40_join3": {"plane": True, "colour": True, "core": 0.4, "join": 3.0},
            "geometry_corrected_classes_inside50_join3": {"plane": True, "colour": True, "combine": True, "core": None,
                                                          "inside_p": 0.5, "join": 3.0},
            # and small objects inside another's box given to it (segmenter.fold_inner)
            "classes_inside50_inner": {"plane": True, "colour": True, "core": None, "inside_p": 0.5, "inner": True},
            "classes_inside50_join3_inner": {"plane": True, "colour": True, "core": None, "inside_p": 0.5, "join": 3.0,
                                             "inner": True},
            "classes_inside50_join2_inner": {"plane": True, "colour": True, "core": None, "inside_p": 0.5, "join": 2.0,
                                             "inner": True},
            "geometry_corrected_classes_inside50_join2_inner": {"plane": True, "colour": True, "combine": True, "core": None,
                                                                "inside_p": 0.5, "join": 2.0, "inner": True},
            "geometry_corrected_classes_inside50_join3_inner": {"plane": True, "colour": True, "combine": True, "core": None,
                                                                "inside_p": 0.5, "join": 3.0, "inner": True},
            # objects showing less surface than a square of min_face metres dropped (segmenter.drop_small; every
            # one, or only those beside a larger object: keep_lone)
            **{f"classes_inside50_join2_inner_face{round(face * 100) if face else 0}{'_beside' if lone and face else ''}":
               {"plane": True, "colour": True, "core": None, "inside_p": 0.5, "join": 2.0, "inner": True,
                "min_face": face, "keep_lone": lone}
               for face in (None, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08) for lone in ((False, True) if face else (False,))},
            # and the geometry as referee (segmenter.propose_hybrid): pieces inside one geometry proposal joined at
            # 3 noise sigmas (segmenter.join_within) or not, then the smaller learned objects inside one geometry
            # proposal dropped and a learned object holding two or more geometry proposals parted (part_merged)
            **{f"classes_inside50_join2_inner_refereed{f'_join{round(rj)}' if rj else ''}_face{round(face * 100) if face else 0}"
               f"{'_beside' if lone and face else ''}":
               {"plane": True, "colour": True, "core": None, "inside_p": 0.5, "join": 2.0, "inner": True,
                "min_face": face, "keep_lone": lone, "refereed": True, "referee_join": rj}
               for rj in (None, 3.0) for face in (None, 0.03, 0.04, 0.05, 0.06)
               for lone in ((False, True) if face else (False,))},
            # and a piece inside one geometry proposal that does not reach down to the support joined to the piece
            # below it (segmenter.join_hanging), on the refereed rule as it shipped (4 cm faces)
            **{f"classes_inside50_join2_inner_refereed{f'_join{round(rj)}' if rj else ''}_face4{'_beside' if lone else ''}"
               "_stand":
               {"plane": True, "colour": True, "core": None, "inside_p": 0.5, "join": 2.0, "inner": True,
                "min_face": 0.04, "keep_lone": lone, "refereed": True, "referee_join": rj, "stand": True}
               for rj in (None, 3.0) for lone in (False, True)},
            # and on that rule (3 sigmas, 4 cm faces, standing): outline pixels at the support's level taken off
            # the masks (segmenter.trim_outline; boxes stay, so the figures here do not move), a small object
            # covering a share of one geometry proposal kept (segmenter.drop_small's confirm), a geometry proposal
            # holding one learned object smaller than a share of it in its place (part_merged's whole), a small
            # object inside a larger one's geometry proposal given to it instead of dropped (drop_small's absorb)
            **{f"classes_inside50_join2_inner_refereed_join3_face4_stand_trim{f'_confirm{round(c * 100)}' if c else ''}"
               f"{f'_whole{round(wh * 100)}' if wh else ''}{'_absorb' if ab else ''}":
               {"plane": True, "colour": True, "core": None, "inside_p": 0.5, "join": 2.0, "inner": True,
                "min_face": 0.04, "keep_lone": False, "refereed": True, "referee_join": 3.0, "stand": True,
                "confirm": c, "trim": True, "whole": wh, "absorb": ab}
               for c in (None, 0.3, 0.5, 0.7) for wh in (None, 0.5, 0.75) for ab in (False, True)}}


def _Frame(fid: str, rgb, depth, K) -> RealFrame:
    """A rendered frame as the proposers here read one (no labels)."""
    return RealFrame(fid, "rendered", "", [], rgb, depth, K, [], [])


def _score(frames, run) -> tuple[dict, dict, dict]:
    """Per source ProposalScore, per-frame figures and failure kinds of the proposals ``run(frame)`` gives."""
    per_source, per_frame = defaultdict(ProposalScore), {}
    kinds: dict = defaultdict(lambda: (defaultdict(int), defaultdict(int)))
    for fr in frames:
        props = run(fr) or []
        boxes, objects = [p.box for p in props], [b for _, b in fr.objects]
        s = score_proposals(boxes, objects, fr.ignore)
        per_source[fr.source].add(s)
        per_frame[fr.id] = {"objects": s.objects, "found": s.hits, "proposals": s.proposals, "merges": s.merges}
        for counts, add in zip(kinds[fr.source], failure_kinds(boxes, objects, fr.ignore, s)):
            for k, v in add.items():
                counts[k] += v
    return per_source, per_frame, {s: {"objects": dict(o), "unmatched_proposals": dict(u)} for s, (o, u) in kinds.items()}


def _pooled(per_source: dict, skip: str | None = None) -> ProposalScore:
    total = ProposalScore()
    for s, v in per_source.items():
        if s != skip:
            total.add(v)
    return total


def _cpu_ms(frames, run, repeats: int = 3) -> dict:
    times = [vga_cpu_ms(run, fr, repeats) for fr in frames]
    return {"median": round(float(np.median(times)), 1), "p90": round(float(np.quantile(times, 0.9)), 1)}


def _spin(core: int) -> None:
    """A busy loop pinned to ``core`` (the load beside or on the timed core)."""
    os.sched_setaffinity(0, {core})
    while True:
        pass


def _stats(ms: list) -> dict:
    return {"median": round(float(np.median(ms)), 1), "p90": round(float(np.quantile(ms, 0.9)), 1)}


def timing(frames: list, repeats: int) -> dict:
    """Wall milliseconds per 640x480 frame of the default proposals against the geometry, pinned to one
    core, quiet and with a busy loop on another core or on the same one (see the module's ``--timing``)."""
    import multiprocessing

    from threadpoolctl import threadpool_limits

    from cbcl_pr_ros.evaluation.experiments import machine_info
    from cbcl_pr_ros.perception import ProposalConfig, propose
    from cbcl_pr_ros.perception.segmenter import SHIPPED_WEIGHTS, load_segmenter, propose_hybrid

    cores = sorted(os.sched_getaffinity(0))
    core, other = cores[-1], cores[0] if len(cores) > 1 else None
    os.sched_setaffinity(0, {core})
    cv2.setNumThreads(1)
    cfg = ProposalConfig(method="depth")
    seg = {"onnx": load_segmenter(SHIPPED_WEIGHTS, backend="onnx"), "numpy": load_segmenter(SHIPPED_WEIGHTS, backend="numpy")}
    runs = {"hybrid": lambda fr: propose_hybrid(seg["onnx"], fr.rgb, fr.depth_m, fr.intrinsics, cfg),
            "hybrid_numpy_forward": lambda fr: propose_hybrid(seg["numpy"], fr.rgb, fr.depth_m, fr.intrinsics, cfg),
            "depth": lambda fr: propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)}
    frames = [fr for fr in frames if fr.rgb.shape[:2] == (480, 640)]
    out = {"how": "ms per 640x480 real frame, each frame in turn by every method, this process pinned to one core, "
                  "one thread (threadpoolctl, cv2.setNumThreads(1), onnxruntime intra_op 1): wall time (what a frame "
                  "waits, other jobs on the core included) and this thread's CPU time (what it spends itself)",
           "frames": len(frames), "repeats": repeats, "machine": machine_info(), "timed_core": core, "conditions": {}}
    with threadpool_limits(1):
        for fr in frames[:3]:  # warm: first calls load libraries and build kernels
            for run in runs.values():
                run(fr)
        for cond, busy_core in (("quiet", None), ("busy_other_core", other), ("busy_same_core", core)):
            if cond == "busy_other_core" and other is None:
                continue
            spinner = None
            if busy_core is not None:
                spinner = multiprocessing.get_context("fork").Process(target=_spin, args=(busy_core,), daemon=True)
                spinner.start()
                time.sleep(0.5)
            load_before = os.getloadavg()[0]
            ms: dict = {k: [] for k in runs}
            cpu: dict = {k: [] for k in runs}
            ratio: dict = {k: [] for k in runs if k != "depth"}
            try:
                for _ in range(repeats):
                    for fr in frames:
                        t = {}
                        for name, run in runs.items():
                            t0, c0 = time.perf_counter(), time.thread_time()
                            run(fr)
                            t[name] = (time.perf_counter() - t0) * 1000
                            ms[name].append(t[name])
                            cpu[name].append((time.thread_time() - c0) * 1000)
                        for name in ratio:
                            ratio[name].append(t[name] / t["depth"])
            finally:
                if spinner is not None:
                    spinner.terminate()
                    spinner.join()
            out["conditions"][cond] = {
                "wall_ms": {name: _stats(v) for name, v in ms.items()},
                "cpu_ms": {name: _stats(v) for name, v in cpu.items()},
                "wall_ratio_to_depth_median": {name: round(float(np.median(v)), 2) for name, v in ratio.items()},
                "busy_core": busy_core, "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
            print(cond, json.dumps(out["conditions"][cond]), flush=True)
    return out


def brief(out: dict) -> dict:
    """The small copy of a run (``--summary``): no per-frame figures; per source recall, precision and merges
    and the failure kinds only for the variants some fold chose, the others pooled."""
    chosen = {v["chosen_on_the_others"] for v in out["learned_leave_one_source_out"]["per_source"].values()}
    keep = ("recall", "precision", "merges")
    return dict(out, learned={name: {"pooled": fig["pooled"],
                                     **({"per_source": {s: {k: f[k] for k in keep} for s, f in fig["per_source"].items()},
                                         "failure_kinds": fig["failure_kinds"]} if name in chosen else {})}
                              for name, fig in out["learned"].items()})


def main() -> None:
    from cbcl_pr_ros.perception import ProposalConfig, propose
    from cbcl_pr_ros.perception.proposals import propose_on_support
    from cbcl_pr_ros.perception.segmenter import combine, load_segmenter, propose_hybrid, propose_learned, refereed

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=Path, default=Path(os.environ.get("CBCL_REAL_RGBD", "/work/real_rgbd")))
    ap.add_argument("--labels", type=Path, default=REPO / "bench" / "real_rgbd" / "labels.json")
    ap.add_argument("--weights", type=Path, default=out_path("segmenter/segmenter.safetensors"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--skip-geometry-loso", action="store_true")
    ap.add_argument("--rendered-seeds", type=int, default=3,
                    help="rendered tables each variant is checked on (bench_real.rendered_recall; 0 = none): only "
                         f"variants with recall >= {RENDERED_FLOOR} there may be chosen as a default")
    ap.add_argument("--summary", type=Path, default=None,
                    help="also write a small copy here (no per-frame figures, per source recall/precision/merges, "
                         "failure kinds of the variants chosen leave-one-source-out only)")
    ap.add_argument("--timing", type=Path, default=None,
                    help="only time the default proposals against the geometry, pinned to one core, quiet and busy; "
                         "write the figures here (JSON)")
    ap.add_argument("--repeats", type=int, default=2, help="with --timing: passes over the frames per condition")
    ap.add_argument("--variants", nargs="+", default=None, metavar="NAME",
                    help="score only these variants of VARIANTS (and the rule shipped before, the rendered floor of "
                         "the opt-in paths): a shorter run, e.g. to compare weights on the shipped rule's family")
    args = ap.parse_args()
    if args.variants:
        unknown = sorted(set(args.variants) - set(VARIANTS))
        if unknown:
            ap.error(f"unknown variants: {', '.join(unknown)}")
        for name in [v for v in VARIANTS if v not in args.variants and v != SHIPPED_RULE]:
            del VARIANTS[name]
    cv2.setNumThreads(1)
    frames = load_frames(args.labels, args.frames)
    if args.timing is not None:
        args.timing.write_text(json.dumps(timing(frames, args.repeats), indent=1) + "\n")
        print(f"-> {args.timing}")
        return
    sources = sorted({f.source for f in frames})
    n_frames = {s: sum(f.source == s for f in frames) for s in sources}
    seg = load_segmenter(args.weights)
    cfg = ProposalConfig(method="depth")
    out: dict = {"frames": len(frames), "sources": n_frames, "weights": str(args.weights),
                 "weights_bytes": args.weights.stat().st_size, "load_average_1min": round(os.getloadavg()[0], 2)}

    def geometry(fr):
        return propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)

    kept: dict = {}

    def geometry_kept(fr):  # the geometry's proposals of a frame and their support plane, made once for every
        if fr.id not in kept:  # variant that reads them
            kept[fr.id] = propose_on_support(fr.rgb, fr.depth_m, fr.intrinsics, cfg)
        return kept[fr.id]

    def learned(variant, timed: bool = False):
        """The variant's proposer; ``timed``: as the extractor runs it (nothing kept from another call)."""
        opts = {"join": None, "inner": False, "min_face": None, "stand": False} | VARIANTS[variant]  # what it does not
        # name, it does not do
        if opts.pop("combine", False):  # the geometry's proposals, corrected by the network's
            return lambda fr: combine(geometry_kept(fr)[0],
                                      propose_learned(seg, fr.rgb, fr.depth_m, fr.intrinsics, cfg, **opts) or [])
        if opts.pop("refereed", False):  # the network's objects, the geometry as referee
            opts = {"referee_join": None, "confirm": None, "trim": False, "whole": None, "absorb": False} | opts
            if timed:
                return lambda fr: propose_hybrid(seg, fr.rgb, fr.depth_m, fr.intrinsics, cfg, **opts)
            return lambda fr: refereed(seg, fr.rgb, fr.depth_m, fr.intrinsics, cfg, *geometry_kept(fr), **opts)
        return lambda fr: propose_learned(seg, fr.rgb, fr.depth_m, fr.intrinsics, cfg, **opts)

    per, frame_figs, kinds = _score(frames, geometry)
    out["geometry"] = {"pooled": _figures(_pooled(per), len(frames)),
                       "per_source": {s: _figures(per[s], n_frames[s]) for s in sources},
                       "cpu_ms_per_640x480_frame": _cpu_ms(frames, geometry), "failure_kinds": kinds}
    if not args.skip_geometry_loso:
        out["geometry"]["leave_one_source_out"] = leave_one_source_out(frames, {})
    results = {}
    for name in VARIANTS:
        per, frame_figs, kinds = _score(frames, learned(name))
        results[name] = per
        out.setdefault("learned", {})[name] = {"pooled": _figures(_pooled(per), len(frames)),
                                               "per_source": {s: _figures(per[s], n_frames[s]) for s in sources},
                                               "failure_kinds": kinds, "per_frame": frame_figs}
        print(name, out["learned"][name]["pooled"], flush=True)
    def choose(names: list) -> dict:
        """Per held-out source the variant of ``names`` best on the other sources, and its figures there."""
        loso, total = {}, ProposalScore()
        for held in sources:
            rest = sum(n for s, n in n_frames.items() if s != held)
            best = max(names, key=lambda v: (_objective(_pooled(results[v], held), rest), v))
            loso[held] = {"chosen_on_the_others": best, "others": _figures(_pooled(results[best], held), rest),
                          "held_out": _figures(results[best][held], n_frames[held])}
            total.add(results[best][held])
        return {"per_source": loso, "held_out_pooled": _figures(total, len(frames))}

    out["learned_leave_one_source_out"] = {"variants": VARIANTS, **choose(list(VARIANTS))}
    admissible = no_worse = list(VARIANTS)
    if args.rendered_seeds > 0:  # the simulated tables: what may be a default keeps their recall
        views = rendered_views(args.rendered_seeds)
        for name in VARIANTS:
            run = learned(name, timed=True)
            out["learned"][name]["rendered"] = rendered_recall(
                cfg, args.rendered_seeds, rendered=views,
                proposer=lambda rgb, depth, K, _c, run=run: run(_Frame("", rgb, depth, K)))
        out["geometry"]["rendered"] = rendered_recall(cfg, args.rendered_seeds, rendered=views)
        rendered = {v: out["learned"][v]["rendered"]["recall_iou50"] for v in VARIANTS}
        admissible = [v for v in VARIANTS if rendered[v] >= RENDERED_FLOOR]
        # the opt-in paths: no worse on the simulated tables than the rule that shipped before
        no_worse = [v for v in VARIANTS if rendered[v] >= rendered[SHIPPED_RULE]]
        out["learned_leave_one_source_out_rendered_ok"] = {
            "rendered_floor": RENDERED_FLOOR, "variants": admissible, **(choose(admissible) if admissible else {})}
        out["learned_leave_one_source_out_rendered_no_worse"] = {
            "rendered_floor": rendered[SHIPPED_RULE], "variants": no_worse, **choose(no_worse)}
        for family, names in (("alone", [v for v in no_worse if not VARIANTS[v].get("refereed")]),
                              ("refereed", [v for v in no_worse if VARIANTS[v].get("refereed")])):
            if names:  # each path on its own: the network alone, or with the geometry as referee
                out[f"learned_leave_one_source_out_rendered_no_worse_{family}"] = {"variants": names, **choose(names)}
    pick = admissible or no_worse
    best_all = max(pick, key=lambda v: (_objective(_pooled(results[v]), len(frames)), v))
    out["learned_chosen_on_all_sources"] = best_all
    for family, keep in (("alone", lambda v: not VARIANTS[v].get("refereed")),
                         ("refereed", lambda v: bool(VARIANTS[v].get("refereed")))):
        names = [v for v in admissible if keep(v)] or [v for v in no_worse if keep(v)]
        if names:  # each path's rule: best on all sources of those that keep the simulated tables, else no worse there
            out[f"learned_{family}_chosen_on_all_sources"] = max(
                names, key=lambda v: (_objective(_pooled(results[v]), len(frames)), v))
    out["learned_cpu_ms_per_640x480_frame"] = _cpu_ms(frames, learned(best_all, timed=True))
    if VARIANTS[best_all].get("refereed"):  # the same without the geometry: what the referee costs
        alone = {k: v for k, v in VARIANTS[best_all].items()
                 if k not in ("refereed", "referee_join", "confirm", "whole", "trim", "absorb")}
        VARIANTS["_alone"] = alone
        out["learned_without_referee_cpu_ms_per_640x480_frame"] = _cpu_ms(frames, learned("_alone", timed=True))
        del VARIANTS["_alone"]
    # the shipped hybrid (propose_hybrid's defaults) beside the geometry's time above, in the same run
    out["hybrid_default_cpu_ms_per_640x480_frame"] = _cpu_ms(
        frames, lambda fr: propose_hybrid(seg, fr.rgb, fr.depth_m, fr.intrinsics, cfg))
    # the same frame 20 times: the same boxes, masks and scores
    fr = frames[0]
    first = learned(best_all, timed=True)(fr)
    same = all(
        len(p) == len(first) and all(a.box == b.box and a.score == b.score and np.array_equal(a.mask, b.mask)
                                     for a, b in zip(p, first))
        for p in (learned(best_all, timed=True)(fr) for _ in range(20)))
    out["learned_deterministic_20_runs"] = bool(same)
    path = args.out or out_path("segmenter.json")
    path.write_text(json.dumps(out, indent=1))
    if args.summary:
        args.summary.write_text(json.dumps(brief(out), separators=(",", ":")) + "\n")
    print(json.dumps({"geometry": out["geometry"]["pooled"],
                      "geometry_loso": out["geometry"].get("leave_one_source_out", {}).get("held_out_pooled"),
                      "learned_loso": out["learned_leave_one_source_out"]["held_out_pooled"],
                      "learned_loso_rendered_ok": out.get("learned_leave_one_source_out_rendered_ok", {}).get(
                          "held_out_pooled"),
                      "learned_loso_rendered_no_worse": out.get("learned_leave_one_source_out_rendered_no_worse", {}).get(
                          "held_out_pooled"),
                      **{f"loso_no_worse_{f}": out.get(f"learned_leave_one_source_out_rendered_no_worse_{f}", {}).get(
                          "held_out_pooled") for f in ("alone", "refereed")},
                      "learned_chosen_on_all_sources": best_all,
                      "alone_chosen": out.get("learned_alone_chosen_on_all_sources"),
                      "refereed_chosen": out.get("learned_refereed_chosen_on_all_sources"),
                      "its_rendered": out["learned"][best_all].get("rendered"),
                      "learned_ms": out["learned_cpu_ms_per_640x480_frame"],
                      "learned_without_referee_ms": out.get("learned_without_referee_cpu_ms_per_640x480_frame"),
                      "hybrid_default_ms": out["hybrid_default_cpu_ms_per_640x480_frame"],
                      "geometry_ms": out["geometry"]["cpu_ms_per_640x480_frame"]}, indent=1))
    print(f"-> {path}")


if __name__ == "__main__":
    main()
