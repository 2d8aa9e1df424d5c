#!/usr/bin/env python3
"""Benchmark the feature layer: throughput at batch 32 and one-frame latency, ONNX vs PyTorch.

Writes bench/results/features.json. The machine is shared, so every figure is measured over
several rounds and reported as best and median, with the load average at start and end.

    python bench/bench_features.py [--rounds 3] [--threads 2] [--quick]

ResNet-18/34 use random weights (no ImageNet weights are obtainable offline here): their speed
is what matters, and speed does not depend on the weight values.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_LOG = logging.getLogger("bench_features")


def machine_info() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import onnxruntime
    import torch

    return {
        "cpu_model": cpu,
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "cuda_available": bool(torch.cuda.is_available()),
    }


def frames(n: int, seed: int = 0) -> list[np.ndarray]:
    """Photo-like 640x480 RGB frames (smooth noise upsampled), so JPEG-free but realistic in size."""
    import cv2

    rng = np.random.default_rng(seed)
    return [
        cv2.resize(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8), (640, 480), interpolation=cv2.INTER_CUBIC)
        for _ in range(n)
    ]


def random_resnet_weights(arch: str, out_dir: Path) -> Path:
    import torch

    from cbcl_pr_ros.features.torchvision_compat import import_torchvision

    torch.manual_seed(0)
    p = out_dir / f"{arch}-random.pth"
    torch.save(getattr(import_torchvision().models, arch)(weights=None).state_dict(), p)
    return p


def summarise(values: list[float]) -> dict:
    return {"best": min(values), "median": statistics.median(values), "all": [round(v, 3) for v in values]}


def summarise_rate(values: list[float]) -> dict:
    return {"best": max(values), "median": statistics.median(values), "all": [round(v, 1) for v in values]}


def bench_backbone(bb, batch: list[np.ndarray], single: np.ndarray, rounds: int, lat_iters: int) -> dict:
    pre = bb.preprocess(batch)
    bb.extract_preprocessed(pre[:4])  # warm-up
    bb.extract([single])
    thr_model, thr_e2e, p50s, p95s, pre_ms = [], [], [], [], []
    for _ in range(rounds):
        t = time.perf_counter()
        bb.extract_preprocessed(pre)
        thr_model.append(len(batch) / (time.perf_counter() - t))
        t = time.perf_counter()
        bb.extract(batch)
        thr_e2e.append(len(batch) / (time.perf_counter() - t))
        lat = []
        for _ in range(lat_iters):
            t = time.perf_counter()
            bb.extract([single])
            lat.append((time.perf_counter() - t) * 1e3)
        p50s.append(float(np.percentile(lat, 50)))
        p95s.append(float(np.percentile(lat, 95)))
        t = time.perf_counter()
        for _ in range(20):
            bb.preprocess([single])
        pre_ms.append((time.perf_counter() - t) * 1e3 / 20)
    return {
        "batch32_img_per_s_model_only": summarise_rate(thr_model),
        "batch32_img_per_s_with_preprocessing": summarise_rate(thr_e2e),
        "single_frame_latency_ms_p50": summarise(p50s),
        "single_frame_latency_ms_p95": summarise(p95s),
        "preprocess_one_640x480_ms": summarise(pre_ms),
        "latency_iterations_per_round": lat_iters,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--latency-iters", type=int, default=40)
    ap.add_argument("--backbones", default="efficientnet_lite0,resnet18,resnet34")
    ap.add_argument("--runtimes", default="onnx,torch")
    ap.add_argument("--quick", action="store_true", help="1 round, few iterations (smoke run)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "features.json"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.quick:
        args.rounds, args.latency_iters = 1, 5

    from cbcl_pr_ros.features import make_backbone

    result: dict = {
        "benchmark": "features",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "loadavg_start": os.getloadavg(),
        "settings": {"threads": args.threads, "batch": args.batch, "input": "640x480 RGB frames -> 224x224",
                     "rounds": args.rounds, "device": "cpu"},
        "notes": [
            "ResNet-18/34 use random weights: no ImageNet ResNet weights are obtainable offline here; speed "
            "does not depend on weight values.",
            "batch32_img_per_s_model_only times the network on a preprocessed batch; _with_preprocessing "
            "includes crop/resize/normalise of 640x480 frames.",
            "single_frame_latency includes preprocessing of one 640x480 frame.",
            "The machine is shared with other agents: best and median over rounds are reported.",
        ],
        "backbones": {},
    }
    batch = frames(args.batch)
    single = frames(1, seed=99)[0]
    check = frames(8, seed=7)
    with tempfile.TemporaryDirectory(prefix="bench_features_") as tmp:
        tmpd = Path(tmp)
        for name in args.backbones.split(","):
            weights = None if name == "efficientnet_lite0" else random_resnet_weights(name, tmpd)
            entry: dict = {"weights": "pretrained ImageNet (package)" if weights is None else "random (see notes)"}
            feats = {}
            for runtime in args.runtimes.split(","):
                t = time.perf_counter()
                bb = make_backbone(name, runtime=runtime, weights_path=weights, threads=args.threads,
                                   device="cpu", cache_dir=tmpd / "onnx")
                build_s = time.perf_counter() - t
                _LOG.info("%s/%s built in %.1f s; measuring", name, runtime, build_s)
                r = bench_backbone(bb, batch, single, args.rounds, args.latency_iters if runtime == "onnx"
                                   else max(5, args.latency_iters // 4))
                r["build_seconds_incl_export"] = round(build_s, 2)
                if runtime == "onnx":
                    r["export_max_abs_diff"] = bb.max_abs_diff
                feats[runtime] = bb.extract(check)
                entry[runtime] = r
                _LOG.info("%s/%s: %s img/s (batch %d), p50 %s ms", name, runtime,
                          f"{r['batch32_img_per_s_model_only']['best']:.1f}", args.batch,
                          f"{r['single_frame_latency_ms_p50']['best']:.2f}")
                del bb
            if "onnx" in feats and "torch" in feats:
                entry["torch_vs_onnx_max_abs_diff"] = float(np.abs(feats["onnx"] - feats["torch"]).max())
                entry["feature_max_abs"] = float(np.abs(feats["torch"]).max())
            result["backbones"][name] = entry
    result["loadavg_end"] = os.getloadavg()
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    _LOG.info("wrote %s", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
