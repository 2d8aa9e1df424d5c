"""Why the depth proposals miss the real objects they miss: every labelled object not matched at IoU 0.5,
classified per source (bench/real_rgbd set), to know what to attack.

Kinds, first that applies:

- ``depth_missing``: under 60 % of the box's pixels hold a reading, or a transparent object (``clear_*``):
  the camera reads no depth on it, or a wrong one;
- ``too_low``: under 15 % of the box's work pixels stand above the seed threshold (``seed_sigmas`` of the
  camera's noise at their depth; the height map and noise the proposer computed): too low or thin for the
  noise of that camera at that distance;
- ``merged``: an unmatched proposal holds half of its box and half of another object's;
- ``pieces``: two or more proposals lie (70 %) inside its box;
- ``off_support``: found (IoU 0.5) when ``on_support_only`` is off: dropped as standing beyond the table;
- ``piece``: one proposal lies inside its box (the object found in part);
- ``absorbed``: half its box lies in a proposal matched to another object (joined to a neighbour, or missed
  beside it);
- ``loose``: the best proposal reaches IoU 0.2;
- ``missed``: nothing near it.

Writes runs/bench/real_failures.json (per source: counts, and each missed object's kind); ``--pictures DIR``
draws each frame with the missed objects named. Run:
``source scripts/env.sh && python -P bench/real_failures.py --frames /path/to/real_rgbd [--set key=value ...]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import out_path  # noqa: E402
from real_rgbd_set import _inside_fraction, load_frames, score_proposals  # noqa: E402

from cbcl_pr_ros.evaluation.experiments import machine_info  # noqa: E402
from cbcl_pr_ros.perception import ProposalConfig, box_iou, propose  # noqa: E402
from cbcl_pr_ros.perception import proposals as proposals_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("found", "depth_missing", "too_low", "merged", "pieces", "off_support", "piece", "absorbed", "loose", "missed")


class _HeightSpy:
    """Records the height map and per-pixel noise the proposer computes for a frame (its ``_noise_sigma``)."""

    def __init__(self) -> None:
        self.height = self.sigma = None
        self._orig = proposals_module._noise_sigma

    def __call__(self, height, z, valid, config):
        self.sigma = self._orig(height, z, valid, config)
        self.height = height
        return self.sigma

    def __enter__(self) -> "_HeightSpy":
        proposals_module._noise_sigma = self
        return self

    def __exit__(self, *exc) -> None:
        proposals_module._noise_sigma = self._orig


def classify(fr, cfg: ProposalConfig, cfg_off: ProposalConfig) -> list[tuple[str, str]]:
    """(object name, kind) for every labelled object of one frame."""
    with _HeightSpy() as spy:
        props = propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)
    boxes = [p.box for p in props]
    objs = [b for _, b in fr.objects]
    s = score_proposals(boxes, objs, fr.ignore)
    used = set(s.matched.values())
    off_boxes = [p.box for p in propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg_off)]
    valid = np.isfinite(fr.depth_m) & (fr.depth_m > 0.1)
    out = []
    for j, (name, o) in enumerate(fr.objects):
        if j in s.matched:
            out.append((name, "found"))
            continue
        x0, y0, x1, y1 = o
        too_low = False
        if spy.height is not None:
            sc = spy.height.shape[1] / fr.rgb.shape[1]
            bx0, by0 = int(x0 * sc), int(y0 * sc)
            bx1, by1 = max(int(x1 * sc), bx0 + 1), max(int(y1 * sc), by0 + 1)
            with np.errstate(invalid="ignore"):
                above = spy.height[by0:by1, bx0:bx1] > np.maximum(cfg.min_height_m, cfg.seed_sigmas * spy.sigma[by0:by1, bx0:bx1])
            too_low = float(above.mean()) < 0.15
        inside = sum(_inside_fraction(b, o) >= 0.7 for b in boxes)
        if float(valid[y0:y1, x0:x1].mean()) < 0.6 or name.startswith("clear_"):
            kind = "depth_missing"
        elif too_low:
            kind = "too_low"
        elif any(_inside_fraction(o, b) >= 0.5 and sum(_inside_fraction(o2, b) >= 0.5 for o2 in objs) >= 2
                 for i, b in enumerate(boxes) if i not in used):
            kind = "merged"
        elif inside >= 2:
            kind = "pieces"
        elif max((box_iou(b, o) for b in off_boxes), default=0.0) >= 0.5:
            kind = "off_support"
        elif inside == 1:
            kind = "piece"
        elif any(_inside_fraction(o, b) >= 0.5 for i, b in enumerate(boxes) if i in used):
            kind = "absorbed"
        elif max((box_iou(b, o) for b in boxes), default=0.0) >= 0.2:
            kind = "loose"
        else:
            kind = "missed"
        out.append((name, kind))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=os.environ.get("CBCL_REAL_RGBD", str(ROOT / "data/real_rgbd")))
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="ProposalConfig / ProposalRules overrides, e.g. unseen_ring_share=0")
    ap.add_argument("--out", default=str(out_path("real_failures.json")))
    ap.add_argument("--pictures", default="", help="write each frame with its missed objects named here")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    overrides = {}
    for kv in args.set:
        k, v = kv.split("=", 1)
        overrides[k] = json.loads(v) if v[:1] in "-0123456789[tfn" else v
    cfg = ProposalConfig.with_overrides(method="depth", **overrides)
    cfg_off = ProposalConfig.with_overrides(method="depth", **(overrides | {"on_support_only": False}))
    counts: dict = defaultdict(lambda: dict.fromkeys(KINDS, 0))
    missed = defaultdict(list)
    for fr in load_frames(args.labels, args.frames):
        kinds = classify(fr, cfg, cfg_off)
        for (name, kind), (_, box) in zip(kinds, fr.objects):
            counts[fr.source][kind] += 1
            if kind != "found":
                missed[fr.source].append([fr.id, name, kind])
        if args.pictures:
            img = cv2.cvtColor(fr.rgb, cv2.COLOR_RGB2BGR)
            for (name, kind), (_, (x0, y0, x1, y1)) in zip(kinds, fr.objects):
                if kind != "found":
                    cv2.rectangle(img, (x0, y0), (x1 - 1, y1 - 1), (0, 255, 0), 2)
                    cv2.putText(img, kind, (x0, y0 + 12), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 255, 0), 1)
            Path(args.pictures).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(Path(args.pictures) / f"{fr.id}.png"), img)
    total = dict.fromkeys(KINDS, 0)
    for c in counts.values():
        for k, v in c.items():
            total[k] += v
    res = {"benchmark": "real_failures", "machine": machine_info(), "config_overrides": overrides, "kinds": KINDS,
           "per_source": {k: dict(v) for k, v in sorted(counts.items())}, "all": total,
           "missed": {k: v for k, v in sorted(missed.items())}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print("source | " + " | ".join(KINDS))
    for src, c in sorted(counts.items()):
        print(src + " | " + " | ".join(str(c[k]) for k in KINDS))
    print("all | " + " | ".join(str(total[k]) for k in KINDS))


if __name__ == "__main__":
    main()
