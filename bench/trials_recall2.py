"""Issue 20 outcome 2, second round: the trial switches of proposals.py (environment variables, this
commit only) on the real set under RANSAC seeds 0-3. Writes bench/results/real_proposal_trials.json.
Run: source scripts/env.sh && python -P bench/trials_recall2.py --frames DIR"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import cv2

from cbcl_pr_ros.evaluation.real_rgbd import ProposalScore, load_frames, score_proposals
from cbcl_pr_ros.perception import ProposalConfig, propose

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {  # name: (environment, ProposalConfig overrides, what it is)
    "main": ({}, {}, "as on main"),
    "trimmed_noise_k12": ({"NOISE_MODE": "trim"}, {}, "noise = MAD of the readings within 4 sigma of the plane, 3 iterations"),
    "trimmed_noise_k14": ({"NOISE_MODE": "trim"}, {"noise_k": 14}, ""),
    "z2_noise_k12": ({"NOISE_MODE": "depth2"}, {}, "per pixel sigma = c z^2, c robust (trimmed) from the table readings"),
    "z2_noise_k14": ({"NOISE_MODE": "depth2"}, {"noise_k": 14}, ""),
    "depth_band_noise_k12": ({"NOISE_MODE": "zbins", "ZLEVEL": "0"}, {}, "sigma measured in 8 depth bands of the table readings, interpolated per pixel"),
    "depth_band_level_noise_k12": ({"NOISE_MODE": "zbins", "ZLEVEL": "1"}, {}, "same, heights taken from each band's median table level"),
    "refit_all_k13": ({"REFIT_ALL": "1"}, {"noise_k": 13}, "support plane refit by SVD on all readings within 6 mm"),
    "refit_all_twice_k16": ({"REFIT_ALL": "2"}, {"noise_k": 16}, ""),
    "median_of_3_planes": ({"BAG": "3"}, {}, "RANSAC with 3 seeds, the plane of median noise"),
    "median_of_5_planes": ({"BAG": "5"}, {}, ""),
    "lower_level_exclusive_6": ({"LOW_K": "6"}, {}, "components above 6 sigma (>= 5 mm) replace the one object they hold, or are new"),
    "edge_aware_k8_near_jumps_k12": ({"KFAR": "8", "NEAR_R": "4"}, {}, "8 sigma away from depth jumps, 12 sigma within 4 px"),
    "height_valleys_h20mm": ({"HMAX": "0.02"}, {}, "h-maxima watershed lines (h = 2 cm) as extra cut lines"),
    "table_colour_1pct": ({"CBLUR": "3"}, {"table_colour": 0.01}, "pixels of colours outside 99 % of the table's colour mass join the one object they touch or are new"),
    "split_with_grey_edges": ({"SPLIT_COLOUR": "grey"}, {}, "Canny grey edges added to the pieces of the blob split"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=str(ROOT / "data/real_rgbd"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/real_proposal_trials.json"))
    ap.add_argument("--only", default="", help="comma-separated variant names")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    frames = load_frames(args.labels, args.frames)
    res = {"benchmark": "bench/trials_recall2.py", "loadavg_before": [round(v, 2) for v in os.getloadavg()],
           "seeds": [0, 1, 2, 3], "variants": {}}
    names = args.only.split(",") if args.only else list(VARIANTS)
    for name in names:
        env, over, what = VARIANTS[name]
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            per = {}
            for seed in (0, 1, 2, 3):
                cfg = ProposalConfig(method="depth", **(over | {"seed": seed}))
                tot = ProposalScore()
                t0 = time.process_time()
                for fr in frames:
                    props = propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)
                    tot.add(score_proposals([p.box for p in props], [b for _, b in fr.objects], fr.ignore))
                per[seed] = {"recall": round(tot.recall, 3), "precision": round(tot.precision, 3), "merges": tot.merges,
                             "cpu_ms_per_frame": round(1000 * (time.process_time() - t0) / len(frames), 1)}
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        res["variants"][name] = {"env": env, "config": over, "what": what, "per_seed": per}
        print(name, json.dumps(per), flush=True)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
