"""Prepare backbones ahead of time: export the ONNX model into the cache and report the check.

    python -m cbcl_pr_ros.features.prepare [--backbone efficientnet_lite0] [--weights FILE] [--cache-dir DIR]

Run once at set-up (or in CI before timing anything) so the first camera frame does not wait
~10 s for the export. Exits 1 with the error message when weights are missing or do not fit.
"""

from __future__ import annotations

import argparse
import logging
import sys

from .backbones import available_backbones, make_backbone
from .weights import WeightsMismatchError, WeightsNotFoundError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Export a backbone to ONNX into the cache and check it.")
    ap.add_argument("--backbone", default="efficientnet_lite0", choices=available_backbones())
    ap.add_argument("--weights", default=None,
                    help="torch state_dict file (ResNets: required unless in the torch hub cache)")
    ap.add_argument("--cache-dir", default=None,
                    help="default: $CBCL_CACHE_DIR/onnx or ~/.cache/cbcl_pr_ros/onnx")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        bb = make_backbone(args.backbone, runtime="onnx", weights_path=args.weights, threads=args.threads,
                           device="cpu", cache_dir=args.cache_dir)
    except (WeightsNotFoundError, WeightsMismatchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{bb.name}: {bb.onnx_path} (feature_dim {bb.feature_dim}, max abs diff vs PyTorch "
          f"{bb.max_abs_diff:.3g}, preprocessing {bb.preprocessing_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
