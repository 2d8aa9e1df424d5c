"""CPU time of the depth proposals under two settings, interleaved frame by frame (a fair A/B on a shared machine).

A load that changes during a run slows both settings alike: each frame is proposed ``--repeats`` times
under A and under B in turn, and each keeps its best (process CPU time, one OpenCV thread, scaled to
640x480 by pixel count, as bench_real.py does). Frames: the real set (bench/real_rgbd; assemble them first).
Run: ``source scripts/env.sh && python -P bench/bench_proposal_ab.py --b overhang_share=0.35 --a overhang_share=0``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import cv2
import numpy as np

from cbcl_pr_ros.perception import ProposalConfig, propose

sys.path.insert(0, str(Path(__file__).resolve().parent))  # real_rgbd_set beside this script
from real_rgbd_set import load_frames  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _config(pairs: list[str]) -> ProposalConfig:
    """A ProposalConfig from KEY=VALUE strings (numbers as floats, else the string)."""
    kw = {}
    for item in pairs:
        key, _, value = item.partition("=")
        try:
            kw[key] = float(value)
        except ValueError:
            kw[key] = value
    return ProposalConfig.with_overrides(**kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", nargs="*", default=[], metavar="KEY=VALUE", help="ProposalConfig overrides of A")
    ap.add_argument("--b", nargs="*", default=[], metavar="KEY=VALUE", help="ProposalConfig overrides of B")
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=os.environ.get("CBCL_REAL_RGBD", str(ROOT / "data/real_rgbd")))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="", help="also write the result here (JSON)")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    configs = {"a": _config(args.a), "b": _config(args.b)}
    frames = load_frames(args.labels, args.frames)
    load0 = os.getloadavg()
    best: dict[str, list[float]] = {k: [] for k in configs}
    for fr in frames:
        scale = 640 * 480 / (fr.rgb.shape[0] * fr.rgb.shape[1])
        times: dict[str, list[float]] = {k: [] for k in configs}
        for _ in range(args.repeats):
            for k, cfg in configs.items():
                t0 = time.process_time()
                propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)
                times[k].append((time.process_time() - t0) * 1000 * scale)
        for k in configs:
            best[k].append(min(times[k]))
    ratio = np.asarray(best["b"]) / np.asarray(best["a"])
    result = {"a": {"overrides": args.a, "median_ms": round(float(np.median(best["a"])), 2),
                    "p90_ms": round(float(np.quantile(best["a"], 0.9)), 2)},
              "b": {"overrides": args.b, "median_ms": round(float(np.median(best["b"])), 2),
                    "p90_ms": round(float(np.quantile(best["b"], 0.9)), 2)},
              "b_over_a": {"median": round(float(np.median(ratio)), 3), "max": round(float(ratio.max()), 3)},
              "frames": len(frames), "repeats": args.repeats,
              "loadavg": [[round(v, 2) for v in load0], [round(v, 2) for v in os.getloadavg()]]}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
