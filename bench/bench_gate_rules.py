"""Open-set gate rules compared offline on captured gate inputs (``gate_capture.py``): real set and stand-in.

A rule maps (a run's centroids, D_gate, stored negatives, a classified vector and its best class) to
known / unknown, so a rule costs no learner run. The gate's inputs do not depend on the rule (the
head picks the best class; the negatives kept are the learner's), so the shipped rule here gives the
figures of ``bench_first_shot.py`` (with the one-place rule over a frame's objects turned off:
``one_place.TWIN`` None; these rules judge each vector alone) and ``bench_gate_sets.py`` exactly. A variant is a family of
rules (its constants); per held-out real source the rule is chosen on the other sources (the
largest never-taught rejection averaged over the teaching-frame protocol and the stream protocol
with ``frames`` and ``frames+stream_covisible`` negatives at 1 shot, among the rules with >= 0.90
taught accepted in each and, with the stream's negatives, at 5 and 10 shots too) and scored on it.
The stand-in (rendered objects taught, 128 real-table crops as negatives, a fourth table's crops
to reject: ``bench_gate_sets.py --sets rendered-objects --negatives-from real --other-from real``)
is scored for every rule a fold chose. The benchmark sets (each taught with the other set's test
images to reject and 128 real-table crops as negatives, ``bench_gate_sets.py --negatives-from
real``), where captured: per set, the variant's rule chosen on the other set (:func:`sets_cross`),
and why the shipped rule refuses what it refuses (:func:`diagnose`).

    source scripts/env.sh && python -P bench/gate_capture.py        # -> cache/gate_capture.pkl (minutes)
    python -P bench/bench_gate_rules.py                              # -> runs/bench/gate_rules.json
    python -P bench/gate_capture.py --what benchmark_sets --out cache/gate_capture_sets.pkl
    python -P bench/bench_gate_rules.py --capture cache/gate_capture.pkl cache/gate_capture_sets.pkl
"""
from __future__ import annotations

import argparse
import json
import os
import time
import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _d(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return np.sqrt(np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T, 0.0))


def prepare(run: dict) -> dict:
    """Distances every rule needs, once per run: each vector to its best class (``dc``) and to every
    negative (``dxn``), each class to every negative (``dcn``); per class its shots' extent (RMS
    distance to their mean, in D_gate) and its centroids' views (chained within ``SAME_VIEW``)."""
    from cbcl_pr_ros.core.calibration import SAME_VIEW, view_groups

    D = run["D"]
    cents = run["cents"]
    neg = run["neg"].astype(np.float64)
    x = run["x"].astype(np.float64)
    best = run["best"]
    dc = np.array([_d(x[i:i + 1], cents[b]).min() for i, b in enumerate(best)]) if len(x) else np.zeros(0)
    dxn = _d(x, neg) if len(neg) else np.full((len(x), 0), np.inf)
    dcn = np.stack([_d(c, neg).min(axis=0) for c in cents]) if len(neg) else np.zeros((len(cents), 0))
    views = np.array([len(view_groups(c, SAME_VIEW * D)) for c in cents])
    return dict(D=D, factor=run["factor"], dc=dc, dxn=dxn, dcn=dcn, best=best, kind=run["kind"], views=views,
                m=len(neg), extent=np.asarray(run["extent"]))


def known(p: dict, rule: dict) -> np.ndarray:
    """The gate's answer under ``rule``. Radius (``radius``): ``all`` (every class gets the negatives'
    quantile radius from 20 negatives), ``off``, ``several_views`` (only classes whose shots reach
    ``extent`` D_gate from their mean: the shipped rule) or ``centroid_views`` (only classes whose
    centroids make two views); ``one_view_factor``: a one-view class's radius ``f D_gate`` in place
    of ``1.3 D_gate``. Veto: ``veto * m ** growth`` (``local_m``: ``m`` counts only the negatives
    within ``local_m D_gate`` of the class; ``one_view_veto``: a one-view class's own ratio);
    ``side``: a negative vetoes only a vector nearer to it than ``side`` times the class's distance to
    it; ``ball``: also every vector within ``ball`` times that distance of a negative; ``reach``: a
    negative vetoes only vectors within ``reach`` D_gate of it; ``near``: only a negative within ``near``
    D_gate of the class vetoes it."""
    D, dc, best = p["D"], p["dc"], p["best"]
    base = p["factor"] * D
    nc = len(p["views"])
    radii = np.full(nc, base)
    mode = rule.get("radius", "all")
    one_view = p["extent"] < rule.get("extent", 0.375)
    if p["m"] >= 20 and mode != "off":
        for k in range(nc):
            if (mode == "several_views" and one_view[k]) or (mode == "centroid_views" and p["views"][k] < 2):
                continue
            r = float(np.quantile(p["dcn"][k], 0.1))
            radii[k] = min(base, max(0.5 * D, 0.95 * r))
    if rule.get("one_view_factor"):
        radii = np.where(one_view, np.minimum(radii, rule["one_view_factor"] * D), radii)
    ok = dc < radii[best]
    if p["m"]:
        m = np.full(len(dc), float(p["m"]))
        if rule.get("local_m"):
            m = np.maximum(1.0, (p["dcn"][best] < rule["local_m"] * D).sum(axis=1))
        v = rule.get("veto", 1.02) * np.power(m, rule.get("growth", 0.0))
        if rule.get("one_view_veto"):
            v = np.where(one_view[best], rule["one_view_veto"], v)
        dxn = p["dxn"]
        vetoing = dc[:, None] > v[:, None] * dxn
        if rule.get("ball"):
            vetoing |= dxn < rule["ball"] * p["dcn"][best]
        if rule.get("near"):
            vetoing &= p["dcn"][best] < rule["near"] * D
        if rule.get("reach"):
            vetoing &= dxn < rule["reach"] * D
        if rule.get("side"):
            vetoing &= dxn < rule["side"] * p["dcn"][best]
        ok &= ~vetoing.any(axis=1)
    return ok


def figures(ps: list[dict], rule: dict) -> dict:
    acc, cor, rej, part = [], [], [], {}
    for p in ps:
        k = known(p, rule)
        t = np.isin(p["kind"], ("taught_right", "taught_wrong"))
        acc += k[t].tolist()
        cor += (k & (p["kind"] == "taught_right"))[t].tolist()
        rej += (~k[~t]).tolist()
        for name in np.unique(p["kind"][~t]):
            part.setdefault(name, []).extend((~k[p["kind"] == name]).tolist())
    f = lambda v: round(float(np.mean(v)), 3) if len(v) else float("nan")  # noqa: E731
    return {"correct": f(cor), "accepted": f(acc), "rejected": f(rej), **{k: f(v) for k, v in part.items()},
            "n_taught": len(acc), "n_untaught": len(rej)}


def gate_sets_figures(runs: dict, rule: dict) -> dict:
    """Stand-in: accepted taught and rejected other, first increment and mean over increments."""
    first_acc, first_rej, mean_acc, mean_rej = [], [], [], []
    for seed, incs in runs.items():
        a, r = [], []
        for p in incs:
            k = known(p, rule)
            t = p["kind"] != "other"
            a.append(k[t].mean())
            r.append((~k[~t]).mean())
        first_acc.append(a[0]), first_rej.append(r[0]), mean_acc.append(np.mean(a)), mean_rej.append(np.mean(r))
    return {"acc_first": round(float(np.mean(first_acc)), 3), "acc_mean": round(float(np.mean(mean_acc)), 3),
            "rej_first": round(float(np.mean(first_rej)), 3), "rej_mean": round(float(np.mean(mean_rej)), 3)}


def load(path: str) -> dict:
    """The capture with every rule's distances computed once."""
    cap = pickle.loads(Path(path).read_bytes())
    out = {}
    for key, runs in cap.items():
        if key[0] == "first_shot":
            out[key] = {k: prepare(r) for k, r in runs.items() if r is not None and len(r["x"])}
        else:
            out[key] = {s: [prepare(p) for p in incs] for s, incs in runs.items()}
    return out


REGIMES = (("teaching_frame", "frames"), ("stream", "frames"), ("stream", "frames+stream_covisible"))


def _held_figures(prep: dict, reg: tuple[str, str], shots: int, rule_of: dict) -> dict:
    acc, cor, rej = [], [], []
    for (src, _), p in prep[("first_shot", *reg, shots)].items():
        k = known(p, rule_of[src])
        t = np.isin(p["kind"], ("taught_right", "taught_wrong"))
        acc += k[t].tolist()
        cor += (k & (p["kind"] == "taught_right"))[t].tolist()
        rej += (~k[~t]).tolist()
    return {"correct": round(float(np.mean(cor)), 3), "accepted": round(float(np.mean(acc)), 3),
            "rejected": round(float(np.mean(rej)), 3)}


def loso(prep: dict, rules: list[dict], shots_check: tuple[int, ...] = (1, 5, 10), target: float = 0.90) -> dict:
    """Per held-out source, the rule of ``rules`` chosen on the other sources (the largest never-taught
    rejection averaged over :data:`REGIMES` at 1 shot, among the rules with >= ``target`` taught
    accepted in every regime and, for the stream with its covisible negatives, at every number of
    shots in ``shots_check``; else the largest smallest acceptance), scored on the held-out one."""
    sources = sorted({src for key, runs in prep.items() if key[0] == "first_shot" for src, _ in runs})

    def others(reg, shots, held):
        return [p for (src, _), p in prep[("first_shot", *reg, shots)].items() if src != held]

    def score(rule, held):
        rej, acc = [], []
        for reg in REGIMES:
            f = figures(others(reg, 1, held), rule)
            rej.append(f["rejected"])
            acc.append(f["accepted"])
        acc += [figures(others(REGIMES[-1], n, held), rule)["accepted"] for n in shots_check if n != 1]
        return (1, float(np.mean(rej))) if min(acc) >= target else (0, min(acc))

    chosen = {src: rules[max(range(len(rules)), key=lambda i: score(rules[i], src))] for src in sources}
    out: dict = {"chosen": chosen}
    for reg in REGIMES:
        for n in (1, 5, 10):
            out["/".join(reg) + f"/{n}_shot"] = _held_figures(prep, reg, n, chosen)
    return out


def _family(**grid) -> list[dict]:
    keys = list(grid)
    rows = [{}]
    for k in keys:
        rows = [r | {k: v} for r in rows for v in (grid[k] if isinstance(grid[k], (list, tuple)) else [grid[k]])]
    return rows


EXTENT = {"radius": "several_views", "extent": 0.375}
# the variants compared: each a family of rules whose constants are chosen leave-one-source-out
VARIANTS = {
    "before: radius for every class, veto 1.02": [{"radius": "all"}],
    "shipped: radius only with several views, veto 1.02": [dict(EXTENT)],
    "radius for every class, veto v * m^g": _family(radius="all", veto=[0.93, 0.95, 0.97, 1.0, 1.02, 1.04, 1.06, 1.08],
                                                    growth=[0, 0.01, 0.02, 0.03, 0.04]),
    "radius only with several views, fixed veto v": _family(**EXTENT, veto=[0.95, 0.97, 1.0, 1.02, 1.03, 1.04, 1.05,
                                                                           1.06, 1.08, 1.1]),
    "radius only with several views, veto v * m^g": _family(**EXTENT, veto=[0.93, 0.95, 0.97, 1.0, 1.02, 1.04, 1.06,
                                                                           1.08], growth=[0, 0.01, 0.02, 0.03, 0.04]),
    "radius off, veto v * m^g": _family(radius="off", veto=[0.93, 0.95, 0.97, 1.0, 1.02, 1.04, 1.06, 1.08],
                                        growth=[0, 0.01, 0.02, 0.03, 0.04]),
    "m counted within h D of the class": _family(**EXTENT, veto=[0.93, 0.95, 0.97, 1.0], growth=[0.02, 0.03, 0.04, 0.05],
                                                 local_m=[1.2, 1.3, 1.4]),
    "veto only on the negative's side (d(x,n) < s d(c,n))": _family(**EXTENT, veto=[1.02, 1.04, 1.06, 1.1],
                                                                   side=[0.9, 1.0]),
    "and a ball around each negative (d(x,n) < b d(c,n))": _family(**EXTENT, veto=[1.02, 1.06, 1.1],
                                                                  ball=[0.4, 0.5, 0.6]),
    "radius only with two centroid views, veto 1.02": [{"radius": "centroid_views"}],
    "a negative vetoes only within r D of it": _family(**EXTENT, veto=[1.02, 1.04, 1.06, 1.1],
                                                      reach=[0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]),
    "only negatives within h D of the class veto it": _family(**EXTENT, veto=[1.02, 1.04, 1.06],
                                                             near=[1.1, 1.2, 1.3, 1.4, 1.5]),
    "one view: radius f D and veto v1, several views as shipped": _family(
        **EXTENT, one_view_veto=[1.02, 1.04, 1.06, 1.08, 1.1, 1.12, 1.14], one_view_factor=[1.1, 1.15, 1.2, 1.25, 1.3]),
    "one view: radius f D": _family(**EXTENT, veto=[1.02, 1.04, 1.06, 1.08, 1.1, 1.12],
                                    one_view_factor=[1.1, 1.15, 1.2, 1.25, 1.3]),
}


BENCHMARK_SETS = ("fashion-mnist", "rendered-objects")


def sets_cross(prep: dict, rules: list[dict], reject: float = 0.90) -> dict:
    """Per benchmark set (taught, the other set's test images to reject, real-table negatives), the
    rule of ``rules`` chosen on the *other* benchmark set (the largest smallest first-increment
    acceptance over 1, 5 and 10 shots among the rules rejecting >= ``reject`` of the other set in
    every increment's mean and first; else the largest smallest rejection) and scored on this one."""
    have = [n for n in BENCHMARK_SETS if all(("gate_sets", n, "set", k) in prep for k in (1, 5, 10))]

    def fig(name, rule):
        return {f"{k}_shot": gate_sets_figures(prep[("gate_sets", name, "set", k)], rule) for k in (1, 5, 10)}

    def score(name, rule):
        f = fig(name, rule)
        rej = min(min(v["rej_first"], v["rej_mean"]) for v in f.values())
        acc = min(v["acc_first"] for v in f.values())
        return (1, acc) if rej >= reject else (0, rej)

    out: dict = {}
    for name in have:
        chooser = [n for n in have if n != name]
        if not chooser:
            continue
        rule = rules[max(range(len(rules)), key=lambda i: score(chooser[0], rules[i]))]
        out[name] = {"rule": rule, "chosen_on": chooser[0]} | fig(name, rule)
    return out


def joint(prep: dict, rules: list[dict], chooser: str, scored: str, target: float = 0.90,
          set_target: float = 0.95, reject: float = 0.90) -> dict:
    """Per held-out real source, the rule of ``rules`` chosen on the other sources (as :func:`loso`)
    *and* the benchmark set ``chooser`` (>= ``set_target`` of its taught images accepted in the first
    increment at 1, 5 and 10 shots, >= ``reject`` of the other set rejected): among the rules meeting
    both, the most never-taught rejected; else the largest smallest acceptance. Scored on the
    held-out source and on the benchmark set ``scored`` (its figures averaged over the folds' rules)."""
    sources = sorted({src for key, runs in prep.items() if key[0] == "first_shot" for src, _ in runs})

    def real_score(rule, held):
        rej, acc = [], []
        for reg in REGIMES:
            f = figures([p for (src, _), p in prep[("first_shot", *reg, 1)].items() if src != held], rule)
            rej.append(f["rejected"])
            acc.append(f["accepted"])
        acc += [figures([p for (src, _), p in prep[("first_shot", *REGIMES[-1], n)].items() if src != held],
                        rule)["accepted"] for n in (5, 10)]
        return min(acc), float(np.mean(rej))

    set_fig = {json.dumps(r, sort_keys=True): {n: gate_sets_figures(prep[("gate_sets", chooser, "set", n)], r)
                                               for n in (1, 5, 10)} for r in rules}

    def score(rule, held):
        acc, rej = real_score(rule, held)
        f = set_fig[json.dumps(rule, sort_keys=True)]
        set_ok = all(v["acc_first"] >= set_target and min(v["rej_first"], v["rej_mean"]) >= reject for v in f.values())
        set_acc = min(v["acc_first"] for v in f.values())
        both = acc >= target and set_ok
        return (int(acc >= target) + int(set_ok), rej if both else min(acc, set_acc))

    chosen = {src: rules[max(range(len(rules)), key=lambda i: score(rules[i], src))] for src in sources}
    out: dict = {"chosen_on": chooser, "chosen": chosen}
    for reg in REGIMES:
        for n in (1, 5, 10):
            out["/".join(reg) + f"/{n}_shot"] = _held_figures(prep, reg, n, chosen)
    figs = [{n: gate_sets_figures(prep[("gate_sets", scored, "set", n)], r) for n in (1, 5, 10)} for r in chosen.values()]
    out[scored] = {f"{n}_shot": {k: round(float(np.mean([f[n][k] for f in figs])), 3) for k in figs[0][n]}
                   for n in (1, 5, 10)}
    return out


def diagnose(incs_by_seed: dict, rule: dict | None = None) -> dict:
    """Why taught images are refused and other-set images rejected under ``rule`` (the shipped one by
    default), first increments: refused by the radius or by the veto alone; for the veto, the taught
    image's distance to its class and to the vetoing (nearest) negative, that negative's distance to
    the class (all in D_gate), how far over the veto's bound it lies, and how many distinct
    negatives do the vetoing."""
    rule = rule or dict(EXTENT)
    rows = {"taught": [], "other": []}
    negs: set = set()
    for seed, incs in incs_by_seed.items():
        p = incs[0]
        if not p["m"]:
            raise ValueError("diagnose needs a capture with negatives")
        D = p["D"]
        radius_only = known(p, rule | {"veto": 1e9})
        k = known(p, rule)
        near = p["dxn"].argmin(axis=1)
        dxn = p["dxn"][np.arange(len(near)), near]
        for i in range(len(k)):
            part = "other" if p["kind"][i] == "other" else "taught"
            by = "accepted" if k[i] else ("radius" if not radius_only[i] else "veto")
            rows[part].append((by, p["dc"][i] / D, dxn[i] / D, p["dcn"][p["best"][i], near[i]] / D,
                               p["dc"][i] / (rule.get("veto", 1.02) * dxn[i])))
            if part == "taught" and by == "veto":
                negs.add((seed, int(near[i])))
    out = {}
    for part, rs in rows.items():
        by = np.array([r[0] for r in rs])
        v = np.array([r[1:] for r in rs if r[0] == "veto"]).reshape(-1, 4)
        q = lambda a: [round(float(x), 3) for x in np.quantile(a, (0.05, 0.5, 0.95))] if len(a) else []  # noqa: E731
        out[part] = {"n": len(rs), **{f"share_{b}": round(float(np.mean(by == b)), 3) for b in ("accepted", "radius", "veto")},
                     "vetoed_class_distance_p5_50_95": q(v[:, 0]), "vetoed_negative_distance_p5_50_95": q(v[:, 1]),
                     "vetoing_negative_to_class_p5_50_95": q(v[:, 2]), "vetoed_over_bound_p5_50_95": q(v[:, 3]),
                     "vetoed_within_10pct_of_bound": round(float(np.mean(v[:, 3] < 1.1)), 3) if len(v) else None}
    out["taught"]["distinct_vetoing_negatives"] = len(negs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", nargs="+", default=[str(ROOT / "cache/gate_capture.pkl")],
                    help="one or more captures (gate_capture.py --out), merged")
    ap.add_argument("--out", default=str(ROOT / "runs/bench/gate_rules.json"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    prep = {k: v for path in args.capture for k, v in load(path).items()}
    res: dict = {"benchmark": "bench_gate_rules", "loadavg_before": [round(v, 2) for v in os.getloadavg()],
                 "variants": {}}
    for name, rules in VARIANTS.items():
        r = loso(prep, rules)
        picked = [json.loads(c) for c in sorted({json.dumps(v, sort_keys=True) for v in r["chosen"].values()})]
        r["chosen"] = {src: rule for src, rule in r["chosen"].items()}
        stand = ("gate_sets", "rendered-objects", "real")
        r["stand_in"] = [{"rule": rule} | {f"{n}_shot": gate_sets_figures(prep[(*stand, n)], rule) for n in (1, 5, 10)}
                         for rule in picked if all((*stand, n) in prep for n in (1, 5, 10))]
        r["benchmark_sets"] = sets_cross(prep, rules)
        if all(("gate_sets", n, "set", k) in prep for n in BENCHMARK_SETS for k in (1, 5, 10)):
            r["joint"] = [joint(prep, rules, a, b) for a, b in (BENCHMARK_SETS, BENCHMARK_SETS[::-1])]
        res["variants"][name] = r
        print(name, json.dumps({k: v for k, v in r.items() if k.endswith("_shot") or k == "benchmark_sets"}), flush=True)
    res["why_refused"] = {f"{n}/{k}_shot": diagnose(prep[("gate_sets", n, "set", k)])
                          for n in BENCHMARK_SETS for k in (1, 5, 10) if ("gate_sets", n, "set", k) in prep}
    print("why_refused", json.dumps(res["why_refused"]), flush=True)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
