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
  it, ``segmenter.fold_inner``). Leave-one-source-out: the variant best on the other sources
  (F1 at IoU 0.5 less 0.05 per merge in 10 frames, as bench_real) is scored on the held-out one;
- recall and precision at IoU 0.5, merges, per source, pooled; CPU milliseconds per 640x480 frame on one
  core (best of 3, process CPU time with one BLAS/OpenCV thread); whether 20 runs of one frame agree.

Nothing here is chosen on the frame it is scored on. Writes runs/bench/segmenter.json. Run:
``source scripts/env.sh && python -P bench/bench_segmenter.py``.
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
from bench_common import REPO, out_path  # noqa: E402
from bench_real import _figures, _objective, leave_one_source_out  # noqa: E402
from real_rgbd_set import ProposalScore, failure_kinds, load_frames, score_proposals  # noqa: E402

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
                                                                "inside_p": 0.5, "join": 3.0, "inner": True}}


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
    times = []
    for fr in frames:
        t = []
        for _ in range(repeats):
            t0 = time.process_time()
            run(fr)
            t.append(time.process_time() - t0)
        times.append(min(t) * 1000 * (640 * 480) / (fr.rgb.shape[0] * fr.rgb.shape[1]))
    return {"median": round(float(np.median(times)), 1), "p90": round(float(np.quantile(times, 0.9)), 1)}


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
    from cbcl_pr_ros.perception.segmenter import combine, load_segmenter, propose_learned

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=Path, default=Path(os.environ.get("CBCL_REAL_RGBD", "/work/real_rgbd")))
    ap.add_argument("--labels", type=Path, default=REPO / "bench" / "real_rgbd" / "labels.json")
    ap.add_argument("--weights", type=Path, default=out_path("segmenter/segmenter.safetensors"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--skip-geometry-loso", action="store_true")
    ap.add_argument("--summary", type=Path, default=None,
                    help="also write a small copy here (no per-frame figures, per source recall/precision/merges, "
                         "failure kinds of the variants chosen leave-one-source-out only)")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    frames = load_frames(args.labels, args.frames)
    sources = sorted({f.source for f in frames})
    n_frames = {s: sum(f.source == s for f in frames) for s in sources}
    seg = load_segmenter(args.weights)
    cfg = ProposalConfig(method="depth")
    out: dict = {"frames": len(frames), "sources": n_frames, "weights": str(args.weights),
                 "weights_bytes": args.weights.stat().st_size, "load_average_1min": round(os.getloadavg()[0], 2)}

    def geometry(fr):
        return propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)

    def learned(variant):
        opts = {"join": None, "inner": False} | VARIANTS[variant]  # what a variant does not name, it does not do
        if opts.pop("combine", False):  # the geometry's proposals, corrected by the network's
            return lambda fr: combine(geometry(fr), propose_learned(seg, fr.rgb, fr.depth_m, fr.intrinsics, cfg, **opts) or [])
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
    loso, total = {}, ProposalScore()
    for held in sources:
        rest = sum(n for s, n in n_frames.items() if s != held)
        best = max(VARIANTS, key=lambda v: (_objective(_pooled(results[v], held), rest), v))
        loso[held] = {"chosen_on_the_others": best, "others": _figures(_pooled(results[best], held), rest),
                      "held_out": _figures(results[best][held], n_frames[held])}
        total.add(results[best][held])
    out["learned_leave_one_source_out"] = {"variants": VARIANTS, "per_source": loso,
                                           "held_out_pooled": _figures(total, len(frames))}
    best_all = max(VARIANTS, key=lambda v: (_objective(_pooled(results[v]), len(frames)), v))
    out["learned_cpu_ms_per_640x480_frame"] = _cpu_ms(frames, learned(best_all))
    # the same frame 20 times: the same boxes, masks and scores
    fr = frames[0]
    first = learned(best_all)(fr)
    same = all(
        len(p) == len(first) and all(a.box == b.box and a.score == b.score and np.array_equal(a.mask, b.mask)
                                     for a, b in zip(p, first))
        for p in (learned(best_all)(fr) for _ in range(20)))
    out["learned_deterministic_20_runs"] = bool(same)
    path = args.out or out_path("segmenter.json")
    path.write_text(json.dumps(out, indent=1))
    if args.summary:
        args.summary.write_text(json.dumps(brief(out), separators=(",", ":")) + "\n")
    print(json.dumps({"geometry": out["geometry"]["pooled"],
                      "geometry_loso": out["geometry"].get("leave_one_source_out", {}).get("held_out_pooled"),
                      "learned_loso": out["learned_leave_one_source_out"]["held_out_pooled"],
                      "learned_ms": out["learned_cpu_ms_per_640x480_frame"]}, indent=1))
    print(f"-> {path}")


if __name__ == "__main__":
    main()
