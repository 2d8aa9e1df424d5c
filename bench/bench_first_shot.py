"""From the first shot: taught objects named, never-taught ones unknown, on real tables (real RGB-D set).

Two protocols, per source (table) and seed, as ``bench_real.py``'s recognition test:

* ``teaching_frame``: half of the instances seen in two or more frames are taught from their first
  frame (1 shot = the labelled box; 5 / 10 shots = the box and shifted/scaled copies of it, one view),
  and every object of the frames is classified (a taught object in its own teaching frame excepted).
  The learner's negatives are the *other objects of the teaching frames* only.
* ``stream``: the robot watched the table before it was taught. The source's frames in a seeded
  order; the first third (rounded up) is the stream: unlabelled, every object of it offered as a
  negative (copies of one object count once: the learner's own rule). Of the other frames, half of
  the instances seen in two or more are taught from their first frame there, and only those frames
  are classified, so no tested view was ever a negative. Negatives ``frames`` (the teaching frames'
  other objects, as above), ``frames+stream`` (and the stream's objects but the taught ones: the
  tracker kept the taught object's track out, as the product's stream store does) and
  ``frames+stream_all`` (the taught objects' earlier views too: the track was lost, and only the
  learner's drop of negatives near the new shots keeps the object from vetoing itself) and
  ``frames+stream_covisible`` (only the stream frames in which a taught object stood, the others of
  those frames: seen beside it while it was tracked, so not it, whatever the tracker did elsewhere).

In the stream protocol a taught object's shots also hold its earlier views, as the learner's teach of
the object in view takes its track's (``--track product``, the default; :func:`track_shots`): its
last views in the stream (the robot kept its track while it watched), those the product's guard
keeps (no other object of the view's frame nearer the shot), one shot per view; ``--track none``:
the teaching frame's shots alone; ``switch_guard``: how often each guard keeps a view of the object's
nearest neighbour, as if the tracker had switched to it.

Figures: taught correct (known and named right), taught accepted, never-taught rejected (all; and
split into those seen in the stream, those that stood only in a teaching frame, and those never
seen), and the confidence: ECE and the share of (wrong, right) answer pairs where the wrong one is
less confident, over every classified object (a never-taught object's best class is wrong).

Leave-one-source-out: the gate's veto rule (``negatives.veto_ratio``: a ratio with one negative and
its growth with their count; :data:`RULES`, fixed ratios among them) is chosen on the other sources,
one rule for the teaching-frame protocol and the stream protocol with and without the stream's
(covisible) negatives together (the rule whose worst margin to the targets -- taught correct 0.85,
taught accepted 0.90, never-taught rejected 0.90 -- over the three is largest, at 1 shot) and scored
on the held-out one; the shipped rule is reported beside it. Objects of one frame are classified
together (``CBCLPRLearner.seen_together``), as the learner classifies the stream's frames.

``--confidence-loso``: the gate's confidence curve (:func:`confidence_loso`; the answers' parts are
recorded, so each curve is scored without teaching again), restricted with ``--benchmark-curves`` to
the curves under which a benchmark set's ECE (``bench_gate_sets.py --curves``) stays within 0.10.
``--gate-variants``: more shots of one view, the gate's D floor chosen leave-one-source-out and the
copies of one view taught as their mean (:func:`gate_variants`).
``--gate-loso``: the veto's rule and whether copies of one view shrink D_gate (``learner.GATE_MIN_EXTENT``)
chosen leave-one-source-out at every number of shots (:func:`gate_loso`), with each candidate's accepted
and rejected per table in the default regime (the trade-off per held-out source).

Features are EfficientNet-Lite0 (ONNX) of masked crops, cached in ``--cache`` (a pickle of vectors,
rebuilt when missing from ``--frames``, default ``$CBCL_REAL_RGBD`` or data/real_rgbd). Run:

    source scripts/env.sh && python -P bench/bench_first_shot.py   # -> runs/bench/first_shot.json
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # bench_common
from bench_common import out_path  # noqa: E402

# veto rules (ratio with one negative, growth with the count; negatives.veto_ratio): the fixed ratios,
# then ratios that grow with the count of negatives
RULES = tuple((v, 0.0) for v in (0.9, 0.95, 1.0, 1.02, 1.03, 1.05, 1.07, 1.1, 1.15, 1.2)) + tuple(
    (v, g) for v in (0.95, 0.97, 1.0, 1.02) for g in (0.01, 0.02, 0.03, 0.04, 0.05, 0.07))
# the situations one rule must serve, with their seeds' share: what a robot is taught from
LOSO_REGIMES = (("teaching_frame", "frames"), ("stream", "frames"), ("stream", "frames+stream_covisible"))


def build_cache(labels: str, frames_dir: str, path: Path) -> list[dict]:
    """Vectors of every labelled object's masked crop and of 9 jittered copies of each box, per frame."""
    from bench_real import MaskedCrops, _jitter_boxes

    from real_rgbd_set import load_frames
    from cbcl_pr_ros.features import make_backbone

    bb = make_backbone("efficientnet_lite0", runtime="onnx", threads=2)
    crops, out = MaskedCrops(), []
    for i, fr in enumerate(load_frames(labels, frames_dir)):
        obj = np.asarray(bb.extract(crops(fr, [b for _, b in fr.objects])), np.float32)
        jit = []
        for k, (_, b) in enumerate(fr.objects):
            boxes = _jitter_boxes(b, fr.rgb.shape, 10, np.random.default_rng([i, k, 99]))[1:]
            jit.append(np.asarray(bb.extract(crops(fr, boxes)), np.float32))
        out.append(dict(id=fr.id, source=fr.source, names=[n for n, _ in fr.objects], obj=obj, jit=np.stack(jit)))
    path.write_bytes(pickle.dumps(out))
    return out


def _conf_quality(conf: list[float], right: list[bool], bins: int = 10) -> dict:
    c, ok = np.asarray(conf), np.asarray(right, float)
    if not len(c):
        return {}
    idx = np.minimum((c * bins).astype(int), bins - 1)
    ece = sum(abs(c[idx == b].mean() - ok[idx == b].mean()) * (idx == b).mean()
              for b in range(bins) if (idx == b).any())
    r, w = c[ok > 0], c[ok == 0]
    pairs = float((w[:, None] < r[None, :]).mean()) if len(r) and len(w) else float("nan")
    reliability = [[b / bins, int((idx == b).sum()), round(float(c[idx == b].mean()), 3),
                    round(float(ok[idx == b].mean()), 3)] for b in range(bins) if (idx == b).any()]
    return {"ece": round(float(ece), 3), "wrong_below_right_pairs": round(pairs, 3),
            "mean_confidence": round(float(c.mean()), 3), "right": round(float(ok.mean()), 3), "n": len(c),
            "reliability_bin_count_confidence_right": reliability}


def taught_split(frs: list[dict], seed: int) -> tuple[dict, set[str]] | None:
    """The frames each instance stands in, and the half of the instances seen in two or more frames
    that a seed teaches (None when fewer than two such instances)."""
    rng = np.random.default_rng(seed)
    seen: dict = defaultdict(list)
    for f in frs:
        for n in f["names"]:
            if f["id"] not in seen[n]:
                seen[n].append(f["id"])
    multi = sorted(n for n, ids in seen.items() if len(ids) >= 2)
    if len(multi) < 2:
        return None
    return seen, {str(x) for x in rng.permutation(multi)[: max(1, len(multi) // 2)]}


@dataclass(frozen=True)
class Plan:
    """Who is taught from which frame, what the robot saw before (the stream) and what is classified."""

    taught: frozenset[str]
    teach_frame: dict[str, str]
    stream: tuple[dict, ...]
    test: tuple[dict, ...]


def teaching_frame_plan(frs: list[dict], seed: int) -> Plan | None:
    """Half of the instances seen in two or more frames, each taught from its first frame; every frame
    classified (the taught objects of their own teaching frame excepted); no stream."""
    split = taught_split(frs, seed)
    if split is None:
        return None
    seen, taught = split
    return Plan(frozenset(taught), {n: seen[n][0] for n in taught}, (), tuple(frs))


def stream_plan(frs: list[dict], seed: int) -> Plan | None:
    """The source's frames in a seeded order: the first third (rounded up) is what the robot watched
    before the teach (the stream, unlabelled); of the rest, half of the instances seen in two or more
    of its frames are taught from their first one there, and the rest's frames are classified."""
    if len(frs) < 3:
        return None
    order = [frs[i] for i in np.random.default_rng([seed, 7]).permutation(len(frs))]
    n_stream = (len(frs) + 2) // 3
    split = taught_split(order[n_stream:], seed)
    if split is None:
        return None
    seen, taught = split
    return Plan(frozenset(taught), {n: seen[n][0] for n in taught}, tuple(order[:n_stream]), tuple(order[n_stream:]))


PLANS = {"teaching_frame": teaching_frame_plan, "stream": stream_plan}
# frames: the teaching frames' other objects; frames+stream: and every object of the stream but the
# taught ones (the tracker kept the taught object's track and leaves it out); frames+stream_all: and
# the taught objects' earlier views too (the track was lost: only the learner's drop near the shots
# keeps the object from being its own negative); frames+stream_covisible: only the stream frames in
# which a taught object stood, its own box left out (what was seen beside it while it was tracked
# cannot be it, whatever the tracker did elsewhere)
NEGATIVES = ("frames", "frames+stream", "frames+stream_all", "frames+stream_covisible")


def run_source(frs: list[dict], seed: int, shots: int, rule: tuple[float, float] | None = None,
               protocol: str = "teaching_frame", negatives: str = "frames", track: bool | str = False) -> dict:
    """One table, one seed: the per-object outcomes (lists of booleans and confidences); ``rule`` (the
    veto's ratio with one negative and its growth with the count) in place of the shipped one."""
    import cbcl_pr_ros.core.negatives as neg_mod

    shipped = (neg_mod.VETO, neg_mod.VETO_GROWTH)
    if rule is not None:
        neg_mod.VETO, neg_mod.VETO_GROWTH = rule
    try:
        return _run_source(frs, seed, shots, protocol, negatives, track)
    finally:
        neg_mod.VETO, neg_mod.VETO_GROWTH = shipped


# a teach of the object in view takes at most this many earlier views of its track (the learner's
# default ``teach_num_frames``, the cap of a teach by track: service/teaching.py)
TRACK_CAP = 5
_BOXES: dict[str, list] = {}


def _boxes(fid: str) -> list:
    """The labelled boxes of a frame (labels.json, in the cache's order of names)."""
    if not _BOXES:
        labels = json.loads((ROOT / "bench/real_rgbd/labels.json").read_text())
        _BOXES.update({f["id"]: [tuple(o["box"]) for o in f["objects"]] for f in labels["frames"]})
    return _BOXES[fid]


def track_shots(learner, name: str, shots: np.ndarray, teach: dict, stream: tuple[dict, ...],
                others: np.ndarray | None, guard: str) -> tuple[np.ndarray, dict]:
    """The shots a teach of the object in view takes from its track, as the product does
    (``Teacher._object_frames``): the object's last :data:`TRACK_CAP` views of the stream (the robot
    kept its track while it watched), those the guard finds consistent with the shot
    (``CBCLPRLearner.one_object`` against ``others``, the other objects the teach saw), one shot per
    view (``one_shot_per_view``: views whose box overlaps the teaching box are that view again and
    add nothing). Returns the extra shots and counts of views seen / kept."""
    from cbcl_pr_ros.service.object_teaching import SAME_VIEW_IOU, one_shot_per_view
    from cbcl_pr_ros.perception.boxes import box_iou

    seen = [g for g in stream if name in g["names"]][-TRACK_CAP:]
    rows = np.stack([g["obj"][g["names"].index(name)] for g in seen]) if seen else np.zeros((0, shots.shape[1]))
    boxes = [_boxes(g["id"])[g["names"].index(name)] for g in seen]
    if guard == "frame":  # each view's rivals: the other objects of its own frame
        others = [g["obj"][[i for i, n in enumerate(g["names"]) if n != name]] for g in seen]
    keep = learner.one_object(shots, rows, others, guard) if len(rows) else np.zeros(0, bool)
    teach_box = _boxes(teach["id"])[teach["names"].index(name)]
    rows, boxes = rows[keep], [b for b, k in zip(boxes, keep) if k]
    new = [i for i, b in enumerate(boxes) if box_iou(teach_box, b) < SAME_VIEW_IOU]
    extra = one_shot_per_view(rows[new], [boxes[i] for i in new]) if new else np.zeros((0, shots.shape[1]), np.float32)
    return extra, {"views": len(seen), "kept": int(keep.sum()), "shots": len(extra)}


def switch_guard(by_source: dict, seeds: int) -> dict:
    """How often each guard (``one_place.GUARDS``) keeps a track's earlier view, stream protocol, 1 shot:
    the taught object's own view there (``own``: a track that stayed on its object), and the view of
    the object whose box lies nearest it in that frame, as if the tracker had switched to it
    (``switched``, the taught object still in that frame; ``switched_hidden``: it was out of sight)."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    from cbcl_pr_ros.core.one_place import GUARDS

    kept: dict = {g: defaultdict(list) for g in GUARDS}
    for frs in by_source.values():
        learner = CBCLPRLearner(LearnerConfig(seed=0), backbone="efficientnet_lite0", feature_dim=int(frs[0]["obj"].shape[1]))
        for seed in range(seeds):
            plan = stream_plan(frs, seed)
            if plan is None:
                continue
            by_id = {f["id"]: f for f in frs}
            for name in sorted(plan.taught):
                f = by_id[plan.teach_frame[name]]
                shot = f["obj"][f["names"].index(name)][None]
                teach_others = f["obj"][[i for i, n in enumerate(f["names"]) if n != name]]
                for g in [g for g in plan.stream if name in g["names"]][-TRACK_CAP:]:
                    a, boxes = g["names"].index(name), _boxes(g["id"])
                    if len(g["names"]) < 2:
                        continue
                    centre = lambda b: np.array([b[0] + b[2], b[1] + b[3]]) / 2.0  # noqa: E731
                    b = min((i for i in range(len(boxes)) if i != a),
                            key=lambda i: float(np.linalg.norm(centre(boxes[i]) - centre(boxes[a]))))
                    rest = lambda skip: g["obj"][[i for i in range(len(boxes)) if i not in skip]]  # noqa: E731
                    for case, row, rivals in (("own", a, rest({a})), ("switched", b, rest({b})),
                                              ("switched_hidden", b, rest({a, b}))):
                        for guard in GUARDS:
                            others = [rivals] if guard == "frame" else teach_others
                            kept[guard][case].append(bool(learner.one_object(shot, g["obj"][row][None], others,
                                                                             guard)[0]))
    return {g: {case: round(float(np.mean(v)), 3) for case, v in d.items()} | {"n": len(d["own"])}
            for g, d in kept.items()}


# how a teach's copies of one view are taught: "shots" (each a shot, the default) or "mean" (one shot,
# their mean, as the product's teach of frames of one still view does); set by variant_runs
COPIES = "shots"


def taught_learner(frs: list[dict], seed: int, shots: int, protocol: str, negatives: str,
                   track: bool | str = False, counts: dict | None = None):
    """One table's plan and a learner taught by it, with the negatives of the regime given.

    Returns ``(plan, learner, in_teach, in_stream)`` (the never-taught names seen in a teaching frame
    and in the stream), or None when the table gives no plan. Shared with ``gate_capture.py``.
    ``track``: True: each taught object's views in the stream are all taught with its shots (the robot
    kept its track while it watched); a guard of ``one_place.GUARDS``: as the product's teach of the
    object in view takes them (:func:`track_shots`; ``counts`` adds up its views seen and kept).
    """
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    plan = PLANS[protocol](frs, seed)
    if plan is None:
        return None
    taught = plan.taught
    by_id = {f["id"]: f for f in frs}
    learner = CBCLPRLearner(LearnerConfig(seed=seed), backbone="efficientnet_lite0",
                            feature_dim=int(frs[0]["obj"].shape[1]))
    shots_of = {}
    for name in sorted(taught):
        f = by_id[plan.teach_frame[name]]
        k = f["names"].index(name)
        view = np.concatenate([f["obj"][k:k + 1], f["jit"][k][: shots - 1]])
        if COPIES == "mean":  # the copies of one view as one shot, their mean (object_teaching.one_shot_per_view)
            view = view.mean(axis=0, keepdims=True)
        shots_of[name] = np.concatenate([view] + [g["obj"][g["names"].index(name)][None] for g in plan.stream
                                                  if track is True and name in g["names"]])
        if isinstance(track, str):
            others = [f["obj"][[i for i, n in enumerate(f["names"]) if n != name]]]
            if negatives != "frames":
                others += [g["obj"][[i for i, n in enumerate(g["names"]) if n != name and
                                     (negatives == "frames+stream_all" or n not in taught)]]
                           for g in plan.stream if negatives != "frames+stream_covisible" or name in g["names"]]
            others = np.concatenate(others) if others else None
            extra, c = track_shots(learner, name, shots_of[name], f, plan.stream, others, track)
            shots_of[name] = np.concatenate([shots_of[name], extra])
            if counts is not None:
                for key, v in c.items():
                    counts[key] = counts.get(key, 0) + v
    learner.teach_increment(shots_of)
    in_teach, in_stream, negs = set(), set(), []
    for fid in sorted(set(plan.teach_frame.values())):
        f = by_id[fid]
        rows = [i for i, n in enumerate(f["names"]) if n not in taught]
        in_teach |= {f["names"][i] for i in rows}
        if rows:
            negs.append(f["obj"][rows])
    for f in plan.stream:
        in_stream |= set(f["names"]) - taught
        if negatives != "frames" and (negatives != "frames+stream_covisible" or taught & set(f["names"])):
            rows = [i for i, n in enumerate(f["names"]) if negatives == "frames+stream_all" or n not in taught]
            if rows:
                negs.append(f["obj"][rows])
    if negs:
        learner.add_negatives(np.concatenate(negs), away_from=np.concatenate(list(shots_of.values())))
    return plan, learner, in_teach, in_stream


def _run_source(frs: list[dict], seed: int, shots: int, protocol: str, negatives: str,
                track: bool | str = False) -> dict:
    out: dict = defaultdict(list)
    counts: dict = {}
    built = taught_learner(frs, seed, shots, protocol, negatives, track, counts)
    if built is None:
        return out
    plan, learner, in_teach, in_stream = built
    taught = plan.taught
    out["negatives_kept"].append(len(learner.negatives_))
    for key, v in counts.items():
        out[f"track_{key}"].append(v)
    for f in plan.test:
        alone = learner.predict(f["obj"], top_k=1)
        preds = learner.seen_together(f["obj"], alone)  # one view, as the stream
        parts = confidence_parts(learner, f["obj"], alone, preds)
        for name, p, part in zip(f["names"], preds, parts):
            if name in taught and f["id"] == plan.teach_frame[name]:
                continue
            right = name in taught and p.nearest_label == name
            out["conf"].append(float(p.confidence))
            out["conf_right"].append(bool(right))
            out["conf_parts"].append(part)
            if name in taught:
                out["taught_correct"].append(bool(p.known and p.label == name))
                out["taught_accepted"].append(bool(p.known))
                out["taught_best_correct"].append(bool(right))
            else:
                out["untaught_rejected"].append(not p.known)
                part = ("in_stream" if name in in_stream else "in_teaching_frame" if name in in_teach
                        else "never_seen")
                out[f"untaught_{part}_rejected"].append(not p.known)
    return out


def confidence_parts(learner, x: np.ndarray, alone: list, together: list) -> list[tuple[float, float, float]]:
    """Per answer what its confidence is made of, so that the gate's confidence curve can be compared
    without teaching again: the best class's probability, the answer's ratio (``DistanceGate.ratios``)
    and, where the one-place rule refused it, the ratio of the object that kept the class (nan
    otherwise; ``one_place.one_place``'s choice: of the known objects of that class nearest the same
    cluster, the nearest)."""
    served = learner._served
    classes = list(served.classes)
    xt = learner.transform(x)
    best = np.array([classes.index(p.nearest_label) for p in alone])
    head = served.head.scores(xt)[np.arange(len(xt)), best]
    ratio = served.gate.ratios(xt, best)
    nearest = [int(np.argmin(((np.asarray(served.gate.centroids[c], np.float64) - v) ** 2).sum(1)))
               for c, v in zip(best, xt)]
    out = []
    for i, (p, q) in enumerate(zip(alone, together)):
        kept = float("nan")
        if p.known and not q.known:
            rows = [k for k, r in enumerate(alone) if r.known and best[k] == best[i] and nearest[k] == nearest[i]]
            centroid = np.asarray(served.gate.centroids[best[i]], np.float64)[nearest[i]]
            k = min(rows, key=lambda k: float(((centroid - xt[k]) ** 2).sum()))
            kept = float(ratio[k])
        out.append((float(head[i]), float(ratio[i]), kept))
    return out


def gate_confidence(parts: list[tuple[float, float, float]], softness: float, centre: float) -> np.ndarray:
    """The confidences ``parts`` (:func:`confidence_parts`) give under another curve of the gate:
    ``open_set.inside_probability`` is ``1 / (1 + exp((ratio - 1) / GATE_SOFTNESS))``; here its
    softness and the ratio at which it is one half (``centre``; the product's is 1) vary. The
    one-place rule's factor (the kept object's chance of lying outside) keeps the centre 1, so that an
    answer it refuses stays below one half."""
    a = np.asarray(parts, np.float64).reshape(-1, 3)

    def inside(r: np.ndarray, c: float) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(np.clip((r - c) / softness, -50.0, 50.0)))
    conf = a[:, 0] * inside(a[:, 1], centre)
    refused = ~np.isnan(a[:, 2])
    conf[refused] *= 1.0 - inside(a[refused, 2], 1.0)
    return conf


def summary(parts: list[dict]) -> dict:
    agg: dict = defaultdict(list)
    for p in parts:
        for k, v in p.items():
            agg[k] += v
    res = {k: round(float(np.mean(v)), 3) for k, v in agg.items()
           if k not in ("conf", "conf_right", "conf_parts") and not k.startswith("track_") and v}
    res |= {k: int(sum(v)) for k, v in agg.items() if k.startswith("track_")}  # views seen / kept, shots
    res |= {f"n_{k}": len(v) for k, v in agg.items() if k.startswith(("taught", "untaught"))}
    res["confidence"] = _conf_quality(agg["conf"], agg["conf_right"])
    return res


def loso(by_source: dict, regimes: dict[tuple[str, str], int], track: bool | str = False) -> dict:
    """1 shot: per held-out source, the rule of :data:`RULES` chosen on the other sources (the one
    whose worst margin to the targets -- taught correct 0.85, taught accepted 0.90, never-taught
    rejected 0.90 -- over ``regimes`` ((protocol, negatives): seeds) is largest), scored on the
    held-out source; and every rule's figures over all sources."""
    sweep = {rule: {reg: {(src, seed): run_source(frs, seed, 1, rule, *reg, track) for src, frs in by_source.items()
                          for seed in range(n)} for reg, n in regimes.items()} for rule in RULES}

    def score(rule, src):
        parts = [summary([x for (s2, _), x in sweep[rule][reg].items() if s2 != src]) for reg in regimes]
        return min(min(p.get("taught_correct", 0.0) - 0.85, p.get("taught_accepted", 0.0) - 0.90,
                       p.get("untaught_rejected", 0.0) - 0.90) for p in parts)

    chosen = {src: max(RULES, key=lambda r: score(r, src)) for src in by_source}
    held = {"/".join(reg): summary([x for src in by_source for (s2, _), x in sweep[chosen[src]][reg].items()
                                    if s2 == src]) for reg in regimes}
    return {"1_shot_loso": held | {"rule_chosen": {src: list(r) for src, r in chosen.items()}},
            "1_shot_rule_sweep": {f"{v}*m^{g}": {"/".join(reg): {k: w for k, w in summary(list(x.values())).items()
                                                                 if not k.startswith("n_")}
                                                  for reg, x in sweep[(v, g)].items()} for v, g in RULES}}


# the one-view prior temperature's scale (calibration.ONE_VIEW_TEMPERATURE_SCALE) compared leave-one-source-out
ONE_VIEW_SCALES = (1.0, 2.0, 4.0, 8.0, 16.0)


def calibration_loso(by_source: dict, seeds: int, shots_list: list[int]) -> dict:
    """Teaching-frame protocol at several shots (one view, jittered copies): per held-out source, the
    one-view temperature scale chosen on the other sources (ECE <= 0.10 at every number of shots, then
    the largest share of wrong answers less confident than right ones; else the smallest ECE) and
    scored on the held-out one; and every scale over all sources."""
    from cbcl_pr_ros.core import calibration

    shipped = calibration.ONE_VIEW_TEMPERATURE_SCALE
    runs: dict = {}
    try:
        for k in ONE_VIEW_SCALES:
            calibration.ONE_VIEW_TEMPERATURE_SCALE = k
            runs[k] = {n: {(src, seed): run_source(frs, seed, n) for src, frs in by_source.items()
                           for seed in range(seeds)} for n in shots_list}
    finally:
        calibration.ONE_VIEW_TEMPERATURE_SCALE = shipped

    def quality(k, n, keep):
        parts = [v for (src, _), v in runs[k][n].items() if keep(src)]
        return _conf_quality([c for p in parts for c in p["conf"]], [r for p in parts for r in p["conf_right"]])

    def score(k, held):
        qs = [quality(k, n, lambda s: s != held) for n in shots_list]
        ece = max(q.get("ece", 1.0) for q in qs)
        return (1, min(q.get("wrong_below_right_pairs", 0.0) for q in qs)) if ece <= 0.10 else (0, -ece)

    chosen = {src: max(ONE_VIEW_SCALES, key=lambda k: score(k, src)) for src in by_source}
    held = {f"{n}_shot": summary([v for src in by_source for (s2, _), v in runs[chosen[src]][n].items() if s2 == src])
            for n in shots_list}
    return {"loso": held | {"scale_chosen": chosen},
            "sweep": {str(k): {f"{n}_shot": quality(k, n, lambda s: True) for n in shots_list} for k in ONE_VIEW_SCALES}}


# the gate's confidence curve compared leave-one-source-out: its softness (``open_set.GATE_SOFTNESS``) and
# the ratio at which it is one half (the product's: 1, the boundary)
SOFTNESSES = (0.03, 0.05, 0.07, 0.1, 0.15)
CENTRES = (0.9, 0.95, 1.0)
# a curve is a candidate only where the benchmark set's ECE (``bench_gate_sets.py --curves``) stays within this
BENCHMARK_ECE = 0.10


def benchmark_curves(path: str) -> dict[tuple[float, float], float]:
    """Per curve the worst ECE a ``bench_gate_sets.py --curves`` output holds (mean over the steps of
    each set, number of shots and negatives)."""
    res = json.loads(Path(path).read_text())["results"]
    worst: dict = {}
    for part in res.values():
        for k, v in part["mean"].items():
            if k.startswith("ece_curve_"):
                s, c = (float(t) for t in k[len("ece_curve_"):].split("@"))
                worst[(s, c)] = max(worst.get((s, c), 0.0), float(v))
    return worst


def confidence_loso(by_source: dict, regimes: dict[tuple[str, str], int], shots_list: list[int],
                    track: bool | str = False, benchmark: dict | None = None) -> dict:
    """The gate's confidence curve, leave-one-source-out: per held-out source the (softness, centre)
    of :data:`SOFTNESSES` x :data:`CENTRES` whose worst ECE over ``regimes`` x ``shots_list`` on the
    other sources is smallest among those with wrong-below-right >= 0.85 in each and, where
    ``benchmark`` (:func:`benchmark_curves`) is given, a benchmark-set ECE within
    :data:`BENCHMARK_ECE`; scored on the held-out one (answers pooled over the held-out sources).
    Also every curve over all sources. The gate's decisions do not depend on the curve: the
    learners are taught once."""
    runs = {(reg, n): {src: [run_source(frs, seed, n, None, *reg, track) for seed in range(seeds)]
                       for src, frs in by_source.items()} for reg, seeds in regimes.items() for n in shots_list}
    grid = [(s, c) for s in SOFTNESSES for c in CENTRES
            if benchmark is None or benchmark.get((s, c), 1.0) <= BENCHMARK_ECE]

    def quality(key, pick) -> dict:
        conf, right = [], []
        for src, parts in runs[key].items():
            curve = pick(src)
            if curve is None:
                continue
            for p in parts:
                conf += gate_confidence(p["conf_parts"], *curve).tolist()
                right += p["conf_right"]
        q = _conf_quality(conf, right)
        q.pop("reliability_bin_count_confidence_right", None)
        return q

    def score(curve, held):
        qs = [quality(key, lambda s: None if s == held else curve) for key in runs]
        ok = all(q.get("wrong_below_right_pairs", 0.0) >= 0.85 for q in qs)
        return (ok, -max(q.get("ece", 1.0) for q in qs))

    chosen = {src: max(grid, key=lambda g: score(g, src)) for src in by_source}
    name = lambda key: f"{'/'.join(key[0])}/{key[1]}_shot"  # noqa: E731
    return {"loso": {name(key): quality(key, chosen.get) for key in runs} | {"curve_chosen": chosen},
            "candidates": [list(g) for g in grid],
            "benchmark_worst_ece": None if benchmark is None else {f"{s}@{c}": round(v, 3)
                                                                   for (s, c), v in benchmark.items()},
            "sweep": {f"{s}@{c}": {name(key): quality(key, lambda _: (s, c)) for key in runs}
                      for s in SOFTNESSES for c in CENTRES}}


# the gate's D floor (``learner.GATE_FLOOR``, a share of the prior) compared leave-one-source-out at 5 and 10
# shots of one view: the floor is as far as copies of one view may shrink D_gate, and the radius 1.3 D_gate with it
FLOORS = (0.9, 0.93, 0.95, 0.97, 1.0)


def variant_runs(by_source: dict, regimes: dict[tuple[str, str], int], shots_list: list[int],
                 floor: float | None = None, copies: str = "shots", track: bool | str = False) -> dict:
    """Per (regime, shots), per source, the outcomes with the gate's D floor ``floor`` (None: the
    shipped one) and the copies of one view taught as ``copies`` (:data:`COPIES`)."""
    import cbcl_pr_ros.core.learner as learner_mod

    global COPIES
    shipped = (learner_mod.GATE_FLOOR, COPIES)
    learner_mod.GATE_FLOOR = shipped[0] if floor is None else floor
    COPIES = copies
    try:
        return {(reg, n): {src: [run_source(frs, seed, n, None, *reg, track) for seed in range(seeds)]
                           for src, frs in by_source.items()} for reg, seeds in regimes.items() for n in shots_list}
    finally:
        learner_mod.GATE_FLOOR, COPIES = shipped


def _margin(s: dict) -> float:
    """The worst margin of a summary to the targets (taught correct 0.85, accepted 0.90, never-taught
    rejected 0.90)."""
    return min(s.get("taught_correct", 0.0) - 0.85, s.get("taught_accepted", 0.0) - 0.90,
               s.get("untaught_rejected", 0.0) - 0.90)


def gate_variants(by_source: dict, regimes: dict[tuple[str, str], int], shots_list: list[int],
                  track: bool | str = False) -> dict:
    """More shots of one view: the gate's D floor of :data:`FLOORS` chosen per held-out source (the
    one whose worst margin to the targets over ``regimes`` x ``shots_list`` on the other sources is
    largest), scored on the held-out one; every floor over all sources; and the copies of one view
    taught as one shot (their mean) at the shipped floor."""
    name = lambda key: f"{'/'.join(key[0])}/{key[1]}_shot"  # noqa: E731
    brief = lambda s: {k: v for k, v in s.items() if k in ("taught_correct", "taught_accepted",  # noqa: E731
                                                           "untaught_rejected", "taught_best_correct")}
    runs = {f: variant_runs(by_source, regimes, shots_list, f, "shots", track) for f in FLOORS}

    def score(f, held):
        return min(_margin(summary([p for src, ps in per.items() if src != held for p in ps]))
                   for per in runs[f].values())

    chosen = {src: max(FLOORS, key=lambda f: score(f, src)) for src in by_source}
    held = {name(key): brief(summary([p for src in by_source for p in runs[chosen[src]][key][src]]))
            for key in runs[FLOORS[0]]}
    mean = variant_runs(by_source, regimes, shots_list, None, "mean", track)
    return {"floor_loso": held | {"floor_chosen": chosen},
            "floor_sweep": {str(f): {name(key): brief(summary([p for ps in per.values() for p in ps]))
                                     for key, per in runs[f].items()} for f in FLOORS},
            "copies_as_their_mean": {name(key): brief(summary([p for ps in per.values() for p in ps]))
                                     for key, per in mean.items()}}


# the gate chosen leave-one-source-out at every number of shots (:func:`gate_loso`): the veto's rule
# (ratio with one negative, growth with the count) and the spread below which a class adds nothing to
# D_gate (``learner.GATE_MIN_EXTENT``, in the prior's D: 0 = every class's shots shrink it, the former rule)
GATE_RULES = ((1.0, 0.0), (1.02, 0.0), (1.03, 0.0), (1.05, 0.0), (1.07, 0.0), (0.95, 0.02), (0.95, 0.03),
              (0.95, 0.04), (0.97, 0.02), (0.97, 0.03), (1.0, 0.01), (1.0, 0.02))
GATE_EXTENTS = (0.0, 0.375)
# the regime the product runs by default (the stream's covisible negatives): the choice's objective
DEFAULT_REGIME = ("stream", "frames+stream_covisible")


def gate_loso(by_source: dict, regimes: dict[tuple[str, str], int], shots_list: list[int],
              track: bool | str = False) -> dict:
    """Per held-out source the (veto rule, one-view extent) of :data:`GATE_RULES` x :data:`GATE_EXTENTS`
    whose worst margin to the targets (taught correct 0.85, accepted 0.90, never-taught rejected
    0.90) over ``shots_list`` on the other sources is largest, chosen on the default regime alone
    (``default``) and on every regime of ``regimes`` together (``all``); scored on the held-out one,
    pooled and per source; and every candidate over all sources."""
    import cbcl_pr_ros.core.learner as learner_mod

    shipped = learner_mod.GATE_MIN_EXTENT
    runs: dict = {}
    try:
        for ext in GATE_EXTENTS:
            learner_mod.GATE_MIN_EXTENT = ext
            for rule in GATE_RULES:
                runs[(rule, ext)] = {(reg, n): {src: [run_source(frs, seed, n, rule, *reg, track) for seed in range(seeds)]
                                                for src, frs in by_source.items()}
                                     for reg, seeds in regimes.items() for n in shots_list}
                print("gate loso", rule, ext, flush=True)
    finally:
        learner_mod.GATE_MIN_EXTENT = shipped
    name = lambda key: f"{'/'.join(key[0])}/{key[1]}_shot"  # noqa: E731
    brief = lambda s: {k: v for k, v in s.items() if k in ("taught_correct", "taught_accepted",  # noqa: E731
                                                           "untaught_rejected", "n_taught_accepted",
                                                           "n_untaught_rejected")}

    def score(cand, held, regs):
        return min(_margin(summary([p for src, ps in runs[cand][(reg, n)].items() if src != held for p in ps]))
                   for reg in regs for n in shots_list)

    out: dict = {}
    for objective, regs in (("default", [DEFAULT_REGIME]), ("all", list(regimes))):
        chosen = {src: max(runs, key=lambda c: score(c, src, regs)) for src in by_source}
        held = {}
        for key in runs[next(iter(runs))]:
            parts = {src: runs[chosen[src]][key][src] for src in by_source}
            s = summary([p for ps in parts.values() for p in ps])
            held[name(key)] = brief(s) | {"ece": s["confidence"].get("ece"),
                                          "wrong_below_right_pairs": s["confidence"].get("wrong_below_right_pairs"),
                                          "per_source": {src: brief(summary(ps)) for src, ps in parts.items()}}
        out[f"chosen_on_{objective}"] = held | {"chosen": {src: [*c[0], c[1]] for src, c in chosen.items()}}
    three = ("taught_correct", "taught_accepted", "untaught_rejected")
    out["sweep_correct_accepted_rejected"] = {
        f"{v}*m^{g}/extent_{ext}": {name(key): [summary([p for ps in per.values() for p in ps]).get(k) for k in three]
                                    for key, per in runs[((v, g), ext)].items()} for (v, g), ext in runs}
    # the trade-off per held-out source in the default regime: each candidate's accepted and rejected there
    out["default_per_source_accepted_rejected"] = {
        f"{v}*m^{g}/extent_{ext}": {f"{n}_shot": {src: [summary(ps).get(k) for k in three[1:]]
                                                  for src, ps in runs[((v, g), ext)][(DEFAULT_REGIME, n)].items()}
                                    for n in shots_list} for (v, g), ext in runs}
    return out


def shots_runs(by_source: dict, seeds: int, shots_list: list[int], protocol: str, negatives: str,
               track: bool | str = False) -> dict:
    """The shipped rule at each number of shots: all sources, and per source."""
    out = {}
    for shots in shots_list:
        per = {(src, seed): run_source(frs, seed, shots, None, protocol, negatives, track)
               for src, frs in by_source.items() for seed in range(seeds)}
        out[f"{shots}_shot"] = summary(list(per.values())) | {
            "per_source": {src: summary([v for (s, _), v in per.items() if s == src]) for src in by_source}}
        print(protocol, negatives, shots, json.dumps({k: v for k, v in out[f"{shots}_shot"].items()
                                                      if k != "per_source"}), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=os.environ.get("CBCL_REAL_RGBD", str(ROOT / "data/real_rgbd")))
    ap.add_argument("--cache", default=str(ROOT / "cache/real_first_shot.pkl"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--stream-seeds", type=int, default=10,
                    help="seeds of the stream protocol (fewer objects per seed)")
    ap.add_argument("--shots", default="1,5,10")
    ap.add_argument("--out", default=str(out_path("first_shot.json")))
    ap.add_argument("--no-loso", action="store_true", help="the shipped rule only")
    ap.add_argument("--calibration-loso", action="store_true",
                    help="also the one-view temperature scale, leave-one-source-out (teaching-frame protocol)")
    ap.add_argument("--confidence-loso", action="store_true",
                    help="also the gate's confidence curve (softness, centre), leave-one-source-out")
    ap.add_argument("--gate-variants", action="store_true",
                    help="also the gate's D floor leave-one-source-out and copies of one view taught as their mean")
    ap.add_argument("--gate-loso", action="store_true",
                    help="also the veto's rule and the one-view extent of D_gate, leave-one-source-out at every "
                         "number of shots")
    ap.add_argument("--benchmark-curves", default="",
                    help="a bench_gate_sets.py --curves output: only curves whose benchmark-set ECE stays within "
                         "BENCHMARK_ECE are candidates of --confidence-loso")
    ap.add_argument("--protocols", default="teaching_frame,stream", help=f"of {', '.join(PLANS)}")
    ap.add_argument("--track", default="product",
                    help="the taught objects' earlier views in the stream: 'product' (as the learner's teach of "
                         "the object in view takes them, its guard), a guard of one_place.GUARDS, or 'none'")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cache = Path(args.cache)
    if cache.exists():
        data = pickle.loads(cache.read_bytes())
    else:
        cache.parent.mkdir(parents=True, exist_ok=True)
        data = build_cache(args.labels, args.frames, cache)
    by_source = defaultdict(list)
    for f in data:
        by_source[f["source"]].append(f)
    import cbcl_pr_ros.core.negatives as neg_mod
    from cbcl_pr_ros.core import open_set
    from cbcl_pr_ros.evaluation.experiments import machine_info
    res: dict = {"benchmark": "bench_first_shot", "machine": machine_info(),
                 "gate_softness": open_set.GATE_SOFTNESS,
                 "loadavg_before": [round(v, 2) for v in os.getloadavg()], "seeds": args.seeds,
                 "stream_seeds": args.stream_seeds,
                 "shipped_rule": [neg_mod.VETO, neg_mod.VETO_GROWTH], "results": {}}
    shots_list = [int(s) for s in args.shots.split(",")]
    from cbcl_pr_ros.core.one_place import GUARD
    track = {"none": False, "product": GUARD}.get(args.track, args.track)
    res["track"] = track
    for protocol in args.protocols.split(","):
        seeds = args.seeds if protocol == "teaching_frame" else args.stream_seeds
        for negatives in (("frames",) if protocol == "teaching_frame" else NEGATIVES):
            part = shots_runs(by_source, seeds, shots_list, protocol, negatives, track)
            if protocol == "teaching_frame":
                res["results"] |= part  # the keys of the earlier runs
            else:
                res["results"][f"{protocol}/{negatives}"] = part
    if args.calibration_loso:
        res["results"]["calibration_loso"] = calibration_loso(by_source, args.seeds, [n for n in shots_list if n > 1])
        print("calibration loso", json.dumps(res["results"]["calibration_loso"]["loso"]), flush=True)
    if args.gate_variants:
        regimes = {reg: args.seeds if reg[0] == "teaching_frame" else args.stream_seeds
                   for reg in LOSO_REGIMES if reg[0] in args.protocols.split(",")}
        res["results"]["gate_variants"] = gate_variants(by_source, regimes, shots_list, track)
        print("gate variants", json.dumps(res["results"]["gate_variants"]["floor_loso"]), flush=True)
    if args.gate_loso:
        regimes = {reg: args.seeds if reg[0] == "teaching_frame" else args.stream_seeds
                   for reg in LOSO_REGIMES if reg[0] in args.protocols.split(",")}
        res["results"]["gate_loso"] = gate_loso(by_source, regimes, shots_list, track)
        print("gate loso", json.dumps({k: {n: {m: w for m, w in v.items() if m != "per_source"}
                                            if isinstance(v, dict) else v for n, v in d.items()}
                                        for k, d in res["results"]["gate_loso"].items() if k.startswith("chosen")}),
              flush=True)
    if args.confidence_loso:
        regimes = {reg: args.seeds if reg[0] == "teaching_frame" else args.stream_seeds
                   for reg in LOSO_REGIMES if reg[0] in args.protocols.split(",")}
        bench_sets = benchmark_curves(args.benchmark_curves) if args.benchmark_curves else None
        res["results"]["confidence_loso"] = confidence_loso(by_source, regimes, shots_list, track, bench_sets)
        print("confidence loso", json.dumps(res["results"]["confidence_loso"]["loso"]), flush=True)
    if not args.no_loso:
        res["results"] |= loso(by_source, {reg: args.seeds if reg[0] == "teaching_frame" else args.stream_seeds
                                           for reg in LOSO_REGIMES if reg[0] in args.protocols.split(",")}, track)
        print("loso", json.dumps(res["results"]["1_shot_loso"]), flush=True)
    if "stream" in args.protocols.split(","):
        res["results"]["track_switch_guard"] = switch_guard(by_source, args.stream_seeds)
        print("track switch guard", json.dumps(res["results"]["track_switch_guard"]), flush=True)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
