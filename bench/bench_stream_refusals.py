"""Why taught objects are refused on real tables: each refused taught answer traced to what refused it.

``bench_first_shot.py``'s protocols and learners (``taught_learner``), the shipped gate. For every
taught object's answer that is not *known*: refused by the one-place rule (known alone, unknown beside
the objects of its frame: which object kept the class, and whether it is the taught object's own
name), by the radius (farther than ``1.3 D_gate`` from its class), or by the veto (nearer a stored
negative than its class over the veto ratio). For a veto, the vetoing negative is traced to the
vector it was offered as (the teaching frame's other objects or the stream's, with the object's
name), and measured: its distance to the taught object's shot, to the refused view, and whether the
shot would claim it as itself (within ``one_place.TWIN`` times the twin unit, the distance within which
two objects of one frame may both be the class). Also the answers whose best class is wrong, and
per answer how the same view fared with 1, 5 and 10 shots (why more shots do not raise acceptance):
``what_moved`` lists, for each view whose answer turned, the gate's D, its distance to the class's
nearest centroid, its radius and the veto's bound at 1 and at n shots. ``--track product`` (the
default) teaches the taught objects' earlier stream views as ``bench_first_shot.py`` does.

    source scripts/env.sh && python -P bench/bench_stream_refusals.py   # -> runs/bench/stream_refusals.json
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_common import out_path  # noqa: E402
from bench_first_shot import taught_learner  # noqa: E402


def _offered(frs: list[dict], plan, negatives: str) -> list[tuple[str, str, str, np.ndarray]]:
    """Every vector ``taught_learner`` offered as a negative: (origin, frame id, name, raw vector)."""
    by_id = {f["id"]: f for f in frs}
    out = []
    for fid in sorted(set(plan.teach_frame.values())):
        f = by_id[fid]
        out += [("teaching_frame", fid, n, f["obj"][i]) for i, n in enumerate(f["names"]) if n not in plan.taught]
    for f in plan.stream:
        if negatives != "frames" and (negatives != "frames+stream_covisible" or plan.taught & set(f["names"])):
            out += [("stream", f["id"], n, f["obj"][i]) for i, n in enumerate(f["names"])
                    if negatives == "frames+stream_all" or n not in plan.taught]
    return out


def trace(frs: list[dict], seed: int, shots: int, protocol: str, negatives: str,
          track: bool | str = False) -> list[dict]:
    """One table, one seed: a row per taught answer with what decided it (``track`` as
    ``taught_learner``'s)."""
    from cbcl_pr_ros.core import one_place

    built = taught_learner(frs, seed, shots, protocol, negatives, track)
    if built is None:
        return []
    plan, learner, _, _ = built
    gate = learner._served.gate
    D = gate.distance_threshold
    unit = max(D, learner.distance_prior_ or 0.0)
    twin = one_place.TWIN * unit
    classes = list(learner._served.classes)
    neg = np.asarray(learner.negatives_.vectors, np.float64)
    offered = _offered(frs, plan, negatives)
    off_x = learner.transform(np.stack([o[3] for o in offered])) if offered else np.zeros((0, neg.shape[1]))
    # each stored negative traced to the offered vector it is (float16 rounding apart)
    src_of = [int(np.argmin(((off_x - v) ** 2).sum(1))) for v in neg] if len(neg) else []
    by_id = {f["id"]: f for f in frs}
    shot_x = {}
    for name in plan.taught:
        f = by_id[plan.teach_frame[name]]
        shot_x[name] = learner.transform(f["obj"][f["names"].index(name)][None])[0]
    rows = []
    for f in plan.test:
        alone = learner.predict(f["obj"], top_k=1)
        together = learner.seen_together(f["obj"], alone)
        xt = learner.transform(f["obj"])
        for i, name in enumerate(f["names"]):
            if name not in plan.taught or f["id"] == plan.teach_frame[name]:
                continue
            p, q = alone[i], together[i]
            c = classes.index(p.nearest_label)
            dc = float(np.sqrt(((np.asarray(gate.centroids[c], np.float64) - xt[i]) ** 2).sum(1).min()))
            radius = float(gate.radii(np.array([c]))[0])
            row = {"source": f["source"], "seed": seed, "frame": f["id"], "index": i, "name": name, "best_right": p.nearest_label == name,
                   "known_alone": bool(p.known), "known": bool(q.known), "d_class": dc / D, "radius": radius / D,
                   "shot_to_view": float(np.linalg.norm(xt[i] - shot_x[name])) / D,
                   # absolute: what the answer was judged by, to compare one view taught 1, 5 or 10 times
                   "abs": {"D_gate": D, "d_class": dc, "radius": radius, "global_radius": float(gate.radius),
                           "veto_bound": float(gate.veto) * float(np.sqrt(((neg - xt[i]) ** 2).sum(1)).min())
                           if len(neg) else float("inf"), "clusters": len(gate.centroids[c])}}
            if len(neg):
                dn = np.sqrt(((neg - xt[i]) ** 2).sum(1))
                j = int(np.argmin(dn))
                o = offered[src_of[j]]
                row |= {"veto_over": dc / (gate.veto * float(dn[j])), "neg_origin": o[0], "neg_frame": o[1],
                        "neg_name": o[2], "neg_to_view": float(dn[j]) / D,
                        "neg_to_shot": float(np.linalg.norm(neg[j] - shot_x[name])) / D,
                        "neg_claimed_by_shot": bool(np.linalg.norm(neg[j] - shot_x[name]) <= twin),
                        "n_vetoing": int((dc > gate.veto * dn).sum()), "twin_unit": twin / D}
                if o[2] in f["names"]:  # the negative's own object stands in this frame too
                    y = xt[f["names"].index(o[2])]
                    row["neg_object_here_to_neg"] = float(np.linalg.norm(y - neg[j])) / D
            if p.known and not q.known:  # the one-place rule: which object of the frame kept the class
                keep = [k for k, r in enumerate(together) if r.known and r.label == p.label]
                row["kept_by"] = f["names"][keep[0]] if keep else None
            if not q.known:
                row["refused_by"] = ("one_place" if p.known else
                                     "radius+veto" if dc >= radius and row.get("veto_over", 0) >= 1 else
                                     "radius" if dc >= radius else "veto")
            rows.append(row)
    return rows


def report(rows: list[dict]) -> dict:
    n = len(rows)
    refused = [r for r in rows if not r["known"]]
    vet = [r for r in refused if "veto" in r["refused_by"]]
    q = lambda a: [round(float(x), 3) for x in np.quantile(a, (0.05, 0.5, 0.95))] if len(a) else []  # noqa: E731
    return {"taught_answers": n, "accepted": round(1 - len(refused) / max(n, 1), 3),
            "correct": round(sum(r["known"] and r["best_right"] for r in rows) / max(n, 1), 3),
            "refused": len(refused), "refused_by": dict(Counter(r["refused_by"] for r in refused)),
            "refused_best_wrong": sum(not r["best_right"] for r in refused),
            "veto_negative_origin": dict(Counter(r["neg_origin"] for r in vet)),
            "veto_negative_claimed_by_shot": sum(r["neg_claimed_by_shot"] for r in vet),
            "veto_negative_to_shot_p5_50_95": q([r["neg_to_shot"] for r in vet]),
            "veto_negative_to_view_p5_50_95": q([r["neg_to_view"] for r in vet]),
            "veto_over_bound_p5_50_95": q([r["veto_over"] for r in vet]),
            "veto_n_vetoing_p5_50_95": q([r["n_vetoing"] for r in vet]),
            "veto_negative_object_in_frame": sum("neg_object_here_to_neg" in r for r in vet),
            "veto_negative_object_nearer_it_than_view": sum(r.get("neg_object_here_to_neg", np.inf) < r["neg_to_view"]
                                                            for r in vet),
            "veto_negative_object_here_to_negative_p5_50_95": q([r["neg_object_here_to_neg"] for r in vet
                                                                 if "neg_object_here_to_neg" in r]),
            "one_place_kept_by_own_name": sum(r.get("kept_by") == r["name"] for r in refused),
            "refused_shot_to_view_p5_50_95": q([r["shot_to_view"] for r in refused]),
            "accepted_shot_to_view_p5_50_95": q([r["shot_to_view"] for r in rows if r["known"]]),
            "per_source_refused": dict(Counter(r["source"] for r in refused)),
            "per_source_answers": dict(Counter(r["source"] for r in rows)),
            "vetoing_pairs": dict(Counter(f"{r['name']} <- {r['neg_name']} ({r['neg_origin']})" for r in vet).most_common(30)),
            "one_place_pairs": dict(Counter(f"{r['name']} <- {r.get('kept_by')}" for r in refused
                                            if r["refused_by"] == "one_place").most_common(20))}


def what_moved(pairs: list[tuple[dict, dict]]) -> dict:
    """For the views whose answer turned between 1 and n shots (accepted -> refused and back), which of
    the quantities the gate judged them by moved: the gate's D (its global radius is 1.3 D), the
    distance to the class's nearest centroid (copies pull a cluster's count-weighted mean towards
    their view), the class's own radius (taken from the negatives once its shots spread over several
    views), the best class. Distances in absolute units, 1 shot -> n shots, one line per view."""
    out: dict = {"lost": [], "gained": []}
    for a, b in pairs:
        fa, fb = a["abs"], b["abs"]
        moved = [m for m, hit in (
            ("D_gate down", fb["D_gate"] < fa["D_gate"] - 1e-6),
            ("centroid farther", fb["d_class"] > fa["d_class"] + 1e-6),
            ("centroid nearer", fb["d_class"] < fa["d_class"] - 1e-6),
            ("own radius", fb["radius"] < fb["global_radius"] - 1e-9),
            ("best class changed", a["best_right"] != b["best_right"])) if hit]
        line = (f"{b['source']}/{b['seed']}/{b['name']}: {b.get('refused_by', 'accepted')}; D {fa['D_gate']:.3f}->"
                f"{fb['D_gate']:.3f}, d {fa['d_class']:.3f}->{fb['d_class']:.3f}, radius {fa['radius']:.3f}->"
                f"{fb['radius']:.3f}, veto bound {fa['veto_bound']:.3f}->{fb['veto_bound']:.3f}; " + ", ".join(moved))
        out["lost" if a["known"] else "gained"].append(line)
    out["counts"] = dict(Counter(m for a, b in pairs if a["known"] for m in
                                 (["D_gate down"] if b["abs"]["D_gate"] < a["abs"]["D_gate"] - 1e-6 else [])
                                 + (["centroid farther"] if b["abs"]["d_class"] > a["abs"]["d_class"] + 1e-6 else [])
                                 + (["own radius"] if b["abs"]["radius"] < b["abs"]["global_radius"] - 1e-9 else [])))
    return out


REGIMES = (("teaching_frame", "frames", 5), ("stream", "frames", 10), ("stream", "frames+stream_covisible", 10))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / "cache/real_first_shot.pkl"))
    ap.add_argument("--out", default=str(out_path("stream_refusals.json")))
    ap.add_argument("--rows", default="", help="also write every row (a JSON list) here")
    ap.add_argument("--track", default="product",
                    help="the taught objects' earlier stream views, as bench_first_shot.py's --track")
    ap.add_argument("--regimes", default="all", help="'all' or protocol/negatives[,...] of REGIMES")
    args = ap.parse_args()
    from cbcl_pr_ros.core.one_place import GUARD
    track = {"none": False, "product": GUARD}.get(args.track, args.track)
    regimes = [r for r in REGIMES if args.regimes == "all" or f"{r[0]}/{r[1]}" in args.regimes.split(",")]
    t0 = time.perf_counter()
    by_source = defaultdict(list)
    for f in pickle.loads(Path(args.cache).read_bytes()):
        by_source[f["source"]].append(f)
    res: dict = {"benchmark": "bench_stream_refusals", "loadavg_before": [round(v, 2) for v in os.getloadavg()],
                 "track": track, "results": {}}
    every = {}
    for protocol, negatives, seeds in regimes:
        for shots in (1, 5, 10):
            rows = [r for src, frs in by_source.items() for s in range(seeds)
                    for r in trace(frs, s, shots, protocol, negatives, track)]
            key = f"{protocol}/{negatives}/{shots}_shot"
            every[key] = rows
            res["results"][key] = report(rows)
            print(key, json.dumps({k: v for k, v in res["results"][key].items() if not k.endswith("pairs")}), flush=True)
    # the same views at 1, 5 and 10 shots: which turn refused or accepted, and which quantity moved
    for protocol, negatives, _ in regimes:
        base = f"{protocol}/{negatives}"
        k1 = {(r["source"], r["seed"], r["frame"], r["index"]): r for r in every[f"{base}/1_shot"]}
        for n in (5, 10):
            kn = {(r["source"], r["seed"], r["frame"], r["index"]): r for r in every[f"{base}/{n}_shot"]}
            res["results"][f"{base}/1_vs_{n}_shot"] = {
                "refused_at_1_accepted_at_n": sum(not k1[k]["known"] and r["known"] for k, r in kn.items()),
                "accepted_at_1_refused_at_n": sum(k1[k]["known"] and not r["known"] for k, r in kn.items()),
                "newly_refused_by": dict(Counter(r["refused_by"] for k, r in kn.items()
                                                 if k1[k]["known"] and not r["known"])),
                "what_moved": what_moved([(k1[k], r) for k, r in kn.items() if k1[k]["known"] != r["known"]])}
    # what the stream's negatives add: taught views refused with them and accepted with the teaching frames' alone
    for n in ((1, 5, 10) if all(f"stream/{g}/1_shot" in every for g in ("frames", "frames+stream_covisible")) else ()):
        alone = {(r["source"], r["seed"], r["frame"], r["index"]): r["known"] for r in every[f"stream/frames/{n}_shot"]}
        more = [r for r in every[f"stream/frames+stream_covisible/{n}_shot"]
                if not r["known"] and alone[(r["source"], r["seed"], r["frame"], r["index"])]]
        res["results"][f"stream/refused_only_with_the_stream/{n}_shot"] = {
            "refused": len(more), "accepted_only_with_the_stream": sum(
                r["known"] and not alone[(r["source"], r["seed"], r["frame"], r["index"])]
                for r in every[f"stream/frames+stream_covisible/{n}_shot"]),
            "by": [f"{r['refused_by']}: {r['name']} <- {r.get('neg_name')} ({r.get('neg_origin')})" for r in more]}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    if args.rows:
        Path(args.rows).write_text(json.dumps(every, default=float) + "\n")


if __name__ == "__main__":
    main()
